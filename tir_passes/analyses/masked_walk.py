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

from tir_passes.analyses.nest import select_parts, uses_var, vars_of


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
    """The conditions of every select in `body` (T.Select and T.if_then_else alike)."""
    found = []

    def visit(expr):
        parts = select_parts(expr)
        if parts is not None:
            found.append(parts[0])

    tvm_ffi.structural_walk(body, (tirx.Select, visit))
    tvm_ffi.structural_walk(body, (tvm.ir.Call, visit))
    return found


def _reads(condition, iter_vars) -> bool:
    return any(v.same_as(iv.var) for v in vars_of(condition) for iv in iter_vars)
