"""RemoveUnitLoops: replace `for i in range(m, m + 1): body` with `body[i := m]`.

Why: splits and user code leave extent-1 loops behind; the tiling pass and the lowering treat
every loop as a grid, tile or serial axis, and a unit loop would add an empty axis.
Assumes: nothing. Thread-bound loops and loops that carry annotations are kept, because their
extent or annotations matter to later stages.
"""

from __future__ import annotations

import tvm_ffi
from tvm import ir, tirx

from tir_passes.infra.pass_util import s_tir_pass


def _inline_unit_loop(loop: tirx.For) -> tirx.Stmt:
    if loop.annotations or loop.kind == tirx.ForKind.THREAD_BINDING:
        return loop
    if not (isinstance(loop.extent, tirx.IntImm) and loop.extent.value == 1):
        return loop
    bind = {loop.loop_var: loop.min}
    return tvm_ffi.structural_map(loop.body, (ir.Var, lambda v: bind.get(v, v)))


def remove_unit_loops(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (tirx.For, _inline_unit_loop))
    return func if body.same_as(func.body) else func.with_body(body)


def RemoveUnitLoops():
    return s_tir_pass("RemoveUnitLoops", remove_unit_loops)
