"""A reduction moved apart from what it writes into: `X[v..] = X[v..] op t` over a nest becomes a
reduction into a new intermediate `X_op` that starts from op's identity (T.init), and a nest after it
that writes X from X_op (`X = X op X_op`, or `X = X_op`). Two passes ask for it: CanonicalInits (a sum
that starts from what X held on entry) and FactorOutOfSums (a scaled sum written into a parameter,
whose scale then moves onto the readers of the intermediate, the new nest among them).

Assumes: the nest is plain (`plain_nest`: no predicate, each variable its own loop over its domain, every
reduction at least one step, so the intermediate's T.init runs for every element), its one block's store
indices are its spatial variables, each once, over X's whole shape (`updated_whole`), and its update's term
does not read X (`update_of`).
"""

from __future__ import annotations

from tvm import s_tir, sym, tirx

from tir_passes.analyses.expressions import loads_of
from tir_passes.analyses.nest import is_self_load, perfect_nest, unique_name
from tir_passes.infra.pass_util import pointwise_nest, replace_block, static_int

DataPar = tirx.IterVar.DataPar
UPDATES = {tirx.Add: "sum", tirx.Mul: "product", tirx.Max: "max", tirx.Min: "min"}
INFINITE_FLOATS = ("float16", "bfloat16", "float32", "float64")


def identity(op: type, dtype: str):
    """The value op starts from: 0, 1, -inf / +inf for floats with infinities, the dtype's extremes for
    integers; None for a dtype without one (float8's e4m3 has no infinity)."""
    if op is tirx.Add:
        return tirx.const(0, dtype)
    if op is tirx.Mul:
        return tirx.const(1, dtype)
    low = op is tirx.Max
    if dtype in INFINITE_FLOATS:
        return tirx.const(float("-inf") if low else float("inf"), dtype)
    if dtype.startswith(("int", "uint")):
        return tirx.min_value(dtype) if low else tirx.max_value(dtype)
    return None


def plain_nest(stmt) -> tuple[list[tirx.For], s_tir.SBlockRealize] | None:
    """(loops, realize) of a nest that runs its block at every point of its variables' domains, once,
    in order: loops around one block, no predicate (T.where), each block variable bound to its own loop,
    which starts at the variable's minimum and runs its extent, every reduction at least once (a
    reduction of no steps never runs its T.init, where a fill before it would have run)."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    loops, realize = nest
    if not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value):
        return None
    by_var = {loop.loop_var.__chandle__(): loop for loop in loops}
    bound = set()
    analyzer = sym.Analyzer()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        loop = by_var.get(value.__chandle__()) if isinstance(value, tirx.Var) else None
        if loop is None or value.__chandle__() in bound:
            return None
        bound.add(value.__chandle__())
        covers = analyzer.can_prove_equal(loop.min, iv.dom.min) and analyzer.can_prove_equal(loop.extent, iv.dom.extent)
        if not covers:
            return None
        if iv.iter_type != DataPar and not analyzer.can_prove(iv.dom.extent >= 1):
            return None
    return loops, realize


def update_of(block: s_tir.SBlock) -> tirx.BufferStore | None:
    """The block's store when its body is one commutative self-update `X = X op t` whose t does not read X,
    of a dtype op has an identity in."""
    store = block.body
    if not isinstance(store, tirx.BufferStore) or type(store.value) not in UPDATES:
        return None
    if identity(type(store.value), str(store.buffer.dtype)) is None:
        return None
    if not is_self_load(store.value.a, store) or loads_of(store.value.b, store.buffer):
        return None
    return store


def updated_whole(realize: s_tir.SBlockRealize, store: tirx.BufferStore) -> bool:
    """The store's indices are the block's spatial variables, each once, each from 0 over its axis of
    the buffer (or 0 on an axis of extent 1, where a pass removed the unit loop): every element of the
    buffer is the update of one spatial point."""
    spatial = [iv for iv in realize.block.iter_vars if iv.iter_type == DataPar]
    if len(store.indices) != len(store.buffer.shape):
        return False
    analyzer = sym.Analyzer()
    owners = set()
    for index, dim in zip(store.indices, store.buffer.shape):
        if static_int(index) == 0 and static_int(dim) == 1:
            continue
        owner = [iv for iv in spatial if iv.var.same_as(index)]
        if len(owner) != 1 or owner[0].var.__chandle__() in owners \
                or not analyzer.can_prove_equal(owner[0].dom.min, 0) \
                or not analyzer.can_prove_equal(owner[0].dom.extent, dim):
            return False
        owners.add(owner[0].var.__chandle__())
    return len(owners) == len(spatial)


def _into(stmt, block: s_tir.SBlock):
    """`stmt` (a perfect nest) with `block` in place of its block."""
    if isinstance(stmt, tirx.For):
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, _into(stmt.body, block),
                        stmt.thread_binding, stmt.annotations, span=stmt.span)
    return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)


def _axis_names(realize: s_tir.SBlockRealize, store: tirx.BufferStore) -> list[tuple[str, str]]:
    """(loop name, block variable name) of each axis of the stored element, as the update names them."""
    bound = {iv.var.__chandle__(): (value, iv.var) for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    names = []
    for axis, index in enumerate(store.indices):
        value, var = bound.get(index.__chandle__(), (None, None))   # a unit axis's constant index: no variable
        loop = value.name if isinstance(value, tirx.Var) else f"i{axis}"
        names.append((loop, var.name if var is not None else f"v{axis}"))
    return names


def reduction_apart(stmt, buffer_names: set[str], block_names: set[str], keep_old: bool):
    """(the reduction nest into the new intermediate, the nest writing X after it, the intermediate).
    keep_old: X = X op X_op (the update's old value stays in the result); else X = X_op. Regions of
    the reduction's block are the caller's to recompute (get_sblock_read_write_region)."""
    _, realize = perfect_nest(stmt)
    block, store = realize.block, realize.block.body
    op = type(store.value)
    target = store.buffer
    apart = tirx.decl_buffer(target.shape, target.dtype, unique_name(f"{target.name}_{UPDATES[op]}", buffer_names),
                             layout=None)
    here = list(store.indices)
    update = tirx.BufferStore(apart, op(tirx.BufferLoad(apart, here), store.value.b), here, span=store.span)
    init = tirx.BufferStore(apart, identity(op, str(target.dtype)), here)
    reduction = _into(stmt, replace_block(block, body=update, init=init))
    name = unique_name(f"{block.name_hint}_{'combine' if keep_old else 'copy'}", block_names)
    if keep_old:
        writing = pointwise_nest(target, lambda at: op(tirx.BufferLoad(target, at), tirx.BufferLoad(apart, at)),
                                 [target, apart], name, _axis_names(realize, store))
    else:
        writing = pointwise_nest(target, lambda at: tirx.BufferLoad(apart, at), [apart], name,
                                 _axis_names(realize, store))
    return reduction, writing, apart
