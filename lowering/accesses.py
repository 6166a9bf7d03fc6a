"""Buffer accesses on tiles: pointer offsets from index expressions, and the masks that guard
them.

A block's conditions (its predicate's conjuncts, tail masks of its tile axes, `if` guards) are
kept as pairs of the TIR condition and its tile form. An access takes the conditions over its own
tile axes only, so loading A[i, k] in a block over (i, j, k) stays an (i, k) tile; the arithmetic
analyzer must then prove the indices in bounds under the chosen conditions, otherwise the access
takes all of them (correct, only broader).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import sym, tirx

from tir_passes.nest import python_name

from .exprs import fold_binary
from .tile_ir import Cast, Const, Expr, Scalar

INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Condition:
    tir: object   # a TIR boolean expression over loop and block variables
    tile: Expr    # the same condition on tiles

    @property
    def dims(self) -> tuple[str, ...]:
        return self.tile.dims


def pointer_name(buffer: str) -> str:
    """The kernel argument that points at `buffer` (TE names such as `A_red_temp.v0` made identifiers)."""
    return f"{python_name(buffer)}_ptr"


def stride_name(buffer: str, axis: int) -> str:
    return f"{python_name(buffer)}_stride{axis}"


def needs_int64(buf) -> bool:
    """Offsets into `buf` need 64 bits unless its (static) size is proven below 2**31."""
    count = 1
    for dim in buf.shape:
        if not isinstance(dim, tirx.IntImm):
            return True
        count *= int(dim.value)
    return count > INT32_LIMIT


def offset_expr(indices: list[Expr], buffer: str, wide: bool, merge_dims) -> Expr:
    """sum(index_p * stride_p): strides are kernel arguments, so any strided tensor works."""
    total: Expr | None = None
    for axis, index in enumerate(indices):
        dtype = "int64" if wide else "int32"
        if wide and index.dtype != "int64":
            index = Cast(index, "int64", index.dims)
        term = fold_binary("*", index, Scalar(stride_name(buffer, axis), dtype), dtype, index.dims)
        total = term if total is None else fold_binary("+", total, term, dtype, merge_dims(total.dims, term.dims))
    return total if total is not None else Const(0, "int32")


def choose_conditions(conditions: list[Condition], access_dims: tuple[str, ...], indices_tir, shape,
                      analyzer: sym.Analyzer) -> list[Condition]:
    """The conditions over the access's own axes, if they prove it in bounds; else all of them."""
    own = [c for c in conditions if set(c.dims) <= set(access_dims)]
    if _proven_in_bounds(analyzer, own, indices_tir, shape):
        return own
    return list(conditions)


def _proven_in_bounds(analyzer: sym.Analyzer, conditions, indices_tir, shape) -> bool:
    with _scopes(analyzer, [c.tir for c in conditions]):
        return all(analyzer.can_prove(tirx.all(i >= 0, i < n)) for i, n in zip(indices_tir, shape))


class _scopes:
    """Enter one analyzer constraint scope per condition."""

    def __init__(self, analyzer, conditions):
        self.analyzer, self.conditions, self.entered = analyzer, conditions, []

    def __enter__(self):
        for cond in self.conditions:
            scope = self.analyzer.constraint_scope(cond)
            scope.__enter__()
            self.entered.append(scope)
        return self

    def __exit__(self, *exc):
        for scope in reversed(self.entered):
            scope.__exit__(*exc)
        return False


def conjuncts(expr) -> list:
    """Split a TIR `a and b and ...` into its parts; `True` gives none."""
    if isinstance(expr, tirx.IntImm) and int(expr.value) == 1:
        return []
    if isinstance(expr, tirx.And):
        return conjuncts(expr.a) + conjuncts(expr.b)
    return [expr]
