"""RemoveUnitLoops: replace `for i in range(m, m + 1): body` with `body[i := m]`.

Why: splits and user code leave extent-1 loops behind; the tiling pass and the lowering treat
every loop as a grid, tile or serial axis, and a unit loop would add an empty axis.
Assumes: nothing. Thread-bound loops and loops that carry annotations are kept, because their
extent or annotations matter to later stages. Deterministic pipelines (determinism.py) also keep
the unit loops that lead a kernel and are spatial for all its blocks, where the kernel reduces in
an order-sensitive way: a batch of one is then tiled like a batch of 300 (the same tl.dot, the
same chunks; without its row loop a softmax's sums would run element by element, a matmul would
become a matrix-vector sum). The unit loops fusion leaves inside a kernel still go, and a block
that fusion bound to the kept loop's only value (`vi = 0`) is bound to the loop again (`vi = i`,
the same value), so the kept loop is spatial for every block of the kernel.
A unit loop that leads a kernel and holds several statements is kept too, in every pipeline: it
is the shared loop a fusion put them under, and without it they would be separate kernels (their
intermediates back in memory, and the fusion record's claim false).
"""

from __future__ import annotations

import tvm_ffi
from tvm import ir, s_tir, tirx

from tir_passes.analyses.determinism import order_sensitive
from tir_passes.analyses.nest import SPATIAL, bound_iter_var, loop_chain, loop_kind, realizes_under
from tir_passes.infra.pass_util import s_tir_pass, static_int, top_level_statements


def _batch_loops(func: tirx.PrimFunc) -> set[int]:
    """Handles of the leading loops of kernels with an order-sensitive reduction that are spatial
    for every block under them (the loops a batch or a row count would be)."""
    kept: set[int] = set()
    for stmt in top_level_statements(func):
        realizes = realizes_under(stmt)
        if not any(order_sensitive(r.block) for r in realizes):
            continue
        for loop in loop_chain(stmt)[0]:
            if any(loop_kind(loop, r) != SPATIAL and bound_iter_var(r, loop.loop_var) is not None
                   for r in realizes_under(loop)):
                break
            kept.add(loop.loop_var.__chandle__())
    return kept


def _fused_unit_loops(func: tirx.PrimFunc) -> set[int]:
    """Handles of the unit loops that lead a kernel and hold a sequence of statements."""
    kept: set[int] = set()
    for stmt in top_level_statements(func):
        node = stmt
        while isinstance(node, tirx.For) and static_int(node.extent) == 1:
            if isinstance(node.body, tirx.SeqStmt):
                kept.add(node.loop_var.__chandle__())
                break
            node = node.body
    return kept


def _bound_again(loop: tirx.For) -> tirx.For:
    """Blocks under the kept unit loop that do not use it, with their first spatial variable of
    extent 1 that is bound to the loop's only value bound to the loop instead."""
    def rebind(realize: s_tir.SBlockRealize):
        if bound_iter_var(realize, loop.loop_var) is not None:
            return realize
        values = list(realize.iter_values)
        for index, (iv, value) in enumerate(zip(realize.block.iter_vars, values)):
            if (iv.iter_type == tirx.IterVar.DataPar and static_int(iv.dom.extent) == 1
                    and static_int(value) is not None and static_int(value) == static_int(loop.min)):
                values[index] = loop.loop_var
                return s_tir.SBlockRealize(values, realize.predicate, realize.block)
        return realize

    body = tvm_ffi.structural_map(loop.body, (s_tir.SBlockRealize, rebind))
    if body.same_as(loop.body):
        return loop
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)


def _inline_unit_loop(loop: tirx.For, kept: set[int]) -> tirx.Stmt:
    if loop.annotations or loop.kind == tirx.ForKind.THREAD_BINDING:
        return loop
    if not (isinstance(loop.extent, tirx.IntImm) and loop.extent.value == 1):
        return loop
    if loop.loop_var.__chandle__() in kept:
        return _bound_again(loop)
    bind = {loop.loop_var: loop.min}
    return tvm_ffi.structural_map(loop.body, (ir.Var, lambda v: bind.get(v, v)))


def remove_unit_loops(func: tirx.PrimFunc, deterministic: bool = False) -> tirx.PrimFunc:
    kept = _fused_unit_loops(func) | (_batch_loops(func) if deterministic else set())
    body = tvm_ffi.structural_map(func.body, (tirx.For, lambda loop: _inline_unit_loop(loop, kept)))
    return func if body.same_as(func.body) else func.with_body(body)


def RemoveUnitLoops(deterministic: bool = False):
    return s_tir_pass("RemoveUnitLoops", lambda func: remove_unit_loops(func, deterministic))
