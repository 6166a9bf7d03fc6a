"""Reduction blocks on tiles: register accumulators, `tl.sum/max/min` and `tl.dot`.

A reduction block `X[s] = combine(X[s], rhs)` (with `T.init`) gets a register accumulator over
the tile axes of `s`. It opens (init value, or the current X[s] without T.init) before the
outermost serial loop that walks the block's reduction, each visit folds
`reduce(where(mask, rhs, identity))` over the tile axes of the reduction into it, and after the
loop it is stored once (cast to X's dtype) or kept as a register intermediate.

A block that Tiling marked as a contraction (`tile.dot`, with its m, n and k tile axes) becomes
`tl.dot` with fp32 accumulation; masked operand loads fill zeros, and an operand is zeroed where a
tail of the reduction axis is not already masked, so the tail adds nothing. Nothing here decides
whether a block is a tl.dot: the mark does, and a mark that does not fit the block is a contract
violation. 16-bit accumulators are widened to fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import UnsupportedConstructError
from tir_passes.nest import contraction_operands, is_self_load
from tir_passes.tile_contract import ContractError, dot_mark

from .exprs import lower_expr
from .tile_ir import Assign, Binary, Cast, Const, Dot, Expr, Reduce, Reg, Where

_COMBINERS = {tirx.Add: "sum", tirx.Max: "max", tirx.Min: "min"}


def cast(value: Expr, dtype: str) -> Expr:
    return value if value.dtype == dtype else Cast(value, dtype, value.dims)


def identity(kind: str, dtype: str) -> Const:
    if kind == "prod":
        return Const(1.0 if dtype.startswith(("float", "bfloat")) else 1, dtype)
    if kind == "sum":
        return Const(0.0 if dtype.startswith(("float", "bfloat")) else 0, dtype)
    if dtype.startswith(("float", "bfloat")):
        return Const(float("-inf") if kind == "max" else float("inf"), dtype)
    bits = int("".join(c for c in dtype if c.isdigit()))
    if dtype.startswith("uint"):
        return Const(0 if kind == "max" else 2**bits - 1, dtype)
    return Const(-(2 ** (bits - 1)) if kind == "max" else 2 ** (bits - 1) - 1, dtype)


def combine(kind: str, acc: Expr, value: Expr, dims) -> Expr:
    op = {"sum": "+", "prod": "*", "max": "max", "min": "min"}[kind]
    return Binary(op, acc, value, acc.dtype, dims)


def accumulator_dtype(dtype: str) -> str:
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def split_update(block: s_tir.SBlock, where: str) -> tuple[tirx.BufferStore, str, object]:
    """(store, combiner kind, rhs) of `X[s] = X[s] + rhs` (or max/min, either operand order)."""
    store = block.body
    if not isinstance(store, tirx.BufferStore):
        raise UnsupportedConstructError(f"{where}: reduction block '{block.name_hint}' must be a single store "
                                        f"`X[...] = X[...] + value` (or T.max/T.min)")
    value = store.value
    kind = _COMBINERS.get(type(value))
    if kind is not None:
        if is_self_load(value.a, store):
            return store, kind, value.b
        if is_self_load(value.b, store):
            return store, kind, value.a
    raise UnsupportedConstructError(f"{where}: reduction block '{block.name_hint}' updates {store.buffer.name} with "
                                    f"`{value}`; supported combiners are +, T.max and T.min of the old value")


@dataclass
class Accumulator:
    realize: s_tir.SBlockRealize
    store: tirx.BufferStore
    kind: str
    rhs: object
    name: str
    dtype: str
    dims: tuple[str, ...]

    @property
    def reg(self) -> Reg:
        return Reg(self.name, self.dtype, self.dims)


class ReductionState:
    def __init__(self) -> None:
        self.open: dict[str, Accumulator] = {}

    def open_for_loop(self, lowering, loop: tirx.For) -> list[Accumulator]:
        """Open accumulators for reduction blocks under `loop` that the loop walks."""
        realizes: list = []
        tvm_ffi.structural_walk(loop.body, (s_tir.SBlockRealize, realizes.append))
        opened = []
        for realize in realizes:
            if realize.block.name_hint in self.open or not _walks_reduction(realize, loop.loop_var):
                continue
            if _walks_spatial(realize, loop.loop_var):
                raise UnsupportedConstructError(f"{lowering.location}: loop {loop.loop_var.name} feeds both spatial and "
                                                f"reduction axes of block '{realize.block.name_hint}'")
            accumulator = self._open(lowering, realize)
            self.open[realize.block.name_hint] = accumulator
            opened.append(accumulator)
        return opened

    def close(self, lowering, opened: list[Accumulator]) -> None:
        for accumulator in opened:
            self._finish(lowering, accumulator)
            del self.open[accumulator.realize.block.name_hint]

    def lower_block(self, lowering, realize: s_tir.SBlockRealize) -> None:
        accumulator = self.open.get(realize.block.name_hint)
        if accumulator is not None:
            self._update(lowering, accumulator)
            return
        accumulator = self._open(lowering, realize)
        self._update(lowering, accumulator)
        self._finish(lowering, accumulator)

    def _open(self, lowering, realize) -> Accumulator:
        block = realize.block
        with lowering.block_context(realize):
            store, kind, rhs = split_update(block, lowering.location)
            indices = lowering.indices(store.indices, ())
            dims = lowering.merge_dims(*(i.dims for i in indices))
            dtype = accumulator_dtype(str(store.buffer.dtype))
            if block.init is not None:
                if not isinstance(block.init, tirx.BufferStore) or not block.init.buffer.same_as(store.buffer):
                    raise UnsupportedConstructError(f"{lowering.location}: T.init of '{block.name_hint}' must store to {store.buffer.name}")
                initial = lower_expr(lowering, block.init.value)
            else:
                initial = lowering.load(tirx.BufferLoad(store.buffer, store.indices), ())
            accumulator = Accumulator(realize, store, kind, rhs, lowering.fresh(f"acc_{block.name_hint}"), dtype, dims)
            lowering.emit(Assign(accumulator.name, cast(initial, dtype), dtype, dims))
        return accumulator

    def _update(self, lowering, acc: Accumulator) -> None:
        with lowering.block_context(acc.realize):
            value = _as_dot(lowering, acc)
            if value is None:
                value = _as_reduce(lowering, acc, lower_expr(lowering, acc.rhs))
            lowering.emit(Assign(acc.name, value, acc.dtype, acc.dims))

    def _finish(self, lowering, acc: Accumulator) -> None:
        with lowering.block_context(acc.realize):
            lowering.store(acc.store, acc.reg)


def _binding_vars(realize, reduce: bool) -> list:
    found: list = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if (iv.iter_type == tirx.IterVar.CommReduce) == reduce:
            tvm_ffi.structural_walk(value, (tirx.Var, found.append))
    return found


def _walks_reduction(realize, var) -> bool:
    return any(v.same_as(var) for v in _binding_vars(realize, True))


def _walks_spatial(realize, var) -> bool:
    return any(v.same_as(var) for v in _binding_vars(realize, False))


def _as_reduce(lowering, acc: Accumulator, rhs: Expr) -> Expr:
    guard = [c.tile for c in lowering.conditions if not set(c.dims) <= set(acc.dims)]
    value = cast(rhs, acc.dtype)
    if guard:
        mask = guard[0]
        for extra in guard[1:]:
            mask = Binary("and", mask, extra, "bool", lowering.merge_dims(mask.dims, extra.dims))
        value = Where(mask, value, identity(acc.kind, acc.dtype), acc.dtype, lowering.merge_dims(mask.dims, value.dims))
    axes = tuple(d for d in value.dims if d not in acc.dims)
    if axes:
        value = Reduce(acc.kind, value, axes, acc.dtype, tuple(d for d in value.dims if d not in axes))
    return combine(acc.kind, acc.reg, value, lowering.merge_dims(acc.dims, value.dims))


def _zero_unmasked_tail(lowering, operand: Expr, k: str, other: Expr) -> Expr:
    """The operand with zeros where a condition along the reduction axis `k` holds in neither
    operand's mask (a tail that would otherwise add what lies past the extent)."""
    missing = [c.tile for c in lowering.conditions if k in c.dims and set(c.dims) <= set(operand.dims)
               and c.tile not in operand.mask and c.tile not in other.mask]
    for cond in missing:
        operand = Where(cond, operand, Const(0.0, operand.dtype), operand.dtype, operand.dims)
    return operand


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
    a, b = (lowering.load(op.load, op.guards) for op in operands)
    if set(a.dims) != {mark.m, mark.k} or set(b.dims) != {mark.k, mark.n} or set(acc.dims) != {mark.m, mark.n}:
        raise ContractError(where, f"marked as a tl.dot over (m={mark.m}, n={mark.n}, k={mark.k}), but its operands "
                            f"vary along {a.dims} and {b.dims} and its result along {acc.dims}")
    a, b = _zero_unmasked_tail(lowering, a, mark.k, b), _zero_unmasked_tail(lowering, b, mark.k, a)
    precision = "tf32" if lowering.allow_tf32 else "ieee"
    return Dot(a, b, acc.reg, mark.m, mark.k, mark.n, precision, "float32", acc.dims)
