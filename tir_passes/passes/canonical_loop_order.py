"""CanonicalLoopOrder: the spatial loops of a nest in the order of the axes of the buffer it
writes; reduction loops keep their places.

Why: `for b, h, i, j in T.grid(...)` and `for j, i, h, b in T.grid(...)` with the same
`T.axis.remap` compute the same thing, but the later passes read the loop order (which loops
fuse, which axis is a row, which tile axis walks memory contiguously). Without one order, the
kernel plan depends on how the user happened to write the grid (tests/plan_invariance).

What it rewrites: a top-level perfect nest of serial loops starting at 0 without annotations,
around one block whose variables are bound one to one to the loops (T.axis.remap), and whose body
is one store whose indices are the spatial block variables, each once. The spatial loops are
permuted into the store's index order, in the slots the spatial loops held; the block and its
bindings are unchanged (they name the loop variables), so every iteration computes the same
value. Reordering spatial loops never changes the order in which one element's reduction is
accumulated (the reduction loops keep their relative order), so the result is bit for bit the
same.

Assumes: nothing (nests that do not fit the description are left as they are).
"""

from __future__ import annotations

from tvm import s_tir, tirx

from tir_passes.analyses.nest import perfect_nest
from tir_passes.infra.pass_util import root_block, s_tir_pass, top_level_statements, replace_block, with_root_block

SPATIAL = tirx.IterVar.DataPar


def plain_loop(loop: tirx.For) -> bool:
    return (loop.kind == tirx.ForKind.SERIAL and not loop.annotations and isinstance(loop.min, tirx.IntImm)
            and loop.min.value == 0)


def loop_of_block_var(realize: s_tir.SBlockRealize, loops: list[tirx.For]) -> dict[int, int] | None:
    """block variable handle -> index of the loop it is bound to, when the binding is one to one."""
    found: dict[int, int] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        index = next((k for k, loop in enumerate(loops) if loop.loop_var.same_as(value)), None)
        if index is None or index in found.values():
            return None
        found[iv.var.__chandle__()] = index
    return found if len(found) == len(loops) else None


def canonical_order(loops: list[tirx.For], realize: s_tir.SBlockRealize) -> list[int] | None:
    """The permutation of `loops` (new position -> old index), or None to leave the nest."""
    block = realize.block
    if not all(plain_loop(loop) for loop in loops) or not isinstance(block.body, tirx.BufferStore):
        return None
    loop_of = loop_of_block_var(realize, loops)
    if loop_of is None:
        return None
    spatial_slots = sorted(loop_of[iv.var.__chandle__()] for iv in block.iter_vars if iv.iter_type == SPATIAL)
    index_loops = []
    for index in block.body.indices:
        if not isinstance(index, tirx.Var) or index.__chandle__() not in loop_of:
            return None
        index_loops.append(loop_of[index.__chandle__()])
    if sorted(index_loops) != spatial_slots:
        return None   # an index is a reduction variable, repeats, or a spatial variable is not an index
    order = list(range(len(loops)))
    for slot, loop_index in zip(spatial_slots, index_loops):
        order[slot] = loop_index
    return order


def _reordered(stmt, order_of):
    nest = perfect_nest(stmt)
    if nest is None:
        return stmt
    loops, realize = nest
    order = order_of(loops, realize)
    if order is None or order == list(range(len(loops))):
        return stmt
    body = realize
    for index in reversed(order):
        loop = loops[index]
        body = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations,
                        span=loop.span)
    return body


def reorder_nests(func: tirx.PrimFunc, order_of) -> tirx.PrimFunc:
    """Every top-level perfect nest's loops permuted by `order_of(loops, realize)` (new position ->
    old index; None leaves the nest); the block and its bindings unchanged."""
    statements = top_level_statements(func)
    reordered = [_reordered(stmt, order_of) for stmt in statements]
    if all(new.same_as(old) for new, old in zip(reordered, statements)):
        return func
    body = reordered[0] if len(reordered) == 1 else tirx.SeqStmt(reordered)
    return with_root_block(func, replace_block(root_block(func), body=body))


def canonical_loop_order(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return reorder_nests(func, canonical_order)


def CanonicalLoopOrder():
    return s_tir_pass("CanonicalLoopOrder", canonical_loop_order)
