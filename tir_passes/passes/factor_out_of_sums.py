"""FactorOutOfSums: a factor that does not depend on a sum's reduction variables leaves the sum.
Weights normalized before a sum (`P = e / l`, then `Y = Σ_j f(P) · ...`) are normalized after it
(`P = e`, and every reader of Y reads `Y / l`); a constant scale inside a sum
(`S = Σ_d Q · K · c`) scales its result instead (`S = Σ_d Q · K`, readers read `S * c`).

Why: attention written as "normalize the probabilities, then multiply by V" divides every weight
by the row sum l before P·V. l depends on the whole row, so the contraction cannot start before
the row's last exponential: no online (flash) form, four kernels. Dividing the contraction's
result instead is the flash form (examples/attention.py), which OnlineSoftmax and LoopFusion then
turn into one kernel. The same holds for any row-normalized weights feeding a sum.

What it rewrites: an elementwise block (spatial variables only) that writes an intermediate
`P[v..] = e / L[w..]` and whose readers are all later sum reductions `Y[r..] = Y[r..] + t` with
T.init zero, Y an intermediate, that read P where L's element does not depend on the reduction
variables, through casts and products only (t is linear in P). Then P's block stores `e`, and
every load of Y after its sum reads `Y / L` at the element of L that Y's element was divided by.

Soundness: Σ_j (e_j / l) · x_j = (Σ_j e_j · x_j) / l exactly in real arithmetic (l does not depend
on j); in floating point the roundings move (as in flash attention, where the unnormalized
weights are rounded to the contraction's operand type); the numerics check after the pass
compares the result with the input's.

The division may also sit in the sum's own term (P inlined: `Y = Y + Cast(e / L[w..]) * x`): the
same rewrite, without P's block.

Scales: `Y[r..] = Y[r..] + a * f` (f among the product's factors the sum's reduction does not vary:
a float constant, or a row value such as `rsqrt(var[i] + eps)` or `d_var[i]`, using only Y's index
variables and reading no buffer a later nest writes; T.init zero, Y an intermediate no later nest
writes) becomes `Y[r..] = Y[r..] + a`, and later loads of Y read `Y * f` at their element:
Σ (a · f) = (Σ a) · f in real arithmetic (exactly for a power-of-two constant). Why: the scale
written inside the Q·Kᵀ block is not a plain product of two operands, so the contraction is not a
tl.dot; the scale outside (examples/attention.py) is. A norm backward's row sums (LayerNorm's d_var,
d_mean_1, d_mean_0; RMSNorm's d_sum_sq) then wait for no statistic but the mean: LayerNorm's four
dependent block reductions a row are two levels, RMSNorm's two are one (H200, 16384×8192 fp16,
benchmarks/norm_backward_chains_gpu.py: LayerNorm 280.9 → 246.8 µs, RMSNorm 225.2 → 221.8 µs).

A sum into a parameter Y (`C = Σ_k α · A · B`, written into the output) has no later loads to scale: it
first sums into a new intermediate, a nest after it copying it into Y (tir_passes/passes/reduction_apart.py),
and the scale then moves onto that copy (3000×5000×1000 fp16: a `tl.dot` again, where the scale in the
term had made the contraction no dot at all, 4.0 ms by the model against 85.6 µs).

A factor the reduction does vary cannot leave the sum; a second step (scale_onto_computed_operand.py)
moves it from a loaded operand onto one computed in registers (attention's dV = Σ_i f16(e) · f16(dO / l)
as Σ_i f16(e / l) · dO), so the loaded operand reaches the tensor cores as loaded.

Assumes: HoistAllocations ran (intermediates are root allocations); the nests are top-level
perfect nests (TVMScript's T.grid + T.axis.remap), as written before LoopFusion.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import blocks_under, is_reduction_block, is_self_load, is_zero, perfect_nest, uses_var, \
    vars_of
from tir_passes.analyses.expressions import factors_of, is_float, is_one, loads_of, product_of, reads_buffer, \
    sources_of, used_vars, writes_buffer
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, top_level_statements, \
    with_block_regions, with_root_block
from tir_passes.passes.reduction_apart import plain_nest, reduction_apart, update_of, updated_whole
from tir_passes.passes.canonical_casts import without_no_op
from tir_passes.passes.scale_onto_computed_operand import scale_onto_computed_operand

REDUCE = tirx.IterVar.CommReduce


@dataclass(frozen=True)
class _Normalized:
    """P's nest: its block stores `numerator / L[divisor indices]`."""

    index: int
    realize: s_tir.SBlockRealize
    buffer: object
    numerator: object
    divisor: tvm.ir.TensorLoad


def _normalized(stmt, index: int, intermediates) -> _Normalized | None:
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    realize = nest[1]
    block = realize.block
    store = block.body
    if is_reduction_block(block) or block.init is not None or not isinstance(store, tirx.BufferStore):
        return None
    if not any(store.buffer.same_as(b) for b in intermediates) or not isinstance(store.value, tirx.Div) \
            or not is_float(store.value):
        return None
    divisor = store.value.b
    if not isinstance(divisor, tvm.ir.TensorLoad) or not all(isinstance(i, tirx.Var) for i in store.indices):
        return None
    return _Normalized(index, realize, store.buffer, store.value.a, divisor)


def _linear_in(expr, load) -> bool:
    """`expr` is `load` under casts and products with factors that do not read it."""
    if expr.same_as(load):
        return True
    if isinstance(expr, tirx.Cast):
        return _linear_in(expr.value, load)
    if isinstance(expr, tirx.Mul):
        inside = [side for side in (expr.a, expr.b) if loads_of(side, load.source)]
        return len(inside) == 1 and _linear_in(inside[0], load)
    return False


def _divisor_at(normalized: _Normalized, load: tvm.ir.TensorLoad):
    """L's element for the P element `load` reads, in the reader's variables."""
    store = normalized.realize.block.body
    binding = {var.__chandle__(): index for var, index in zip(store.indices, load.indices)}
    return tvm_ffi.structural_map(normalized.divisor, (tirx.Var, lambda v: binding.get(v.__chandle__(), v)))


def _sum_reader(stmt, normalized: _Normalized, intermediates):
    """(Y's store, the divisor in terms of Y's indices) when `stmt` is a sum that reads P as the
    description says, else None."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    block = nest[1].block
    store = block.body
    if not isinstance(store, tirx.BufferStore) or block.init is None or not isinstance(block.init, tirx.BufferStore):
        return None
    if not is_zero(block.init.value) or not isinstance(store.value, tirx.Add) or not is_self_load(store.value.a, store):
        return None
    if not any(store.buffer.same_as(b) for b in intermediates) or loads_of(store.value.b, store.buffer):
        return None
    loads = loads_of(store.value.b, normalized.buffer)
    if len(loads) != 1 or not _linear_in(store.value.b, loads[0]):
        return None
    divisor = _divisor_at(normalized, loads[0])
    reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == REDUCE]
    if any(uses_var(i, v) for i in divisor.indices for v in reduce_vars):
        return None
    # the divisor's element in terms of Y's element: Y's indices must be the block's plain variables
    if not all(isinstance(i, tirx.Var) for i in store.indices):
        return None
    positions = {var.__chandle__(): k for k, var in enumerate(store.indices)}
    if any(isinstance(v, tirx.Var) and v.__chandle__() not in positions for i in divisor.indices for v in vars_of(i)):
        return None
    return store, divisor, positions


def _divide_loads(stmt, y_store, divisor, positions, op=tirx.Div):
    """Every load of Y in `stmt` as `op(Y, L[...])` at the matching element (a quotient, or a product)."""

    def rewrite(load):
        if not load.source.same_as(y_store.buffer):
            return load
        binding = {handle: load.indices[k] for handle, k in positions.items()}
        return op(load, tvm_ffi.structural_map(divisor, (tirx.Var, lambda v: binding.get(v.__chandle__(), v))))

    return tvm_ffi.structural_map(stmt, (tvm.ir.TensorLoad, rewrite))


def _invariant(factor, reduce_vars, positions: dict, written) -> bool:
    """`factor` is the same at every step of the sum and can be evaluated at Y's element: it uses no
    reduction variable, only Y's index variables, and reads no buffer in `written`."""
    used = used_vars(factor)
    if any(v.__chandle__() not in positions for v in used) or any(v.same_as(r) for v in used for r in reduce_vars):
        return False
    return not any(loads_of(factor, buffer) for buffer in written)


def _scaled_sum(stmt, intermediates):
    """(Y's store, the invariant factors, Y's index positions, the store without them) for a sum
    `Y = Y + a · f` whose product has factors f its reduction does not vary, else None."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    block = nest[1].block
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(block.init, tirx.BufferStore) \
            or not is_zero(block.init.value) or not is_reduction_block(block) or not is_float(store.value):
        return None
    if not isinstance(store.value, tirx.Add) or not is_self_load(store.value.a, store):
        return None
    if not any(store.buffer.same_as(b) for b in intermediates) or loads_of(store.value.b, store.buffer):
        return None
    if not all(isinstance(i, tirx.Var) for i in store.indices):
        return None
    positions = {var.__chandle__(): k for k, var in enumerate(store.indices)}
    reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == REDUCE]
    factors = factors_of(store.value.b)
    invariant = [f for f in factors if _invariant(f, reduce_vars, positions, [store.buffer])]
    rest = [f for f in factors if not any(f.same_as(g) for g in invariant)]
    if not invariant or not rest:
        return None
    unscaled = tirx.BufferStore(store.buffer, tirx.Add(store.value.a, product_of(rest)), store.indices, span=store.span)
    return store, product_of(invariant), positions, unscaled


def _replace_store(stmt, old, new):
    def rewrite(block: s_tir.SBlock) -> s_tir.SBlock:
        return replace_block(block, body=new) if block.body.same_as(old) else block

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, rewrite))


def _unscaled(statements: list, intermediates) -> list | None:
    for index, stmt in enumerate(statements):
        found = _scaled_sum(stmt, intermediates)
        if found is None:
            continue
        store, scale, positions, unscaled = found
        later = statements[index + 1:]
        read = sources_of(scale)
        if any(writes_buffer(other, store.buffer) or any(writes_buffer(other, b) for b in read) for other in later):
            continue
        return (statements[:index] + [_replace_store(stmt, store, unscaled)]
                + [_divide_loads(other, store, scale, positions, tirx.Mul) for other in later])
    return None


def _invariant_division(term, reduce_vars):
    """The division on `term`'s linear path (casts and products) whose divisor is a load that no
    reduction variable indexes, else None."""
    if isinstance(term, tirx.Cast):
        return _invariant_division(term.value, reduce_vars)
    if isinstance(term, tirx.Mul):
        inside = _invariant_division(term.a, reduce_vars)
        return inside if inside is not None else _invariant_division(term.b, reduce_vars)
    if isinstance(term, tirx.Div) and isinstance(term.b, tvm.ir.TensorLoad) and is_float(term) \
            and not any(uses_var(i, v) for i in term.b.indices for v in reduce_vars):
        return term
    return None


def _divided_sum(stmt, intermediates):
    """(Y's store, the divisor, Y's index positions, the store without the division) for a sum
    whose term divides by a reduction-invariant load, else None."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    block = nest[1].block
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(block.init, tirx.BufferStore) \
            or not is_zero(block.init.value) or not isinstance(store.value, tirx.Add) \
            or not is_self_load(store.value.a, store):
        return None
    if not any(store.buffer.same_as(b) for b in intermediates) or loads_of(store.value.b, store.buffer):
        return None
    reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == REDUCE]
    division = _invariant_division(store.value.b, reduce_vars)
    if division is None or not all(isinstance(i, tirx.Var) for i in store.indices):
        return None
    positions = {var.__chandle__(): k for k, var in enumerate(store.indices)}
    if any(v.__chandle__() not in positions for i in division.b.indices for v in vars_of(i)):
        return None
    term = tvm_ffi.structural_map(store.value.b, (tirx.Div, lambda d: d.a if d.same_as(division) else d))
    term = _without_unit_factors(term)
    undivided = tirx.BufferStore(store.buffer, tirx.Add(store.value.a, term), store.indices, span=store.span)
    return store, division.b, positions, undivided


def _without_unit_factors(term):
    """`x * 1.0` (a reciprocal's numerator, its divisor gone) as x, and the casts that then change no value
    (canonical_casts: `T.Cast("float16", T.Cast("float32", x))` of a float16 x) dropped: both exact."""
    term = tvm_ffi.structural_map(term, (tirx.Mul, lambda m: m.a if is_one(m.b) else m.b if is_one(m.a) else m))
    return tvm_ffi.structural_map(term, (tirx.Cast, without_no_op))


def _undivided_sums(statements: list, intermediates) -> list | None:
    for index, stmt in enumerate(statements):
        found = _divided_sum(stmt, intermediates)
        if found is None:
            continue
        store, divisor, positions, undivided = found
        later = statements[index + 1:]
        if any(writes_buffer(other, store.buffer) or writes_buffer(other, divisor.source) for other in later):
            continue
        return (statements[:index] + [_replace_store(stmt, store, undivided)]
                + [_divide_loads(other, store, divisor, positions) for other in later])
    return None


def _rewrite_one(statements: list, intermediates) -> list | None:
    for rewrite in (_unscaled, _undivided_sums):
        rewritten = rewrite(statements, intermediates)
        if rewritten is not None:
            return rewritten
    for index, stmt in enumerate(statements):
        normalized = _normalized(stmt, index, intermediates)
        if normalized is None:
            continue
        rewritten = _rewritten(statements, normalized, intermediates)
        if rewritten is not None:
            return rewritten
    return None


def _rewritten(statements: list, normalized: _Normalized, intermediates) -> list | None:
    later = statements[normalized.index + 1:]
    readers = [k for k, stmt in enumerate(later) if reads_buffer(stmt, normalized.buffer)]
    if not readers or any(writes_buffer(stmt, normalized.divisor.source) for stmt in later):
        return None
    new = list(statements)
    for k in readers:
        found = _sum_reader(later[k], normalized, intermediates)
        if found is None:
            return None
        y_store, divisor, positions = found
        if any(writes_buffer(stmt, y_store.buffer) for stmt in later[k + 1:]):
            return None
        for after in range(normalized.index + 2 + k, len(statements)):
            new[after] = _divide_loads(new[after], y_store, divisor, positions)
    new[normalized.index] = _undivided(statements[normalized.index], normalized)
    return new


def _undivided(stmt, normalized: _Normalized):
    old = normalized.realize.block

    def rewrite(block: s_tir.SBlock) -> s_tir.SBlock:
        if not block.same_as(old):
            return block
        store = block.body
        body = tirx.BufferStore(store.buffer, normalized.numerator, store.indices, span=store.span)
        return replace_block(block, body=body)

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, rewrite))


def _summed_apart(func: tirx.PrimFunc, statements: list, intermediates: list) -> bool:
    """A scaled or divided sum written into a parameter sums into a new intermediate instead, a nest after it
    copying it into the parameter (reduction_apart.py), so that the factor can leave the sum for that copy.
    Changes `statements` and `intermediates` in place; says whether it did."""
    params = [p for p in func.params if tirx.is_buffer_var(p)]
    buffer_names = {b.name for b in [*params, *intermediates]}
    block_names = {b.name_hint for b in blocks_under(func.body)}
    changed = False
    for index in reversed(range(len(statements))):
        stmt = statements[index]
        nest = plain_nest(stmt)
        store = nest[1].block.body if nest is not None else None
        if not isinstance(store, tirx.BufferStore) or not any(store.buffer.same_as(p) for p in params):
            continue
        if _scaled_sum(stmt, [store.buffer]) is None and _divided_sum(stmt, [store.buffer]) is None:
            continue
        if update_of(nest[1].block) is None or not updated_whole(nest[1], store):
            continue
        reduction, copy, apart = reduction_apart(stmt, buffer_names, block_names, keep_old=False)
        statements[index:index + 1] = [reduction, copy]
        intermediates.append(apart)
        changed = True
    return changed


def factor_out_of_sums(func: tirx.PrimFunc) -> tirx.PrimFunc:
    root = root_block(func)
    intermediates = list(root.alloc_buffers)
    statements = top_level_statements(func)
    changed = _summed_apart(func, statements, intermediates)
    while True:
        rewritten = _rewrite_one(statements, intermediates)
        if rewritten is None:
            break
        statements, changed = rewritten, True
    if not changed:
        return func
    buffers = {b: b for b in [*func.params, *intermediates] if tirx.is_buffer_var(b)}
    statements = [with_block_regions(stmt, buffers) for stmt in statements]
    body = statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)
    return with_root_block(func, replace_block(root, body=body, alloc_buffers=intermediates))


def _factored(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return scale_onto_computed_operand(factor_out_of_sums(func))


def FactorOutOfSums():
    return s_tir_pass("FactorOutOfSums", _factored)
