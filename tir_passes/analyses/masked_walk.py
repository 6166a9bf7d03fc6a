"""Whether a walk along a loop is masked: some block under the loop selects on a condition that
reads the loop's position (`T.Select(j > i, ...)`, `T.if_then_else(j <= i, ...)`, the canonical
mask of CanonicalMasks). Tiling sizes an online walk by it (tile_sizes.online_sizes): a masked
walk is the one a tile window cuts short, with diagonal tiles apart.

Assumes: blocks as the pipeline leaves them before Tiling (their iterators bound to loop
expressions); a condition that reads only other values (OnlineSoftmax's `M_prev == M` rescale)
is not a mask of the walk.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.analyses.nest import call_name, uses_var, vars_of


def walk_is_masked(subs, loop: tirx.For) -> bool:
    """`subs`: (loops, SBlockRealize) pairs of a fused nest; True when a block under `loop` selects
    on its position."""
    for loops, realize in subs:
        if not any(l.same_as(loop) for l in loops):
            continue
        along = [var for var, value in zip(realize.block.iter_vars, realize.iter_values)
                 if uses_var(value, loop.loop_var)]
        if any(_reads(condition, along) for condition in _conditions(realize.block.body)):
            return True
    return False


def _conditions(body) -> list:
    found = []

    def visit_select(node):
        found.append(node.condition)

    def visit_call(node):
        if call_name(node) == "if_then_else":
            found.append(node.args[0])

    tvm_ffi.structural_walk(body, (tirx.Select, visit_select))
    tvm_ffi.structural_walk(body, (tvm.ir.Call, visit_call))
    return found


def _reads(condition, iter_vars) -> bool:
    return any(v.same_as(iv.var) for v in vars_of(condition) for iv in iter_vars)
