"""Reduction blocks on tiles: register accumulators, `tl.sum/max/min`, `tl.dot` and selections.

A reduction block's body is read as one update per output (lowering/rules/reduction_forms.py). An
output folded on its own, `X[s] = combine(X[s], rhs)`, gets a register accumulator over the tile
axes of `s`; a selection (arg-max, arg-min) gets a state of several registers
(lowering/rules/selections.py). The block's registers open together (T.init's values, or what the
outputs hold without T.init) before the outermost serial loop that walks the block's reduction;
each visit folds `reduce(where(mask, rhs, identity))` over the tile axes of the reduction into
each accumulator and merges its winner into each selection; after the loop every output is stored
once (cast to its dtype) or kept as a register intermediate.

A block that Tiling marked as a contraction (`tile.dot`, with its m, n and k tile axes) becomes
`tl.dot` with fp32 accumulation; masked operand loads fill zeros (an operand in registers is
selected to zero under its padding condition), and an operand is zeroed where a
tail of the reduction axis is not already masked, so the tail adds nothing. Nothing here decides
whether a block is a tl.dot: the mark does, and a mark that does not fit the block is a contract
violation. 16-bit accumulators are widened to fp32. An operand may be a load or a value computed
in registers (attention's weights); operands of two dtypes both go in the wider one (exact).

Blocks of an online nest (tir_passes/contracts/online_contract.py): the max block also keeps the maximum
before each tile ("previous"), and while the loop runs both registers stand for the buffers, so
the nest's sums read them; a rescaled sum folds a tile as `acc * F + sum(t)` (or
`tl.dot(a, b, acc * F)`), F lowered once per tile, and `where(reset, 0, acc * F)` where the sum
restarts (a running maximum that was -inf).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import UnsupportedConstructError
from tir_passes.analyses.nest import contraction_operands, operands_dtype
from tir_passes.contracts.online_contract import online_shift
from tir_passes.contracts.tile_contract import TILE, ContractError, dot_mark
from tir_passes.infra.reduction_kinds import KINDS

from lowering.rules import selections
from lowering.rules.exprs import accumulator_dtype, cast, identity, lower_expr
from lowering.matmul_precision import dot_precision
from lowering.rules.fold_order import fold_order_problem
from lowering.rules.reduction_forms import Combiner, reduction_form
from lowering.tile_ir import Arange, Assign, Binary, Cast, Const, Dot, Expr, HeldInRegisters, Load, Reduce, Where


def combine(kind: str, acc: Expr, value: Expr, dims) -> Expr:
    return Binary(KINDS[kind].binary, acc, value, acc.dtype, dims)


@dataclass
class Accumulator(HeldInRegisters):
    realize: s_tir.SBlockRealize
    store: tirx.BufferStore
    kind: str
    rhs: object
    name: str
    dtype: str
    dims: tuple[str, ...]
    scale: object = None   # an online sum's rescale factor (TIR, over the rows)
    reset: object = None   # where it restarts from zero instead (TIR, over the rows)


@dataclass
class BlockReduction:
    """The registers one reduction block keeps while its loops run."""

    realize: s_tir.SBlockRealize
    accumulators: list[Accumulator]
    selections: list[selections.SelectionState]


class ReductionState:
    def __init__(self) -> None:
        self.open: dict[str, BlockReduction] = {}

    def open_for_loop(self, lowering, loop: tirx.For) -> list[BlockReduction]:
        """Open the registers of reduction blocks under `loop` that the loop walks."""
        realizes: list = []
        tvm_ffi.structural_walk(loop.body, (s_tir.SBlockRealize, realizes.append))
        opened = []
        for realize in realizes:
            if realize.block.name_hint in self.open or not _walks_reduction(realize, loop.loop_var):
                continue
            if _walks_spatial(realize, loop.loop_var):
                raise UnsupportedConstructError(
                    f"{lowering.location}: loop {loop.loop_var.name} feeds both spatial and "
                    f"reduction axes of block '{realize.block.name_hint}'"
                )
            reduction = self._open(lowering, realize)
            self.open[realize.block.name_hint] = reduction
            opened.append(reduction)
        return opened

    def close(self, lowering, opened: list[BlockReduction]) -> None:
        for reduction in opened:
            self._finish(lowering, reduction)
            del self.open[reduction.realize.block.name_hint]

    def lower_block(self, lowering, realize: s_tir.SBlockRealize) -> None:
        reduction = self.open.get(realize.block.name_hint)
        if reduction is not None:
            self._update(lowering, reduction)
            return
        reduction = self._open(lowering, realize)
        self._update(lowering, reduction)
        self._finish(lowering, reduction)

    def _open(self, lowering, realize) -> BlockReduction:
        with lowering.block_context(realize):
            form = reduction_form(realize.block, lowering.location)
            if form.selections:
                problem = fold_order_problem(realize, _reduction_loops(lowering, realize))
                if problem is not None:
                    raise UnsupportedConstructError(
                        f"{lowering.location}: selection reduction "
                        f"'{realize.block.name_hint}' depends on the order of its elements, "
                        f"but {problem}"
                    )
            accumulators = [_open_accumulator(lowering, realize, c) for c in form.combiners]
            states = [selections.open_state(lowering, realize, s) for s in form.selections]
            if online_shift(realize.block) is not None:
                _expose_running_values(lowering, accumulators)
        return BlockReduction(realize, accumulators, states)

    def _update(self, lowering, reduction: BlockReduction) -> None:
        with lowering.block_context(reduction.realize):
            for acc in reduction.accumulators:
                if acc.kind == "previous":
                    value = _followed(reduction, acc).reg
                else:
                    value = _as_dot(lowering, acc)
                    if value is None:
                        value = _as_reduce(lowering, acc, lower_expr(lowering, acc.rhs))
                lowering.emit(Assign(acc.name, value, acc.dtype, acc.dims))
            for state in reduction.selections:
                selections.update_state(lowering, state)

    def _finish(self, lowering, reduction: BlockReduction) -> None:
        with lowering.block_context(reduction.realize):
            # conditions on the reduction's loops guarded each step's term; the result is stored once
            lowering.conditions = [
                c for c in lowering.conditions if not _on_reduction_loops(lowering, reduction.realize, c)
            ]
            for acc in reduction.accumulators:
                lowering.store(acc.store, acc.reg)
            for state in reduction.selections:
                selections.finish_state(lowering, state)


def _expose_running_values(lowering, accumulators: list[Accumulator]) -> None:
    """An online max's registers (the running maximum and the one before it) are what the
    rescaled sums of its nest read while the loop runs: after this tile's update, in program
    order, which is what the tile-wise fold needs (tir_passes/contracts/online_contract.py)."""
    for acc in accumulators:
        indices = tuple(lowering.indices(acc.store.indices, ()))
        lowering.registers[(acc.store.buffer.name, indices)] = acc.reg


def _followed(reduction: BlockReduction, previous: Accumulator) -> Accumulator:
    """The maximum whose value before each tile `previous` keeps (its update comes first)."""
    name = previous.rhs.source.name
    return next(acc for acc in reduction.accumulators if acc.store.buffer.name == name)


def _open_accumulator(lowering, realize, combiner: Combiner) -> Accumulator:
    store = combiner.update.store
    indices = lowering.indices(store.indices, ())
    dims = lowering.merge_dims(*(i.dims for i in indices))
    dtype = accumulator_dtype(str(store.buffer.dtype))
    if combiner.update.init is not None:
        initial = lower_expr(lowering, combiner.update.init)
    else:  # what the output holds, read where it is stored: not under the terms' conditions
        guards = lowering.conditions
        lowering.conditions = [c for c in guards if not _on_reduction_loops(lowering, realize, c)]
        initial = lowering.load(tirx.BufferLoad(store.buffer, store.indices), ())
        lowering.conditions = guards
    accumulator = Accumulator(
        realize,
        store,
        combiner.kind,
        combiner.rhs,
        lowering.fresh(f"acc_{store.buffer.name}"),
        dtype,
        dims,
        combiner.scale,
        combiner.reset,
    )
    lowering.emit(Assign(accumulator.name, cast(initial, dtype), dtype, dims))
    return accumulator


def _reduction_loops(lowering, realize) -> list[tirx.For]:
    """The kernel's loops that walk the block's reduction, outermost first."""
    return [plan.loop for plan in lowering.scope.plans.values() if _walks_reduction(realize, plan.loop.loop_var)]


def _binding_vars(realize, reduce: bool) -> list:
    found: list = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if (iv.iter_type == tirx.IterVar.CommReduce) == reduce:
            tvm_ffi.structural_walk(value, (tirx.Var, found.append))
    return found


def _walks_reduction(realize, var) -> bool:
    return any(v.same_as(var) for v in _binding_vars(realize, True))


def _on_reduction_loops(lowering, realize, condition) -> bool:
    """The condition (a tail or the block's predicate) varies with a loop that walks the
    block's reduction: it decides which terms are folded, not whether the result is stored."""
    loops = {loop.loop_var.__chandle__() for loop in _reduction_loops(lowering, realize)}
    found: list = []
    tvm_ffi.structural_walk(condition.tir, (tirx.Var, found.append))
    return any(var.__chandle__() in loops for var in found)


def _walks_spatial(realize, var) -> bool:
    return any(v.same_as(var) for v in _binding_vars(realize, False))


def _carried(lowering, acc: Accumulator) -> Expr:
    """The accumulator as this tile's fold starts from it: rescaled by an online sum's factor."""
    if acc.scale is None:
        return acc.reg
    factor = cast(lower_expr(lowering, acc.scale), acc.dtype)
    if not set(factor.dims) <= set(acc.dims):
        raise ContractError(
            f"block {acc.realize.block.name_hint}",
            "an online sum's rescale factor varies along the axis it sums",
            "OnlineSoftmax",
        )
    scaled = Binary("*", acc.reg, factor, acc.dtype, acc.dims)
    if acc.reset is None:
        return scaled
    reset = lower_expr(lowering, acc.reset)
    return Where(reset, Const(0.0, acc.dtype), scaled, acc.dtype, lowering.merge_dims(reset.dims, scaled.dims))


def _as_reduce(lowering, acc: Accumulator, rhs: Expr) -> Expr:
    guard = [
        c.tile
        for c in lowering.conditions
        if not set(c.dims) <= set(acc.dims) or _on_reduction_loops(lowering, acc.realize, c)
    ]
    value = cast(rhs, acc.dtype)
    if guard:
        mask = guard[0]
        for extra in guard[1:]:
            mask = Binary("and", mask, extra, "bool", lowering.merge_dims(mask.dims, extra.dims))
        value = Where(mask, value, identity(acc.kind, acc.dtype), acc.dtype, lowering.merge_dims(mask.dims, value.dims))
    value = _spread_over_reduction_tiles(lowering, acc, value)
    axes = tuple(d for d in value.dims if d not in acc.dims)
    if axes:
        value = Reduce(
            acc.kind,
            value,
            axes,
            acc.dtype,
            tuple(d for d in value.dims if d not in axes),
            propagate_nan=not nan_unobservable(lowering, acc),
        )
    return combine(acc.kind, _carried(lowering, acc), value, lowering.merge_dims(acc.dims, value.dims))


def nan_unobservable(lowering, acc: Accumulator) -> bool:
    """Whether a NaN element may be dropped by this tile's max: the block is an online shift
    (OnlineShift) whose running maximum is an intermediate. The sums that read the shift gain
    u * exp(c * (x - shift)) per element whatever the shift is (online_contract.py), so a NaN
    element reaches them, and through them every output, by its own exponential; the shift itself
    is never stored. Then the NaN check of the tile's maximum (a second reduction) is redundant."""
    mark = online_shift(acc.realize.block)
    if mark is None or acc.kind not in ("max", "min"):
        return False
    params = {str(p.name) for p in lowering.func.params if tirx.is_buffer_var(p)}
    return mark.shift not in params and mark.previous not in params


def _spread_over_reduction_tiles(lowering, acc: Accumulator, value: Expr) -> Expr:
    """`value` laid along every tile axis that walks the block's reduction: a term that does not
    vary along one (`X[i] += A[i]` over i, k) is still added once per element of it, not once."""
    missing = [
        plan.name
        for plan in lowering.scope.plans.values()
        if plan.kind == TILE
        and _walks_reduction(acc.realize, plan.loop.loop_var)
        and plan.name not in value.dims
        and plan.name not in acc.dims
    ]
    for dim in missing:
        value = laid_along(lowering, value, dim, identity(acc.kind, acc.dtype))
    return value


def laid_along(lowering, value: Expr, dim: str, filler: Expr) -> Expr:
    """`value` broadcast along tile axis `dim` (`filler` sits in lanes that are never selected)."""
    lanes = Binary(">=", Arange(dim, lowering.scope.dim(dim).block), Const(0, "int32"), "bool", (dim,))
    return Where(lanes, value, filler, filler.dtype, lowering.merge_dims(value.dims, (dim,)))


def _load_mask(expr: Expr) -> tuple | None:
    """The mask of a load (under casts), whose masked-off elements are zeros; None for a value
    computed in registers, which may hold anything (inf, NaN) past the extent."""
    while isinstance(expr, Cast):
        expr = expr.x
    return expr.mask if isinstance(expr, Load) else None


def _zero_unmasked_tail(lowering, operand: Expr, k: str, other: Expr) -> Expr:
    """The operand with zeros where a condition along the reduction axis `k` would let it add what
    lies past the extent: a load masked by neither operand's loads, or any value in registers."""
    own, others = _load_mask(operand), _load_mask(other)
    masks = () if own is None else own + (others or ())
    missing = [
        c.tile for c in lowering.conditions if k in c.dims and set(c.dims) <= set(operand.dims) and c.tile not in masks
    ]
    for cond in missing:
        operand = Where(cond, operand, Const(0.0, operand.dtype), operand.dtype, operand.dims)
    return operand


def _guarded(lowering, operand, dtype: str, where: str) -> Expr:
    """A tl.dot operand, zero where its padding conditions (`if_then_else(cond, x, 0)`, stripped
    by nest.contraction_operands) fail: a load takes them as its mask; a value in registers (the
    scores of a fused contraction) is selected, or it would add what the condition excludes."""
    value = cast(lower_expr(lowering, operand.value, operand.guards), dtype)
    loaded = isinstance(value, Load) or (isinstance(value, Cast) and isinstance(value.x, Load))
    if not operand.guards or loaded:
        return value
    condition = None
    for guard in operand.guards:
        part = lower_expr(lowering, guard)
        condition = (
            part
            if condition is None
            else Binary("and", condition, part, "bool", lowering.merge_dims(condition.dims, part.dims))
        )
    if not set(condition.dims) <= set(value.dims):
        raise UnsupportedConstructError(
            f"{where}: a tl.dot operand computed in registers is zeroed under a "
            f"condition that varies along {condition.dims}, beyond the operand's {value.dims}"
        )
    return Where(condition, value, Const(0.0, dtype), dtype, value.dims)


def _as_dot(lowering, acc: Accumulator) -> Expr | None:
    """The block's update as tl.dot, when Tiling marked it so."""
    block = acc.realize.block
    mark = dot_mark(block)
    if mark is None:
        return None
    operands = contraction_operands(block)
    where = f"block {block.name_hint}"
    if operands is None or acc.kind != "sum":
        raise ContractError(where, "marked as a tl.dot, but it is not a contraction `X[..] += a * b`")
    dtype = operands_dtype(*operands)
    a, b = (_guarded(lowering, op, dtype, where) for op in operands)
    if set(a.dims) != {mark.m, mark.k} or set(b.dims) != {mark.k, mark.n} or set(acc.dims) != {mark.m, mark.n}:
        raise ContractError(
            where,
            f"marked as a tl.dot over (m={mark.m}, n={mark.n}, k={mark.k}), but its operands "
            f"vary along {a.dims} and {b.dims} and its result along {acc.dims}",
        )
    a, b = _zero_unmasked_tail(lowering, a, mark.k, b), _zero_unmasked_tail(lowering, b, mark.k, a)
    precision = dot_precision(lowering.float32_matmul_precision, dtype)
    return Dot(a, b, _carried(lowering, acc), mark.m, mark.k, mark.n, precision, "float32", acc.dims)
