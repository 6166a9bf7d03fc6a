"""Reduction blocks on tiles: register accumulators, `tl.sum/max/min` and `tl.dot`.

A reduction block `X[s] = combine(X[s], rhs)` (with `T.init`) gets a register accumulator over
the tile axes of `s`. It opens (init value, or the current X[s] without T.init) before the
outermost serial loop that walks the block's reduction, each visit folds
`reduce(where(mask, rhs, identity))` over the tile axes of the reduction into it, and after the
loop it is stored once (cast to X's dtype) or kept as a register intermediate.

A sum of a product of two loads over one reduction axis, with 2-D operand tiles of at least 16
along every axis, becomes `tl.dot` with fp32 accumulation; masked operand loads fill zeros, so
the tail of the reduction adds nothing. 16-bit accumulators are widened to fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import UnsupportedConstructError

from .exprs import lower_expr
from .tile_ir import Assign, Binary, Cast, Const, Dot, Expr, Load, Reduce, Reg, Where

DOT_DTYPES = ("float16", "bfloat16", "float32")
DOT_MIN_BLOCK = 16
_COMBINERS = {tirx.Add: "sum", tirx.Max: "max", tirx.Min: "min"}


def cast(value: Expr, dtype: str) -> Expr:
    return value if value.dtype == dtype else Cast(value, dtype, value.dims)


def identity(kind: str, dtype: str) -> Const:
    if kind == "sum":
        return Const(0.0 if dtype.startswith(("float", "bfloat")) else 0, dtype)
    if dtype.startswith(("float", "bfloat")):
        return Const(float("-inf") if kind == "max" else float("inf"), dtype)
    bits = int("".join(c for c in dtype if c.isdigit()))
    if dtype.startswith("uint"):
        return Const(0 if kind == "max" else 2**bits - 1, dtype)
    return Const(-(2 ** (bits - 1)) if kind == "max" else 2 ** (bits - 1) - 1, dtype)


def combine(kind: str, acc: Expr, value: Expr, dims) -> Expr:
    op = {"sum": "+", "max": "max", "min": "min"}[kind]
    return Binary(op, acc, value, acc.dtype, dims)


def accumulator_dtype(dtype: str) -> str:
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _same_access(expr, store: tirx.BufferStore) -> bool:
    return (isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(store.buffer)
            and len(expr.indices) == len(store.indices)
            and all(tvm_ffi.structural_equal(a, b) for a, b in zip(expr.indices, store.indices)))


def split_update(block: s_tir.SBlock, where: str) -> tuple[tirx.BufferStore, str, object]:
    """(store, combiner kind, rhs) of `X[s] = X[s] + rhs` (or max/min, either operand order)."""
    store = block.body
    if not isinstance(store, tirx.BufferStore):
        raise UnsupportedConstructError(f"{where}: reduction block '{block.name_hint}' must be a single store "
                                        f"`X[...] = X[...] + value` (or T.max/T.min)")
    value = store.value
    kind = _COMBINERS.get(type(value))
    if kind is not None:
        if _same_access(value.a, store):
            return store, kind, value.b
        if _same_access(value.b, store):
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
            rhs = lower_expr(lowering, acc.rhs)
            value = _as_dot(lowering, acc, rhs) or _as_reduce(lowering, acc, rhs)
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


def _strip_casts(expr: Expr) -> Expr:
    """The value under casts and zero padding: `where(c, load, 0)` is the load when c already
    masks it (loads under an if_then_else carry its condition)."""
    while True:
        if isinstance(expr, Cast):
            expr = expr.x
        elif (isinstance(expr, Where) and isinstance(expr.b, Const) and expr.b.value == 0
              and isinstance(expr.a, Load) and expr.cond in expr.a.mask):
            expr = expr.a
        else:
            return expr


def _as_dot(lowering, acc: Accumulator, rhs: Expr) -> Expr | None:
    product = _strip_casts(rhs)
    if acc.kind != "sum" or acc.dtype != "float32" or len(acc.dims) != 2 or not isinstance(product, Binary) or product.op != "*":
        return None
    a, b = _strip_casts(product.a), _strip_casts(product.b)
    if not (isinstance(a, Load) and isinstance(b, Load)) or a.dtype != b.dtype or a.dtype not in DOT_DTYPES:
        return None
    if a.dtype == "float32" and rhs.dtype != "float32":
        return None
    reduce_axes = (set(a.dims) | set(b.dims)) - set(acc.dims)
    if len(reduce_axes) != 1 or len(a.dims) != 2 or len(b.dims) != 2:
        return None
    (k,) = reduce_axes
    m_axes, n_axes = set(a.dims) - {k}, set(b.dims) - {k}
    if len(m_axes) != 1 or len(n_axes) != 1 or m_axes == n_axes or (m_axes | n_axes) != set(acc.dims):
        return None
    (m,), (n,) = m_axes, n_axes
    sizes = {d.name: d.default for d in lowering.scope.dims}
    if min(sizes[m], sizes[n], sizes[k]) < DOT_MIN_BLOCK:
        return None
    for cond in lowering.conditions:
        if k in cond.dims and cond.tile not in a.mask and cond.tile not in b.mask:
            return None  # a tail of the reduction that neither operand's mask zeroes
    precision = "tf32" if lowering.allow_tf32 else "ieee"
    return Dot(a, b, acc.reg, m, k, n, precision, "float32", acc.dims)
