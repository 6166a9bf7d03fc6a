"""Tile windows: the tiles of a serial walk that can hold anything but identities, proven from the
masks in the IR, and the loop bounds that visit only those (TileWindow in tile_contract.py).

Why: causal attention written in TIR masks the scores above the diagonal to -inf before the
softmax. Every element j > i then folds an identity: -inf into the running max, exp(-inf - M) = 0
into the sums. A program id that owns rows [i0, i0 + BLOCK_I) needs only the key tiles up to its
last row; walking the rest computes half of all tiles for nothing (flash attention skips them).
The same holds for any band i + low <= j <= i + high (a sliding window, a strictly causal mask).

What is proven (`provable_window`), for a serial loop that steps tile axis j (the outer half of a
split) inside a program whose rows axis r is split over program ids:

- every block under the loop walks j. A block that reduces over j folds, for every element outside
  the window, its combiner's identity: `Y = max(Y, e)` with e = -inf (min: +inf), `Y = Y + t` or an
  online sum `Y = Y * F + t` (online_contract.py) with t = 0, and copies of the running max (the
  online `previous`) are bookkeeping no later block reads. A block spatial along j writes values
  that only the loop's own blocks read (intermediates kept per element).
- "outside the window" comes from the masks: `T.if_then_else(cond, a, b)` (or T.Select) where a
  conjunct of cond, over the block's bindings, is linear in j - r (`vj <= vi`, `vi - vj < 20`, with
  loop-start offsets), or whose disjuncts all are (then outside the band they take `a`). Outside
  the band those selects take that branch, and a small evaluation shows the element is the
  identity: exp(-inf) = 0, -inf - x = -inf, 0 * x = 0, casts keep 0 and -inf; the lowest finite
  value (T.min_value) is max's identity only as it is, any arithmetic on it is unknown.

Assumed, as flash attention and PyTorch's SDPA assume it: the operands a masked weight multiplies
(V) are finite, so 0 * V = 0; a NaN or Inf in V at masked positions does not reach the output,
where TVM's reference, which computes 0 * NaN, would return NaN. The running maximum may be -inf
(rows masked so far): the online sums keep such a row's pending NaN until a finite maximum resets
it (online_softmax.py), exactly as if the skipped elements had been folded; a tile of rows whose
bands are all empty still visits one tile, so a row with nothing unmasked is NaN as in TIR.

The bounds (`window_range`, one formula for TIR at the default sizes and for the kernel's BLOCK
constexprs; the TIR loop keeps its start at 0, see tir_window_range), with first row
R = r_outer * BLOCK_R, tiles T = cdiv(extent_j, BLOCK_J):

    start = max(0, R + low) // BLOCK_J                       (0 without low)
    stop  = min(T, cdiv(max(0, R + BLOCK_R + high), BLOCK_J)) (T without high)
    and where a row's band can be empty (low given, or high < 0): 0 <= start <= T - 1, stop >= start + 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx

from tir_passes.analyses.nest import (
    block_sites,
    call_name,
    conjuncts,
    is_self_load,
    rescaled_old,
    substitute_bindings,
    uses_var,
)
from tir_passes.infra.dtypes import float_max
from tir_passes.infra.pass_util import static_int
from tir_passes.infra.reduction_kinds import MAX, MIN, SUM, combiner_nodes
from tir_passes.contracts.online_contract import online_rescale, online_shift
from tir_passes.contracts.tile_contract import GRID, TILE, LoopTile, TileWindow

_COMPARISONS = (tirx.LT, tirx.LE, tirx.GT, tirx.GE)


class _NoWindow(Exception):
    """Why the walk cannot skip tiles."""


# --- the proof -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WalkedAxis:
    """The loops of the walk: the serial loop, its tile loop (axis j) and the block size."""

    outer: tirx.For
    inner: tirx.For
    size: int


def provable_window(
    walk: WalkedAxis, enclosing: tuple, tiles: dict, read_outside: set[str], params: set[str]
) -> tuple[TileWindow | None, str]:
    """The window the masks prove for `walk`, or None; with a one-line reason either way.
    `enclosing`: the loops around the serial loop; `tiles`: every loop's LoopTile by handle;
    `read_outside`: buffers read outside the serial loop; `params`: the function's buffer names."""
    try:
        window = _window_of(walk, enclosing, tiles, read_outside, params)
    except _NoWindow as why:
        return None, str(why)
    return window, f"visits only tiles with some {_band_text(window, 'j')}: outside, every block folds its identity"


def _band_text(window: TileWindow, axis: str) -> str:
    parts = []
    if window.low is not None:
        parts.append(f"{axis} >= {window.rows} {_signed(window.low)}")
    if window.high is not None:
        parts.append(f"{axis} <= {window.rows} {_signed(window.high)}")
    return " and ".join(parts)


def _signed(value: int) -> str:
    return f"+ {value}" if value >= 0 else f"- {-value}"


def _window_of(walk: WalkedAxis, enclosing, tiles, read_outside, params) -> TileWindow:
    bands: list[_Band] = []
    rows = _RowsAxis.find(enclosing, tiles)
    for realize, _ in block_sites(walk.outer.body):
        bands += _block_bands(realize, walk, rows, read_outside, params)
    if not bands:
        raise _NoWindow("no block under the loop reduces over it")
    axes = {band.rows for band in bands}
    if len(axes) != 1:
        raise _NoWindow(f"the masks bound j by different row axes {sorted(axes)}")
    low = None if any(b.low is None for b in bands) else min(b.low for b in bands)
    high = None if any(b.high is None for b in bands) else max(b.high for b in bands)
    if low is None and high is None:
        raise _NoWindow("the masks do not bound j on either side")
    return TileWindow(axes.pop(), low, high)


@dataclass(frozen=True)
class _Band:
    rows: str
    low: int | None
    high: int | None

    def hull(self, other: "_Band") -> "_Band":
        low = None if self.low is None or other.low is None else min(self.low, other.low)
        high = None if self.high is None or other.high is None else max(self.high, other.high)
        return _Band(self.rows, low, high)


@dataclass(frozen=True)
class _RowsAxis:
    """Candidate row axes: split tile loops whose outer loop is a program id, by inner handle."""

    loops: dict  # inner handle -> (outer For, inner For, axis name, size)

    @staticmethod
    def find(enclosing, tiles) -> "_RowsAxis":
        found = {}
        for loop in enclosing:
            tile: LoopTile | None = tiles.get(loop.loop_var.__chandle__())
            if tile is None or tile.role != TILE or tile.outer is None:
                continue
            outer = next((l for l in enclosing if l.loop_var.name == tile.outer), None)
            outer_tile = tiles.get(outer.loop_var.__chandle__()) if outer is not None else None
            if outer_tile is not None and outer_tile.role == GRID:
                found[loop.loop_var.__chandle__()] = (outer, loop, tile.axis, tile.size)
        return _RowsAxis(found)


def _block_bands(realize, walk: WalkedAxis, rows: _RowsAxis, read_outside, params) -> list[_Band]:
    block = realize.block
    name = block.name_hint
    walked = [
        iv
        for iv, value in zip(block.iter_vars, realize.iter_values)
        if uses_var(value, walk.outer.loop_var) or uses_var(value, walk.inner.loop_var)
    ]
    if not walked:
        raise _NoWindow(f"block {name} under the loop does not walk it")
    if all(iv.iter_type != tirx.IterVar.CommReduce for iv in walked):
        kept = sorted({s.buffer.name for s in _stores(block)} & (params | read_outside))
        if kept:
            raise _NoWindow(f"block {name} writes {', '.join(kept)} per element of j, which outlives the loop")
        return []
    return [
        _fold_band(realize, walk, rows, store, block, read_outside, params)
        for store in _stores(block)
        if not _bookkeeping(store, block, read_outside, params)
    ]


def _stores(block) -> list[tirx.BufferStore]:
    body = block.body
    stores = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    if not all(isinstance(s, tirx.BufferStore) for s in stores):
        raise _NoWindow(f"block {block.name_hint} is not a sequence of stores")
    return stores


def _bookkeeping(store: tirx.BufferStore, block, read_outside, params) -> bool:
    """An online max's copy of the maximum before the element: only the sums of its loop read it."""
    shift = online_shift(block)
    if shift is None or store.buffer.name != shift.previous:
        return False
    if store.buffer.name in read_outside or store.buffer.name in params:
        raise _NoWindow(f"{store.buffer.name} (the maximum before each element) is read outside the loop")
    return True


def _fold_band(realize, walk, rows, store: tirx.BufferStore, block, read_outside, params) -> _Band:
    """The band outside which this store folds its identity."""
    kind, element = _fold(store, block)
    identity = _IDENTITIES[kind]
    for polarity in (True, False):
        masks = _masks(element, realize, walk, rows, polarity)
        if masks and _evaluate(element, {key: branch for key, (_, branch) in masks.items()}).kind in identity:
            bands = [band for band, _ in masks.values()]
            hull = bands[0]
            for band in bands[1:]:
                hull = hull.hull(band)
            return hull
    raise _NoWindow(
        f"block {block.name_hint} folds `{_short(element)}`, which no mask on j - i makes the {kind} identity"
    )


# what folds as the combiner's identity: for max (min) also the lowest (highest) finite value of
# the element's dtype, which every finite operand beats, as masks written with T.min_value fill
_IDENTITIES = {SUM: {"zero"}, MAX: {"-inf", "lowest"}, MIN: {"+inf", "highest"}}


def _fold(store: tirx.BufferStore, block) -> tuple[str, object]:
    """(combiner, element) of `Y = Y + t`, `Y = max(Y, e)`, `Y = min(Y, e)` or an online sum."""
    value = store.value
    for node, kind in combiner_nodes(tirx, (SUM, MAX, MIN)).items():
        if isinstance(value, node):
            for old, element in ((value.a, value.b), (value.b, value.a)):
                if is_self_load(old, store) or (
                    kind == "sum" and online_rescale(block) is not None and rescaled_old(old, store) is not None
                ):
                    return kind, element
    raise _NoWindow(
        f"block {block.name_hint} updates {store.buffer.name} with `{_short(value)}`, not a "
        "sum, max or min of the old value"
    )


def _short(expr) -> str:
    text = " ".join(str(expr).split())
    return text if len(text) <= 90 else text[:87] + "..."


# --- masks ---------------------------------------------------------------------------------------
def _selects(expr) -> list:
    found: list = []

    def visit(node):
        if call_name(node) == "if_then_else" or isinstance(node, tirx.Select):
            found.append(node)

    tvm_ffi.structural_walk(expr, ((tvm.ir.Call, tirx.Select), visit))
    return found


def _condition(select):
    return select.args[0] if call_name(select) == "if_then_else" else select.condition


def _masks(element, realize, walk, rows: _RowsAxis, polarity: bool) -> dict[int, tuple[_Band, int]]:
    """For every select in `element` whose condition bounds j - r: (its band, the branch it takes
    outside). With `polarity`, the band is where the condition's conjuncts can hold (outside it takes
    the else branch); without, where its disjuncts can all fail (outside it takes the then branch)."""
    found = {}
    for select in _selects(element):
        condition = sym.Analyzer().simplify(_condition(select))  # `True and vj > vi` -> `vi < vj`
        if polarity:
            band = _narrowest(_difference_bound(c, realize, walk, rows) for c in conjuncts(condition))
        else:
            bounds = [_difference_bound(c, realize, walk, rows) for c in _disjuncts(condition)]
            band = None if None in bounds else _narrowest(_negated(b) for b in bounds)
        if band is not None:
            found[select.__chandle__()] = (band, 2 if polarity else 1)
    return found


def _narrowest(bands) -> _Band | None:
    """The intersection of the bands given (None entries are conditions that only narrow further)."""
    found = None
    for band in bands:
        if band is None:
            continue
        found = (
            band
            if found is None
            else _Band(band.rows, _tighter(found.low, band.low, max), _tighter(found.high, band.high, min))
        )
    return found


def _negated(band: _Band) -> _Band:
    """The band where a one-sided bound fails."""
    if band.low is not None:
        return _Band(band.rows, None, band.low - 1)
    return _Band(band.rows, band.high + 1, None)


def _disjuncts(expr) -> list:
    if isinstance(expr, tirx.Or):
        return _disjuncts(expr.a) + _disjuncts(expr.b)
    return [expr]


def _tighter(a, b, pick):
    if a is None:
        return b
    return a if b is None else pick(a, b)


def _difference_bound(conjunct, realize, walk: WalkedAxis, rows: _RowsAxis) -> _Band | None:
    """The conjunct as a bound on d = j - r, when it is linear in the two element indices."""
    if not isinstance(conjunct, _COMPARISONS):
        return None
    expr = substitute_bindings(conjunct.a - conjunct.b, realize)
    for _inner_key, (outer, inner, axis, size) in rows.loops.items():
        coefficients = sym.detect_linear_equation(
            expr, [walk.outer.loop_var, walk.inner.loop_var, outer.loop_var, inner.loop_var]
        )
        values = [static_int(c) for c in coefficients]
        if len(values) != 5 or None in values:
            continue
        j_outer, j_inner, r_outer, r_inner, constant = values
        if j_inner not in (1, -1) or r_inner != -j_inner or j_outer != j_inner * walk.size or r_outer != r_inner * size:
            continue
        return _Band(axis, *_bound(type(conjunct), j_inner, constant))
    return None


def _bound(kind, sign: int, constant: int) -> tuple[int | None, int | None]:
    """(low, high) on d from `sign * d + constant  <op>  0`."""
    strict = kind in (tirx.LT, tirx.GT)
    below = (kind in (tirx.LT, tirx.LE)) == (sign == 1)  # the comparison bounds d from above
    limit = -constant * sign
    if below:
        return None, limit - 1 if strict else limit
    return limit + 1 if strict else limit, None


# --- identities ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Value:
    """An element's value where the masks take their other branch: zero, -inf, +inf, the lowest or
    highest finite value of its dtype (`extreme`), another finite constant, finite (an operand,
    assumed finite) or unknown. Arithmetic on an extreme value may overflow: it is unknown."""

    kind: str
    constant: float | None = None

    @property
    def extreme(self) -> bool:
        return self.kind in ("lowest", "highest")

    @property
    def infinite(self) -> bool:
        return self.kind in ("-inf", "+inf")


_FINITE, _UNKNOWN, _ZERO = _Value("finite"), _Value("unknown"), _Value("zero", 0.0)


def _constant(value: float, dtype: str = "float32") -> _Value:
    if value == 0:
        return _ZERO
    if math.isnan(value):
        return _UNKNOWN
    if math.isinf(value):
        return _Value("-inf" if value < 0 else "+inf", value)
    if abs(value) == float_max(dtype):
        return _Value("lowest" if value < 0 else "highest", value)
    return _Value("finite", value)


def _evaluate(expr, masks: dict[int, int]) -> _Value:
    """`masks`: select handle -> the argument it takes (1: then, 2: else)."""
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return _constant(float(expr.value), str(expr.ty.dtype))
    if isinstance(expr, (tvm.ir.TensorLoad, tirx.Var)):
        return _FINITE
    if isinstance(expr, tirx.Cast):
        return _cast(_evaluate(expr.value, masks), str(expr.ty.dtype))
    if call_name(expr) == "if_then_else" or isinstance(expr, tirx.Select):
        branches = expr.args[1:] if call_name(expr) == "if_then_else" else (expr.true_value, expr.false_value)
        if expr.__chandle__() in masks:
            return _evaluate(branches[masks[expr.__chandle__()] - 1], masks)
        a, b = (_evaluate(x, masks) for x in branches)
        return a if a == b else (_FINITE if {a.kind, b.kind} <= {"finite", "zero"} else _UNKNOWN)
    if call_name(expr) == "exp":
        inner = _evaluate(expr.args[0], masks)
        if inner.kind in ("-inf", "lowest"):
            return _ZERO  # exp underflows to exactly 0
        return _FINITE if inner.kind in ("finite", "zero") else _UNKNOWN
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Max, tirx.Min)):
        return _arithmetic(expr, _evaluate(expr.a, masks), _evaluate(expr.b, masks))
    return _UNKNOWN


def _cast(value: _Value, dtype: str) -> _Value:
    if not dtype.startswith(("float", "bfloat")):
        return value if value.kind == "zero" else _FINITE
    if value.extreme:  # the lowest fp16 is an ordinary fp32; the lowest fp32 overflows fp16
        return _constant(value.constant, dtype) if abs(value.constant) <= float_max(dtype) else _UNKNOWN
    return value


def _negate(value: _Value) -> _Value:
    flipped = {"-inf": "+inf", "+inf": "-inf", "lowest": "highest", "highest": "lowest"}.get(value.kind, value.kind)
    return _Value(flipped, -value.constant if value.constant is not None else None)


def _arithmetic(expr, a: _Value, b: _Value) -> _Value:
    if _UNKNOWN in (a, b):
        return _UNKNOWN
    if isinstance(expr, tirx.Sub):
        return _sum(a, _negate(b))
    if isinstance(expr, tirx.Add):
        return _sum(a, b)
    if isinstance(expr, tirx.Mul):
        return _product(a, b)
    if isinstance(expr, tirx.Div):
        return _product(a, _constant(1.0 / b.constant)) if b.kind == "finite" and b.constant else _UNKNOWN
    return _extremum("max" if isinstance(expr, tirx.Max) else "min", a, b)


def _extremum(kind: str, a: _Value, b: _Value) -> _Value:
    ignored, absorbing = ("-inf", "+inf") if kind == "max" else ("+inf", "-inf")
    if a.kind == ignored:
        return b
    if b.kind == ignored:
        return a
    if absorbing in (a.kind, b.kind):
        return _Value(absorbing)
    return _FINITE if {a.kind, b.kind} <= {"finite", "zero"} else _UNKNOWN


def _sum(a: _Value, b: _Value) -> _Value:
    if a.kind == "zero":
        return b
    if b.kind == "zero":
        return a
    if a.extreme or b.extreme or {a.kind, b.kind} == {"-inf", "+inf"}:
        return _UNKNOWN  # an extreme value plus anything may overflow; -inf + inf is NaN
    infinite = next((v for v in (a, b) if v.infinite), None)
    return _Value(infinite.kind) if infinite is not None else _FINITE


def _product(a: _Value, b: _Value) -> _Value:
    if "zero" in (a.kind, b.kind):
        other = b if a.kind == "zero" else a
        return _ZERO if not other.infinite else _UNKNOWN  # 0 * V = 0 for finite V (assumed)
    if a.extreme or b.extreme:
        return _UNKNOWN
    for infinite, other in ((a, b), (b, a)):
        if infinite.infinite:
            if other.constant is None:
                return _UNKNOWN  # the sign of an operand is not known
            return infinite if other.constant > 0 else _negate(infinite)
    return _FINITE


# --- the bounds ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arithmetic:
    """How to build the bounds: TIR expressions (Tiling, the contract check) or the kernel's tile
    IR (the lowering)."""

    const: object
    add: object
    mul: object
    floordiv: object  # of a non-negative value
    cdiv: object  # of a non-negative value
    min: object
    max: object


def window_range(
    window: TileWindow, rows_outer, rows_block, cols_block, cols_tiles, ops: Arithmetic, name_start=lambda start: start
):
    """(start, stop) of the serial loop: the tiles of j the current row tile needs. `name_start`
    turns the start into what the stop reads of it (the kernel names it once)."""
    first_row = ops.mul(rows_outer, rows_block)
    start = ops.const(0)
    if window.low is not None:
        start = ops.floordiv(ops.max(ops.const(0), ops.add(first_row, ops.const(window.low))), cols_block)
    stop = cols_tiles
    if window.high is not None:
        last = ops.add(ops.add(first_row, rows_block), ops.const(window.high))
        if window.high < -1:
            last = ops.max(ops.const(0), last)
        stop = ops.min(cols_tiles, ops.cdiv(last, cols_block))
    if window.low is not None or (window.high is not None and window.high < 0):
        # a row tile whose bands are all empty still visits one tile (its rows are NaN, as in TIR);
        # never tile -1, which zero keys (a symbolic extent of 0) would give
        start = ops.max(ops.const(0), ops.min(start, ops.add(cols_tiles, ops.const(-1))))
        stop = ops.max(stop, ops.add(name_start(start), ops.const(1)))
    return start, stop


def _tir_arithmetic(dtype: str) -> Arithmetic:
    return Arithmetic(
        const=lambda v: tirx.const(v, dtype),
        add=lambda a, b: a + b,
        mul=lambda a, b: a * b,
        floordiv=tirx.floordiv,
        cdiv=lambda a, b: tirx.floordiv(a + b - 1, b),
        min=tirx.Min,
        max=tirx.Max,
    )


def tir_window_range(window: TileWindow, rows_outer: tirx.For, rows_size: int, cols_size: int, cols_extent) -> tuple:
    """(min, extent) of the serial loop in TIR at the default block sizes, simplified: it stops
    where the window stops, but starts at 0. TVM runs a reduction block's T.init at the first
    element of its reduction; a loop starting later would skip it, so a lower bound is the
    kernel's alone (its accumulators start before the loop), proven by the contract check and run
    by the kernel check."""
    dtype = str(rows_outer.loop_var.ty.dtype)
    ops = _tir_arithmetic(dtype)
    tiles = tirx.floordiv(cols_extent + cols_size - 1, cols_size)
    _, stop = window_range(
        window, rows_outer.loop_var, tirx.const(rows_size, dtype), tirx.const(cols_size, dtype), tiles, ops
    )
    analyzer = sym.Analyzer()
    analyzer.bind(rows_outer.loop_var, tvm.ir.Range.from_min_extent(rows_outer.min, rows_outer.extent))
    return tirx.const(0, dtype), analyzer.simplify(stop)


def window_loops(enclosing, tiles: dict, window: TileWindow) -> tuple[tirx.For, int] | None:
    """The rows' outer (program-id) loop among `enclosing` and the rows' block size."""
    rows = _RowsAxis.find(enclosing, tiles)
    for outer, _, axis, size in rows.loops.values():
        if axis == window.rows:
            return outer, size
    return None


def read_outside(body, loop: tirx.For) -> set[str]:
    """Buffers read by the blocks of `body` (the function's, every kernel) not under `loop`."""
    inside = {realize.block.name_hint for realize, _ in block_sites(loop.body)}
    return {
        region.source.name
        for realize, _ in block_sites(body)
        if realize.block.name_hint not in inside
        for region in realize.block.reads
    }


# --- interior tiles: where the window's masks all hold ---------------------------------------------
def window_implies(condition, realize, walk: WalkedAxis, enclosing, tiles: dict, window: TileWindow) -> bool | None:
    """The value `condition` (a select's, over the block's variables) takes at every element of a
    tile pair inside the window (every row of the row tile and every j of the j tile within
    i + low <= j <= i + high), when its bound on j - r decides it: True where the window lies in
    the condition's band, False where it lies outside; None otherwise (another condition, another
    rows axis, or a band that cuts the window)."""
    rows = _RowsAxis.find(enclosing, tiles)
    band = _difference_bound(sym.Analyzer().simplify(condition), realize, walk, rows)
    if band is None or band.rows != window.rows:
        return None
    if _within(window.low, window.high, band.low, band.high):
        return True
    below = band.high is not None and window.low is not None and window.low > band.high
    above = band.low is not None and window.high is not None and window.high < band.low
    return False if below or above else None


def _within(low, high, band_low, band_high) -> bool:
    """[low, high] (None: unbounded) inside [band_low, band_high]."""
    return (band_low is None or (low is not None and band_low <= low)) and (
        band_high is None or (high is not None and high <= band_high)
    )


def interior_range(
    window: TileWindow, rows_outer, rows_block, cols_block, start, stop, ops: Arithmetic, name_first=lambda first: first
):
    """(first, stop) of the tiles of j whose every element, for every row of the current row tile,
    lies inside the window, within [start, stop): j0 * B_j >= R + B_r - 1 + low and
    (j0 + 1) * B_j - 1 <= R + high, R = rows_outer * B_r (first = start without low, stop without
    high). `name_first` turns the first into what the stop reads of it."""
    first_row = ops.mul(rows_outer, rows_block)
    first = start
    if window.low is not None:
        lowest = ops.max(ops.const(0), ops.add(ops.add(first_row, rows_block), ops.const(window.low - 1)))
        first = name_first(ops.min(stop, ops.max(start, ops.cdiv(lowest, cols_block))))
    last = stop
    if window.high is not None:
        highest = ops.max(ops.const(0), ops.add(first_row, ops.const(window.high + 1)))
        last = ops.max(first, ops.min(stop, ops.floordiv(highest, cols_block)))
    return first, last
