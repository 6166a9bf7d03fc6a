"""The tiling contract: the decisions Tiling makes, in one typed form, stored in the IR.

Tiling writes them (and nothing else does), the dump shows them as annotations, the `contract`
check verifies them after every pass, and the lowering reads them as they are: it never decides
again which loops are program ids, which tile axes are one axis, which blocks are `tl.dot`s or
which intermediates stay in registers.

Where each decision lives (`TileDecision` fields below):

  loop annotation "tile"          LoopTile   grid | serial | tile; for a tile axis: its kernel-wide
                                             axis name, BLOCK constexpr, default size, the extent it
                                             covers and, when split, the outer loop that steps it;
                                             for a serial loop: the buffers whose dependence it carries
                                             and, when it steps a tile axis, the TileWindow of tiles it
                                             visits (tile_window.py); for a row walk, the LoopPrefetch
                                             of its row loads (prefetch_record.py)
  kernel's outer loop (or block)
      annotation "tile.kernel"    KernelTile num_warps, num_stages, group_m, persistent, longest_first (a grid
                                             loop launched last tile first), which values written and
                                             read again in the kernel stay in registers, which go
                                             through memory with a sync; deterministic kernels: the
                                             Pins (BLOCK_* or num_warps, value, why) no config changes,
                                             and the Floors (name, minimum, why) no config goes under
  block annotation "tile.dot"     DotMark    the block is a tl.dot over tile axes (m, n, k)
  block annotation "tile.scan"    ScanMark   the block is a scan along a tile axis
  block annotation "tile.split"   SplitMark  the block sums a contraction's partials over `splits`
                                             slices of its reduction loop (SplitReduction, split-K)
  block annotation "tile.not_dot" NotDot     a contraction that is not a tl.dot, and why (a reason
                                             code and a sentence naming the loops)
  root block "tile.decisions"     TileNote   why, for people: per note its kernel and its line
  root block "tile.limits"        BackendLimits  the backend's limits Tiling tiled under (backend_limits.py)
  root block "tile.deterministic" 1          the promise of compile(deterministic=True): every kernel's
                                             Pins (in "tile.kernel") keep each element's reduction order
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.errors import TirTritonError
from tir_passes.infra.pass_util import replace_block, root_block, static_int
from tir_passes.infra.reduction_kinds import KINDS
from tir_passes.contracts.persistent_record import persistent_fields
from tir_passes.contracts.prefetch_record import LoopPrefetch, prefetch_from, prefetch_value
from tir_passes.contracts.pin_record import (PIN_DOT, PIN_LAYOUT, PIN_MMA, PIN_REASONS, PIN_REDUCTION,  # noqa: F401
                                             PIN_SCAN, PIN_WARPS, WARPS, Floor, Pin, floor_from, floor_value, pin_from,
                                             pin_value)

LOOP_KEY, KERNEL_KEY, DOT_KEY, SCAN_KEY, SPLIT_KEY = "tile", "tile.kernel", "tile.dot", "tile.scan", "tile.split"
NOT_DOT_KEY = "tile.not_dot"
DECISIONS_KEY = "tile.decisions"   # root block: Tiling's reasons, TileNotes (the kernel each is about, its text)
LIMITS_KEY = "tile.limits"         # root block: the backend's limits Tiling tiled under (backend_limits.py)
DETERMINISTIC_KEY = "tile.deterministic"   # root block: the kernels keep every reduction order (determinism.py)
GRID, SERIAL, TILE = "grid", "serial", "tile"
ROLES = (GRID, SERIAL, TILE)
SCAN_COMBINERS = tuple(KINDS)


class ContractError(TirTritonError):
    """The IR's tiling annotations are malformed or contradict the IR they describe."""

    def __init__(self, where: str, message: str, writer: str = "Tiling"):
        super().__init__(f"tiling contract violated at {where}: {message} (the {writer} pass wrote this decision)")
        self.where = where


@dataclass(frozen=True)
class TileWindow:
    """The tiles a serial loop that steps tile axis j visits, given the current tile of `rows` (a
    grid-split axis): those holding some j with i + low <= j <= i + high for a row i of the tile
    (None: unbounded on that side). Every element outside folds its combiner's identity
    (tile_window.py proves it), so skipping those tiles changes nothing: causal attention visits
    the tiles up to the diagonal, a sliding window the band."""

    rows: str
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class LoopTile:
    role: str
    axis: str | None = None           # tile: the kernel's axis name; whole tiles of sibling nests may share it
    block: str | None = None          # tile: the BLOCK constexpr
    size: int | None = None           # tile: the default block size
    extent: object = None             # tile: iterations the axis covers (a PrimExpr)
    outer: str | None = None          # tile: the split's outer loop, None for a whole (unsplit) tile
    carries: tuple[str, ...] = ()     # serial: buffers whose dependence this loop carries
    window: TileWindow | None = None  # serial, the outer loop of a split tile axis: the tiles it visits
    prefetch: LoopPrefetch | None = None  # serial row walk: its row loads issued iterations ahead

    @property
    def whole(self) -> bool:
        return self.role == TILE and self.outer is None


@dataclass(frozen=True)
class KernelTile:
    num_warps: int = BackendLimits.default_num_warps   # the record's defaults (Tiling always writes both)
    num_stages: int = BackendLimits.default_num_stages
    group_m: int | None = None
    registers: tuple[str, ...] = ()   # values written and read again in this kernel: reads come from registers
    spilled: tuple[str, ...] = ()     # values written and read again through memory: the program syncs between
    pins: tuple[Pin, ...] = ()        # deterministic kernels: settings no config may change
    persistent: bool = False          # a loop over the tiles, its grid sized by the launch (persistent_record.py)
    programs_per_sm: int = 0          # a persistent kernel's default launch: programs an SM, 0 a program a tile
    longest_first: str | None = None  # a grid loop whose later tiles walk more (a window's rows): launched last-first
    floors: tuple[Floor, ...] = ()    # deterministic kernels: settings no config may lower below their minimum

    def pinned(self, name: str) -> Pin | None:
        return next((pin for pin in self.pins if pin.name == name), None)

    def floor(self, name: str) -> Floor | None:
        return next((floor for floor in self.floors if floor.name == name), None)


@dataclass(frozen=True)
class DotMark:
    m: str
    n: str
    k: str


# why a contraction block is not a tl.dot (NotDot.reason)
NOT_DOT_SERIAL_K = "serial-reduction"    # its K loop is serial: the kernel's K tile axis is another loop
NOT_DOT_MISSING_AXIS = "missing-axis"    # no tiled M, N or K (a matrix-vector product)
NOT_DOT_EXTRA_AXES = "extra-axes"        # tiled loops beyond one M, one N and one K
NOT_DOT_SMALL_TILE = "small-tile"        # a tile below tl.dot's 16-element minimum
NOT_DOT_REASONS = (NOT_DOT_SERIAL_K, NOT_DOT_MISSING_AXIS, NOT_DOT_EXTRA_AXES, NOT_DOT_SMALL_TILE)


@dataclass(frozen=True)
class NotDot:
    """A contraction block Tiling did not make a tl.dot: it is lowered as sums of products."""

    reason: str   # one of NOT_DOT_REASONS
    detail: str   # the sentence for the dump, the report and the advice


@dataclass(frozen=True)
class ScanMark:
    buffer: str
    axis: str
    combiner: str


@dataclass(frozen=True)
class SplitMark:
    """A contraction's or a column reduction's reduction loop split across programs (SplitReduction):
    the block it marks computes partial sums over `splits` slices of the loop, spatial in the slice;
    the block `of` (the original one) sums the partials."""

    splits: int
    of: str


@dataclass
class TileDecision:
    """Everything Tiling decided for one function, keyed by the IR nodes it annotates."""

    loops: dict[int, LoopTile] = field(default_factory=dict)        # loop var handle -> LoopTile
    kernels: dict[int, KernelTile] = field(default_factory=dict)    # loop var handle or block name -> KernelTile
    dots: dict[str, DotMark] = field(default_factory=dict)          # block name -> DotMark
    scans: dict[str, ScanMark] = field(default_factory=dict)        # block name -> ScanMark
    not_dots: dict[str, NotDot] = field(default_factory=dict)       # block name -> NotDot
    bounds: dict[int, tuple] = field(default_factory=dict)  # loop var handle -> (min, extent) of a windowed loop
    deterministic: bool = False  # the root block carries the promise
    limits: BackendLimits | None = None  # the root block records the backend's limits Tiling tiled under
    notes: tuple["TileNote", ...] = ()   # the root block's "tile.decisions": why, for people


@dataclass(frozen=True)
class TileNote:   # one of Tiling's reasons, for people, with the kernel (top-level statement) it is about
    kernel: int
    text: str


# --- writing -------------------------------------------------------------------------------------
def _loop_value(tile: LoopTile) -> dict:
    value: dict = {"role": tile.role}
    if tile.role == TILE:
        value.update(axis=tile.axis, block=tile.block, size=tile.size, extent=_extent_value(tile.extent))
        if tile.outer is not None:
            value["outer"] = tile.outer
    if tile.carries:
        value["carries"] = list(tile.carries)
    if tile.window is not None:
        value["window"] = _window_value(tile.window)
    if tile.prefetch is not None:
        value["prefetch"] = prefetch_value(tile.prefetch)
    return value


def _window_value(window: TileWindow) -> dict:
    value: dict = {"rows": window.rows}
    if window.low is not None:
        value["low"] = window.low
    if window.high is not None:
        value["high"] = window.high
    return value


def _extent_value(extent):
    # a static extent as a Python int: that is what the parser reads back (round trip)
    constant = static_int(extent)
    return constant if constant is not None else extent


def _kernel_value(kernel: KernelTile) -> dict:
    value: dict = {"num_warps": kernel.num_warps, "num_stages": kernel.num_stages}
    if kernel.group_m is not None:
        value["group_m"] = kernel.group_m
    if kernel.registers:
        value["registers"] = list(kernel.registers)
    if kernel.spilled:
        value["spilled"] = list(kernel.spilled)
    if kernel.pins:
        value["pins"] = [pin_value(pin) for pin in kernel.pins]
    if kernel.floors:
        value["floors"] = [floor_value(floor) for floor in kernel.floors]
    if kernel.persistent:
        value["persistent"] = {"programs_per_sm": kernel.programs_per_sm}
    if kernel.longest_first is not None:
        value["longest_first"] = kernel.longest_first
    return value


def _with_annotations(loop: tirx.For, extra: dict) -> tirx.For:
    annotations = {**dict(loop.annotations), **extra}
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)


def write_decision(func: tirx.PrimFunc, decision: TileDecision) -> tirx.PrimFunc:
    """`func` with every decision written as annotations (the only writer of the contract)."""

    def annotate_loop(loop: tirx.For) -> tirx.For:
        key = loop.loop_var.__chandle__()
        extra = {}
        if key in decision.loops:
            extra[LOOP_KEY] = _loop_value(decision.loops[key])
        if key in decision.kernels:
            extra[KERNEL_KEY] = _kernel_value(decision.kernels[key])
        if key in decision.bounds:  # a windowed walk: the loop visits the tiles its TileWindow names
            start, extent = decision.bounds[key]
            loop = tirx.For(loop.loop_var, start, extent, loop.kind, loop.body, loop.thread_binding, loop.annotations)
        return _with_annotations(loop, extra) if extra else loop

    def annotate_block(block: s_tir.SBlock) -> s_tir.SBlock:
        extra = {}
        if block.name_hint in decision.dots:
            mark = decision.dots[block.name_hint]
            extra[DOT_KEY] = {"m": mark.m, "n": mark.n, "k": mark.k}
        if block.name_hint in decision.not_dots:
            not_dot = decision.not_dots[block.name_hint]
            extra[NOT_DOT_KEY] = {"reason": not_dot.reason, "detail": not_dot.detail}
        if block.name_hint in decision.scans:
            scan = decision.scans[block.name_hint]
            extra[SCAN_KEY] = {"buffer": scan.buffer, "axis": scan.axis, "combiner": scan.combiner}
        if block.name_hint in decision.kernels:
            extra[KERNEL_KEY] = _kernel_value(decision.kernels[block.name_hint])
        if block.name_hint == "root":
            extra.update(_root_values(decision))
        if not extra:
            return block
        return replace_block(block, annotations={**dict(block.annotations), **extra})

    body = tvm_ffi.structural_map(func.body, [(tirx.For, annotate_loop), (s_tir.SBlock, annotate_block)])
    return func.with_body(body)


def _root_values(decision: TileDecision) -> dict:
    values: dict = {DETERMINISTIC_KEY: 1} if decision.deterministic else {}
    if decision.limits is not None:
        values[LIMITS_KEY] = decision.limits.as_dict()
    if decision.notes:
        values[DECISIONS_KEY] = [{"kernel": note.kernel, "text": note.text} for note in decision.notes]
    return values


# --- reading -------------------------------------------------------------------------------------
def _text(value, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise ContractError(where, f"{what} must be a string, not {value!r}")
    return str(value)


def _positive_int(value, where: str, what: str) -> int:
    number = static_int(value)
    if number is None or number < 1:
        raise ContractError(where, f"{what} must be a positive integer, not {value!r}")
    return number


def loop_tile(loop: tirx.For) -> LoopTile | None:
    """The loop's decision, or None when Tiling left it unannotated."""
    raw = loop.annotations.get(LOOP_KEY) if loop.annotations else None
    if raw is None:
        return None
    where = f"loop {loop.loop_var.name}"
    if not hasattr(raw, "items"):
        raise ContractError(where, f'annotation "{LOOP_KEY}" must be a dict, not {raw!r}')
    fields = dict(raw.items())
    role = _text(fields.get("role"), where, "role")
    if role not in ROLES:
        raise ContractError(where, f"role must be one of {', '.join(ROLES)}, not {role!r}")
    carries = tuple(_text(b, where, "carries") for b in fields.get("carries", ()))
    if fields.get("prefetch") is not None and role != SERIAL:
        raise ContractError(where, f"only a serial loop prefetches, not a {role} loop")
    raw_prefetch = fields.get("prefetch")
    prefetch = prefetch_from(raw_prefetch, lambda why: ContractError(where, why)) if raw_prefetch is not None else None
    if role == SERIAL and fields.get("window") is not None:
        return LoopTile(role, carries=carries, window=_window_from(fields["window"], where), prefetch=prefetch)
    if role != TILE:
        if fields.get("window") is not None:
            raise ContractError(where, f"only a serial loop has a tile window, not a {role} loop")
        return LoopTile(role, carries=carries, prefetch=prefetch)
    size = _positive_int(fields.get("size"), where, "size")
    if size & (size - 1):
        raise ContractError(where, f"block size {size} is not a power of two")
    extent = fields.get("extent")
    if extent is None:
        raise ContractError(where, "a tile axis needs its extent")
    extent = tirx.const(extent, loop.loop_var.ty.dtype) if isinstance(extent, int) else extent
    if not isinstance(extent, tirx.Expr) or not str(extent.ty.dtype).startswith("int"):
        raise ContractError(where, f"a tile axis's extent must be an integer expression, not {extent!r}")
    outer = fields.get("outer")
    return LoopTile(
        role,
        _text(fields.get("axis"), where, "axis"),
        _text(fields.get("block"), where, "block"),
        size,
        extent,
        _text(outer, where, "outer") if outer is not None else None,
        carries,
    )


def _offset(value, where: str, what: str) -> int | None:
    if value is None:
        return None
    number = static_int(value)
    if number is None:
        raise ContractError(where, f"window {what} must be an integer, not {value!r}")
    return number


def _window_from(raw, where: str) -> TileWindow:
    if not hasattr(raw, "items"):
        raise ContractError(where, f"a tile window must be a dict, not {raw!r}")
    fields = dict(raw.items())
    window = TileWindow(
        _text(fields.get("rows"), where, "window rows"),
        _offset(fields.get("low"), where, "low"),
        _offset(fields.get("high"), where, "high"),
    )
    if window.low is None and window.high is None:
        raise ContractError(where, "a tile window needs a low or a high bound")
    if window.low is not None and window.high is not None and window.low > window.high:
        raise ContractError(where, f"tile window low {window.low} is above high {window.high}")
    return window


def _kernel_from(raw, where: str) -> KernelTile:
    if not hasattr(raw, "items"):
        raise ContractError(where, f'annotation "{KERNEL_KEY}" must be a dict, not {raw!r}')
    fields = dict(raw.items())
    group_m = fields.get("group_m")
    warps = _positive_int(fields.get("num_warps", BackendLimits.default_num_warps), where, "num_warps")
    if warps & (warps - 1) or warps > BackendLimits.max_num_warps:
        raise ContractError(where, f"num_warps {warps} is not a power of two up to {BackendLimits.max_num_warps}")
    return KernelTile(
        warps,
        _positive_int(fields.get("num_stages", BackendLimits.default_num_stages), where, "num_stages"),
        _positive_int(group_m, where, "group_m") if group_m is not None else None,
        tuple(_text(r, where, "registers") for r in fields.get("registers", ())),
        tuple(_text(r, where, "spilled") for r in fields.get("spilled", ())),
        tuple(pin_from(p, lambda why: ContractError(where, why)) for p in fields.get("pins", ())),
        *persistent_fields(fields.get("persistent"), group_m is not None, lambda why: ContractError(where, why)),
        _text(fields["longest_first"], where, "longest_first") if "longest_first" in fields else None,
        tuple(floor_from(f, lambda why: ContractError(where, why)) for f in fields.get("floors", ())),
    )


def kernel_tile(stmt) -> KernelTile | None:
    """The decision for the kernel whose outermost statement is `stmt`, or None."""
    if isinstance(stmt, tirx.For):
        raw, where = stmt.annotations.get(KERNEL_KEY), f"loop {stmt.loop_var.name}"
    elif isinstance(stmt, s_tir.SBlockRealize):
        raw, where = stmt.block.annotations.get(KERNEL_KEY), f"block {stmt.block.name_hint}"
    else:
        return None
    return _kernel_from(raw, where) if raw is not None else None


def dot_mark(block: s_tir.SBlock) -> DotMark | None:
    raw = block.annotations.get(DOT_KEY)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    fields = dict(raw.items())
    return DotMark(*(_text(fields.get(key), where, f"dot axis {key}") for key in ("m", "n", "k")))


def not_dot_mark(block: s_tir.SBlock) -> NotDot | None:
    raw = block.annotations.get(NOT_DOT_KEY)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    fields = dict(raw.items())
    reason = _text(fields.get("reason"), where, "not-a-dot reason")
    if reason not in NOT_DOT_REASONS:
        raise ContractError(where, f"not-a-dot reason must be one of {', '.join(NOT_DOT_REASONS)}, not {reason!r}")
    return NotDot(reason, _text(fields.get("detail"), where, "not-a-dot detail"))


def scan_mark(block: s_tir.SBlock) -> ScanMark | None:
    raw = block.annotations.get(SCAN_KEY)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    fields = dict(raw.items())
    combiner = _text(fields.get("combiner"), where, "scan combiner")
    if combiner not in SCAN_COMBINERS:
        raise ContractError(where, f"scan combiner must be one of {', '.join(SCAN_COMBINERS)}, not {combiner!r}")
    return ScanMark(
        _text(fields.get("buffer"), where, "scan buffer"), _text(fields.get("axis"), where, "scan axis"), combiner
    )


def split_value(mark: SplitMark) -> dict:
    return {"splits": mark.splits, "of": mark.of}


def split_mark(block: s_tir.SBlock) -> SplitMark | None:
    raw = block.annotations.get(SPLIT_KEY)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    if not hasattr(raw, "items"):
        raise ContractError(where, f'annotation "{SPLIT_KEY}" must be a dict, not {raw!r}', writer="SplitReduction")
    fields = dict(raw.items())
    splits = _positive_int(fields.get("splits"), where, "splits")
    if splits < 2:
        raise ContractError(where, f"a split needs at least 2 slices, not {splits}", writer="SplitReduction")
    return SplitMark(splits, _text(fields.get("of"), where, "split of"))


def deterministic_promise(func: tirx.PrimFunc) -> bool:
    """Whether Tiling tiled `func` for compile(deterministic=True) (the root block's mark)."""
    return DETERMINISTIC_KEY in root_block(func).annotations


def is_tiled(stmt) -> bool:
    """Whether Tiling already decided this statement (any loop carries a decision)."""
    found: list = []
    tvm_ffi.structural_walk(stmt, (tirx.For, lambda f: found.append(LOOP_KEY in f.annotations)))
    return any(found)
