"""Buffer accesses on tiles: pointer offsets from index expressions, and the masks that guard
them.

A block's conditions (its predicate's conjuncts, tail masks of its tile axes, `if` guards) are
kept as pairs of the TIR condition and its tile form. An access takes the conditions over its own
tile axes only, so loading A[i, k] in a block over (i, j, k) stays an (i, k) tile; the arithmetic
analyzer must then prove the indices in bounds under the chosen conditions, otherwise the access
takes all of them (correct, only broader).

An index read from memory (a gather: `table[ids[i], j]`) that the conditions do not prove in
bounds gets a range guard `0 <= index < extent` in its mask, so an out-of-range index reads zero
and a store through one is dropped; one that only a `T.assume` fact proves is left unchecked, as
TVM leaves it. Both are recorded as RangeChecks, which a debug build asserts instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import sym, tirx

from tir_passes.analyses.assumptions import Assumptions, reads_memory
from tir_passes.analyses.path_conditions import proven
from tir_passes.infra.names import stride_name

from lowering.rules.exprs import fold_binary
from lowering.tile_ir import Cast, Const, Expr, RangeCheck, Scalar

INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Condition:
    tir: object   # a TIR boolean expression over loop and block variables
    tile: Expr    # the same condition on tiles

    @property
    def dims(self) -> tuple[str, ...]:
        return self.tile.dims


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


@dataclass(frozen=True)
class AccessMask:
    conditions: list[Condition]     # the mask's conjuncts (range guards included)
    checks: tuple[RangeCheck, ...]  # the run-time range checks on indices read from memory


def plan_mask(access: str, conditions: list[Condition], access_dims: tuple[str, ...], indices_tir, shape,
              analyzer: sym.Analyzer, func, lower_condition) -> AccessMask:
    """The conditions over the access's own axes if they prove its plain indices in bounds, else
    all of them; then, for each index read from memory that they do not prove in bounds, a range
    guard in the mask, or, when only a `T.assume` fact proves it, an assumed check."""
    loaded = [dim for dim, index in enumerate(indices_tir) if reads_memory(index)]
    plain = [_in_bounds(indices_tir[dim], shape[dim]) for dim in range(len(indices_tir)) if dim not in loaded]
    own = [c for c in conditions if set(c.dims) <= set(access_dims)]
    chosen = own if all(proven(analyzer, claim, [c.tir for c in own]) for claim in plain) else list(conditions)
    checks: list[RangeCheck] = []
    for dim in loaded:
        index, extent = indices_tir[dim], shape[dim]
        claim, known = _in_bounds(index, extent), [c.tir for c in chosen]
        if proven(analyzer, claim, known):
            continue
        message = f"{access}: index {index} of dimension {dim} is outside [0, {extent})"
        facts = [fact for premise, fact in Assumptions.of(func).about(index) if proven(analyzer, premise, known)]
        if facts and proven(analyzer, claim, known + facts):
            checks.append(RangeCheck(lower_condition(claim), message, assumed=True))
            continue
        guard = Condition(claim, lower_condition(claim))
        chosen.append(guard)
        checks.append(RangeCheck(guard.tile, message, assumed=False))
    return AccessMask(chosen, tuple(checks))


def _in_bounds(index, extent):
    return tirx.all(index >= 0, index < extent)
