"""Selection reductions (arg-max, arg-min; lowering/rules/reduction_forms.py) on tiles.

The state is the key, each payload and the winner's position in fold order, in registers over
the outputs' tile axes. It opens at T.init's values (or what the outputs hold) with position -1,
before every element, so that a tie with the start value goes where the sequential fold sends it.
Each visit of the block reduces its tile of elements to one winner per output point, then merges
that winner into the state with a generated combine function (tile_ir.SelectCombine):

  key'      = where(valid, e, identity)        lanes outside the block's conditions never win:
  position' = where(valid, position, loser)    the loser position loses every tie
  best      = max(key')                        over the reduction tile axes (min for arg-min)
  winner    = min(where(key' == best, position', loser))   the first best (max for "last")

A NaN key beats every number, as in torch.argmax/argmin (the first NaN wins with "first"): a tile
with a NaN has best NaN and picks among its NaN lanes; the combine function compares NaNs so too.
TVM's llvm build keeps a NaN only when it is the last element (its comparisons with NaN are
false); the numerics data sets hold no NaN, the NaN tests compare with torch.
  payload   = sum(where(position' == winner, new, 0))       the winner's value: one lane matches
  state     = combine(state, (best, payloads, winner))

A single `tl.reduce` of the tuples with the combine function computes the same, but Triton's
interpreter runs a custom combine one element at a time in Python (78 s for a 67x3000 arg-max),
while these reductions are vectorized there; on an H200 both forms run at the same speed.
After the loops the key and the payloads are stored. 16-bit float keys are compared in fp32
(exactly: the values come from the narrower type).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir, tirx

from tir_passes.errors import UnsupportedConstructError

from lowering.rules.exprs import accumulator_dtype, cast, identity, lower_expr
from lowering.rules.fold_order import linear_position, position_dtype
from lowering.rules.reduction_forms import FIRST, Selection, Update
from lowering.tile_ir import Assign, Binary, CombineAssign, Const, Expr, Reduce, Reg, SelectCombine, Where


@dataclass(frozen=True)
class SelectionState:
    realize: s_tir.SBlockRealize
    selection: Selection
    combine: SelectCombine
    names: tuple[str, ...]   # key, payloads..., position
    dims: tuple[str, ...]

    @property
    def regs(self) -> tuple[Reg, ...]:
        return tuple(Reg(name, dtype, self.dims) for name, dtype in zip(self.names, self.combine.dtypes))


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _loser(combine: SelectCombine) -> Const:
    """The position of lanes that must never win: it loses every tie, even to position -1."""
    bits = 64 if combine.position_dtype == "int64" else 32
    return Const(2 ** (bits - 1) - 1 if combine.tie == FIRST else -(2 ** (bits - 1)), combine.position_dtype)


def open_state(lowering, realize: s_tir.SBlockRealize, selection: Selection) -> SelectionState:
    """Emit the state's start values (inside the block's context)."""
    dims = lowering.merge_dims(*(index.dims for update in selection.updates
                                 for index in lowering.indices(update.store.indices, ())))
    key_dtype = str(selection.key.store.buffer.dtype)
    if not (_is_float(key_dtype) or key_dtype.startswith(("int", "uint"))):
        raise UnsupportedConstructError(f"{lowering.location}: selection reduction '{realize.block.name_hint}' has the "
                                        f"key {selection.key.name} of dtype {key_dtype}; keys must be numbers")
    combine = SelectCombine(selection.kind, selection.tie, accumulator_dtype(key_dtype),
                            tuple(str(p.update.store.buffer.dtype) for p in selection.payloads),
                            position_dtype(realize.block))
    lowering.use_combine(combine)
    names = tuple(lowering.fresh(update.name) for update in selection.updates) + (lowering.fresh("position"),)
    starts = [_start(lowering, update) for update in selection.updates] + [Const(-1, combine.position_dtype)]
    for name, value, dtype in zip(names, starts, combine.dtypes):
        lowering.emit(Assign(name, cast(value, dtype), dtype, dims))
    return SelectionState(realize, selection, combine, names, dims)


def _start(lowering, update: Update) -> Expr:
    if update.init is not None:
        return lower_expr(lowering, update.init)
    return lowering.load(tirx.BufferLoad(update.store.buffer, update.store.indices), ())


def update_state(lowering, state: SelectionState) -> None:
    """Merge this visit's elements into the state (inside the block's context)."""
    combine, selection = state.combine, state.selection
    key = cast(lower_expr(lowering, selection.element), combine.key_dtype)
    position = lower_expr(lowering, linear_position(state.realize.block, combine.position_dtype))
    payloads = [
        cast(lower_expr(lowering, p.new), dtype) for p, dtype in zip(selection.payloads, combine.payload_dtypes)
    ]
    if all(d in state.dims for value in (key, position, *payloads) for d in value.dims):
        update = _single_element(lowering, state, key, payloads, position)
    else:
        update = _tile_winner(lowering, state, key, payloads, position)
    lowering.emit(CombineAssign(state.names, combine, state.regs, update, state.dims))


def finish_state(lowering, state: SelectionState) -> None:
    """Store the key and the payloads (inside the block's context)."""
    for update, reg in zip(state.selection.updates, state.regs):
        lowering.store(update.store, reg)


def _valid(lowering, key: Expr) -> Expr | None:
    """Where an element takes part: the block's conditions hold."""
    parts = [c.tile for c in lowering.conditions]
    valid = None
    for part in parts:
        valid = (
            part if valid is None else Binary("and", valid, part, "bool", lowering.merge_dims(valid.dims, part.dims))
        )
    return valid


def _where(lowering, cond: Expr, a: Expr, b: Expr) -> Where:
    return Where(cond, a, b, a.dtype, lowering.merge_dims(cond.dims, a.dims, b.dims))


def _reduce(kind: str, value: Expr, keep: tuple[str, ...]) -> Expr:
    axes = tuple(d for d in value.dims if d not in keep)
    return Reduce(kind, value, axes, value.dtype, tuple(d for d in value.dims if d in keep)) if axes else value


def _named(lowering, base: str, value: Expr) -> Reg:
    name = lowering.fresh(base)
    lowering.emit(Assign(name, value, value.dtype, value.dims))
    return Reg(name, value.dtype, value.dims)


def _single_element(lowering, state: SelectionState, key: Expr, payloads: list[Expr], position: Expr) -> tuple:
    """One element per output point: it is the visit's winner, unless it does not take part."""
    valid = _valid(lowering, key)
    if valid is None:
        return (key, *payloads, position)
    key = _where(lowering, valid, key, identity(state.combine.kind, state.combine.key_dtype))
    return (key, *payloads, _where(lowering, valid, position, _loser(state.combine)))


def _tile_winner(lowering, state: SelectionState, key: Expr, payloads: list[Expr], position: Expr) -> tuple:
    """(key, payloads, position) of the best element of this visit, per output point. A payload
    that is the element's position itself (an arg-max's index) is the winner's position."""
    combine = state.combine
    key = _named(lowering, "element_key", key)
    valid = _valid(lowering, key)
    candidate_key, candidate = key, position
    if valid is not None:
        valid = _named(lowering, "valid", valid)
        candidate_key = _where(lowering, valid, key, identity(combine.kind, combine.key_dtype))
        candidate = _where(lowering, valid, position, _loser(combine))
    candidate_key = _named(lowering, "candidate_key", candidate_key)
    candidate = _named(lowering, "candidate_position", candidate)
    best, at_best = _best(lowering, state, candidate_key, valid)
    winner = _reduce(
        "min" if combine.tie == FIRST else "max", _where(lowering, at_best, candidate, _loser(combine)), state.dims
    )
    winner = _named(lowering, "best_position", winner)
    is_winner = Binary("==", candidate, winner, "bool", lowering.merge_dims(candidate.dims, winner.dims))
    chosen = []
    for update, value in zip(state.selection.updates[1:], payloads):
        if value == cast(position, value.dtype):
            chosen.append(cast(winner, value.dtype))
            continue
        one_hot = _where(lowering, is_winner, value, _zero(value))
        chosen.append(_named(lowering, f"best_{update.name}", _reduce("sum", one_hot, state.dims)))
    return (best, *chosen, winner)


def _best(lowering, state: SelectionState, key: Reg, valid: Expr | None) -> tuple[Expr, Expr]:
    """(the best key per output point, the lanes holding it); a NaN key is the best (torch)."""
    combine = state.combine
    if not _is_float(key.dtype):
        best = _named(lowering, "best_key", _reduce(combine.kind, key, state.dims))
        return best, Binary("==", key, best, "bool", lowering.merge_dims(key.dims, best.dims))
    nan_lane = Binary("!=", key, key, "bool", key.dims)
    if valid is not None:
        nan_lane = Binary("and", nan_lane, valid, "bool", lowering.merge_dims(nan_lane.dims, valid.dims))
    nan_lane = _named(lowering, "nan_key", nan_lane)
    flags = _where(lowering, nan_lane, Const(1, "int8"), Const(0, "int8"))
    any_nan = Binary(">", _reduce("max", flags, state.dims), Const(0, "int8"), "bool", state.dims)
    any_nan = _named(lowering, "any_nan_key", any_nan)
    numbers = _where(lowering, nan_lane, identity(combine.kind, key.dtype), key)
    plain = _named(lowering, "best_number", _reduce(combine.kind, numbers, state.dims))
    at_plain = Binary("==", numbers, plain, "bool", lowering.merge_dims(numbers.dims, plain.dims))
    at_best = _where(lowering, any_nan, nan_lane, at_plain)
    best = _named(lowering, "best_key", _where(lowering, any_nan, Const(float("nan"), key.dtype), plain))
    return best, at_best


def _zero(value: Expr) -> Const:
    return Const(False if value.dtype == "bool" else 0, value.dtype)
