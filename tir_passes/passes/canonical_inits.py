"""CanonicalInits: a sum, product, max or min written without T.init starts from op's identity in T.init.

Users write a reduction's start in three ways: `with T.init(): C[vi, vj] = 0` (the form the later
passes read), a nest of its own before it that fills C (`C = 0`, or `C = bias[j]`: NumPy's
`C = zeros(...); C += A @ B`), or nothing at all, accumulating into what C holds on entry (a GEMM with
beta = 1). Tiling turns only the first into a `tl.dot` with its accumulator in registers: the other two
reached the kernels as a scalar loop over K with C loaded and stored at every step (3000×5000×1000
fp16: 4.0 ms by the hardware model on the H100 against 85 µs, `benchmarks/gemm_forms_model.py`).

What it rewrites, for a top-level plain nest (reduction_apart.plain_nest: no T.where, each block
variable its own loop over its whole domain, every reduction at least one step) whose one block is
`X[v..] = X[v..] op t` (op one of +, *, max, min in a dtype with op's identity; t not reading X; no
T.init; its store indices its spatial variables, each once, over all of X):
1. The plain nest right before it fills X (one block of spatial variables only storing `X[w..] = f`,
   its indices its variables, each once, over all of X, f not reading X): f becomes the update's
   T.init, at the same element, and the fill's nest goes.
2. Else, where X holds values on entry (a parameter, or an intermediate an earlier nest writes): the
   update reduces into a new intermediate `X_sum` (`X_product`, ...) with T.init op's identity, and a
   nest after it writes `X = X op X_sum` (tir_passes/passes/reduction_apart.py).
An update of an intermediate nothing wrote before reads undefined values: it stays, as written; so does
a nest under a predicate, a partial fill (`C[vi, vi] = 0`), or a reduction that may run no step (a
symbolic extent: its T.init would not run where the fill did).

Soundness: 1 is exact (T.init runs the fill at the element's first reduction step, which every element
has, and f reads nothing the update writes). 2 is exact for integer sums and products, and for max and
min up to which NaN or signed zero a tie keeps; for a float sum or product the old value joins last
instead of first, a reassociation like the tiled reduction's own (within the numerics check after the
pass).

Assumes: HoistAllocations ran (intermediates are root allocations); CanonicalUpdates ran (the stored
element is the update's first operand).
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.expressions import loads_of, writes_buffer
from tir_passes.analyses.nest import blocks_under, is_reduction_block
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, top_level_statements, \
    with_block_regions, with_root_block
from tir_passes.passes.reduction_apart import plain_nest, reduction_apart, update_of, updated_whole


def _uninitialized_update(stmt) -> tuple[s_tir.SBlockRealize, tirx.BufferStore] | None:
    nest = plain_nest(stmt)
    if nest is None:
        return None
    realize = nest[1]
    block = realize.block
    if block.init is not None or not is_reduction_block(block):
        return None
    store = update_of(block)
    if store is None or not updated_whole(realize, store):
        return None
    return realize, store


def _fill_of(stmt, buffer) -> tuple[s_tir.SBlockRealize, tirx.BufferStore] | None:
    """The nest's block and store when it fills all of `buffer` with values that do not read it."""
    nest = plain_nest(stmt)
    if nest is None:
        return None
    realize = nest[1]
    block, store = realize.block, realize.block.body
    if block.init is not None or is_reduction_block(block) or not isinstance(store, tirx.BufferStore):
        return None
    if not store.buffer.same_as(buffer) or loads_of(store.value, buffer):
        return None
    return (realize, store) if updated_whole(realize, store) else None


def _with_init(stmt, realize: s_tir.SBlockRealize, store: tirx.BufferStore, fill: tirx.BufferStore):
    """The update's block with the fill's value, at the update's element, as its T.init."""
    at = {var.__chandle__(): index for var, index in zip(fill.indices, store.indices)}
    value = tvm_ffi.structural_map(fill.value, (tirx.Var, lambda v: at.get(v.__chandle__(), v)))
    block = realize.block
    init = tirx.BufferStore(store.buffer, value, list(store.indices), span=fill.span)
    return _replacing(stmt, block, replace_block(block, init=init))


def _replacing(stmt, old: s_tir.SBlock, new: s_tir.SBlock):
    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, lambda b: new if b.same_as(old) else b))


def _holds_values(buffer, params: list, earlier: list) -> bool:
    return any(p.same_as(buffer) for p in params) or any(writes_buffer(stmt, buffer) for stmt in earlier)


def canonical_inits(func: tirx.PrimFunc) -> tirx.PrimFunc:
    root = root_block(func)
    params = [p for p in func.params if tirx.is_buffer_var(p)]
    buffer_names = {b.name for b in [*params, *root.alloc_buffers]}
    block_names = {b.name_hint for b in blocks_under(func.body)}
    statements, added, changed = [], [], False
    for stmt in top_level_statements(func):
        found = _uninitialized_update(stmt)
        if found is None:
            statements.append(stmt)
            continue
        realize, store = found
        fill = _fill_of(statements[-1], store.buffer) if statements else None
        if fill is not None:
            statements[-1:] = [_with_init(stmt, realize, store, fill[1])]
        elif _holds_values(store.buffer, params, statements):
            reduction, writing, apart = reduction_apart(stmt, buffer_names, block_names, keep_old=True)
            statements += [reduction, writing]
            added.append(apart)
        else:
            statements.append(stmt)
            continue
        changed = True
    if not changed:
        return func
    allocs = list(root.alloc_buffers) + added
    buffers = {b: b for b in [*params, *allocs]}
    statements = [with_block_regions(stmt, buffers) for stmt in statements]
    body = statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)
    return with_root_block(func, replace_block(root, body=body, alloc_buffers=allocs))


def CanonicalInits():
    return s_tir_pass("CanonicalInits", canonical_inits)
