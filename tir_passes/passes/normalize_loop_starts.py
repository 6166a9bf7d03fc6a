"""NormalizeLoopStarts: rewrite `for i in range(m, m + n): body` as `for i in range(n): body[i := i + m]`.

Why: the tiling pass splits loops with TVM's schedule, which only splits loops that start at 0,
and the lowering maps every loop start to a tile offset of 0. Users write offset loops
(`T.serial(2, 28)`), so the start moves into the block bindings instead.
Assumes: nothing. Thread-bound loops keep their start (their range is part of the launch).
"""

from __future__ import annotations

import tvm_ffi
from tvm import ir, sym, tirx

from tir_passes.analyses.nest import uses_var
from tir_passes.infra.pass_util import s_tir_pass


def _starts_at_zero(loop: tirx.For) -> bool:
    return isinstance(loop.min, tirx.IntImm) and loop.min.value == 0


def _shift_loop(loop: tirx.For) -> tirx.Stmt:
    if _starts_at_zero(loop) or loop.kind == tirx.ForKind.THREAD_BINDING:
        return loop
    shifted = loop.loop_var + loop.min
    analyzer = sym.Analyzer()
    body = tvm_ffi.structural_map(loop.body, (ir.Var, lambda v: shifted if v.same_as(loop.loop_var) else v))
    body = tvm_ffi.structural_map(body, (tirx.Add, lambda e: analyzer.simplify(e) if uses_var(e, loop.loop_var) else e))
    zero = tirx.const(0, loop.loop_var.ty.dtype)
    return tirx.For(loop.loop_var, zero, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)


def normalize_loop_starts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (tirx.For, _shift_loop))
    return func if body.same_as(func.body) else func.with_body(body)


def NormalizeLoopStarts():
    return s_tir_pass("NormalizeLoopStarts", normalize_loop_starts)
