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
  kernel's outer loop (or block)
      annotation "tile.kernel"    KernelTile num_warps, num_stages, group_m, which values written and
                                             read again in the kernel stay in registers, which go
                                             through memory with a sync
  block annotation "tile.dot"     DotMark    the block is a tl.dot over tile axes (m, n, k)
  block annotation "tile.scan"    ScanMark   the block is a scan along a tile axis
  root block "tile.decisions"     text       why: one line per kernel, dependences, values spilled

The backend's limits (tl.dot's 16-element minimum, the widest row tile) are here too, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm_ffi
from tvm import s_tir, tirx

from .errors import TirTritonError
from .nest import static_int
from .pass_util import replace_block

LOOP_KEY, KERNEL_KEY, DOT_KEY, SCAN_KEY = "tile", "tile.kernel", "tile.dot", "tile.scan"
DECISIONS_KEY = "tile.decisions"   # root block: Tiling's reasons, one line per kernel and note (for readers)
GRID, SERIAL, TILE = "grid", "serial", "tile"
ROLES = (GRID, SERIAL, TILE)
SCAN_COMBINERS = ("sum", "prod", "max", "min")


@dataclass(frozen=True)
class BackendLimits:
    """What Triton kernels can hold, as the passes and the lowering assume it."""

    dot_min_block: int = 16            # tl.dot needs every tile dimension to be at least 16
    max_row_tile: int = 16384          # the widest tile a program holds along one axis
    register_row_elements: int = 8192  # elements per shared-axis point a fused intermediate may keep
    default_num_warps: int = 4
    default_num_stages: int = 2


LIMITS = BackendLimits()


class ContractError(TirTritonError):
    """The IR's tiling annotations are malformed or contradict the IR they describe."""

    def __init__(self, where: str, message: str, writer: str = "Tiling"):
        super().__init__(f"tiling contract violated at {where}: {message} (the {writer} pass wrote this decision)")
        self.where = where


@dataclass(frozen=True)
class LoopTile:
    role: str
    axis: str | None = None           # tile: the kernel's axis name; whole tiles of sibling nests may share it
    block: str | None = None          # tile: the BLOCK constexpr
    size: int | None = None           # tile: the default block size
    extent: object = None             # tile: iterations the axis covers (a PrimExpr)
    outer: str | None = None          # tile: the split's outer loop, None for a whole (unsplit) tile
    carries: tuple[str, ...] = ()     # serial: buffers whose dependence this loop carries

    @property
    def whole(self) -> bool:
        return self.role == TILE and self.outer is None


@dataclass(frozen=True)
class KernelTile:
    num_warps: int = LIMITS.default_num_warps
    num_stages: int = LIMITS.default_num_stages
    group_m: int | None = None
    registers: tuple[str, ...] = ()   # values written and read again in this kernel: reads come from registers
    spilled: tuple[str, ...] = ()     # values written and read again through memory: the program syncs between


@dataclass(frozen=True)
class DotMark:
    m: str
    n: str
    k: str


@dataclass(frozen=True)
class ScanMark:
    buffer: str
    axis: str
    combiner: str


@dataclass
class TileDecision:
    """Everything Tiling decided for one function, keyed by the IR nodes it annotates."""

    loops: dict[int, LoopTile] = field(default_factory=dict)        # loop var handle -> LoopTile
    kernels: dict[int, KernelTile] = field(default_factory=dict)    # loop var handle or block name -> KernelTile
    dots: dict[str, DotMark] = field(default_factory=dict)          # block name -> DotMark
    scans: dict[str, ScanMark] = field(default_factory=dict)        # block name -> ScanMark


# --- writing -------------------------------------------------------------------------------------
def _loop_value(tile: LoopTile) -> dict:
    value: dict = {"role": tile.role}
    if tile.role == TILE:
        value.update(axis=tile.axis, block=tile.block, size=tile.size, extent=_extent_value(tile.extent))
        if tile.outer is not None:
            value["outer"] = tile.outer
    if tile.carries:
        value["carries"] = list(tile.carries)
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
        return _with_annotations(loop, extra) if extra else loop

    def annotate_block(block: s_tir.SBlock) -> s_tir.SBlock:
        extra = {}
        if block.name_hint in decision.dots:
            mark = decision.dots[block.name_hint]
            extra[DOT_KEY] = {"m": mark.m, "n": mark.n, "k": mark.k}
        if block.name_hint in decision.scans:
            scan = decision.scans[block.name_hint]
            extra[SCAN_KEY] = {"buffer": scan.buffer, "axis": scan.axis, "combiner": scan.combiner}
        if block.name_hint in decision.kernels:
            extra[KERNEL_KEY] = _kernel_value(decision.kernels[block.name_hint])
        if not extra:
            return block
        return replace_block(block, annotations={**dict(block.annotations), **extra})

    body = tvm_ffi.structural_map(func.body, [(tirx.For, annotate_loop), (s_tir.SBlock, annotate_block)])
    return func.with_body(body)


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
    if role != TILE:
        return LoopTile(role, carries=carries)
    size = _positive_int(fields.get("size"), where, "size")
    if size & (size - 1):
        raise ContractError(where, f"block size {size} is not a power of two")
    extent = fields.get("extent")
    if extent is None:
        raise ContractError(where, "a tile axis needs its extent")
    extent = tirx.const(extent, loop.loop_var.ty.dtype) if isinstance(extent, int) else extent
    outer = fields.get("outer")
    return LoopTile(role, _text(fields.get("axis"), where, "axis"), _text(fields.get("block"), where, "block"),
                    size, extent, _text(outer, where, "outer") if outer is not None else None, carries)


def _kernel_from(raw, where: str) -> KernelTile:
    fields = dict(raw.items())
    group_m = fields.get("group_m")
    return KernelTile(_positive_int(fields.get("num_warps", LIMITS.default_num_warps), where, "num_warps"),
                      _positive_int(fields.get("num_stages", LIMITS.default_num_stages), where, "num_stages"),
                      _positive_int(group_m, where, "group_m") if group_m is not None else None,
                      tuple(_text(r, where, "registers") for r in fields.get("registers", ())),
                      tuple(_text(r, where, "spilled") for r in fields.get("spilled", ())))


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


def scan_mark(block: s_tir.SBlock) -> ScanMark | None:
    raw = block.annotations.get(SCAN_KEY)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    fields = dict(raw.items())
    combiner = _text(fields.get("combiner"), where, "scan combiner")
    if combiner not in SCAN_COMBINERS:
        raise ContractError(where, f"scan combiner must be one of {', '.join(SCAN_COMBINERS)}, not {combiner!r}")
    return ScanMark(_text(fields.get("buffer"), where, "scan buffer"), _text(fields.get("axis"), where, "scan axis"),
                    combiner)


def is_tiled(stmt) -> bool:
    """Whether Tiling already decided this statement (any loop carries a decision)."""
    found: list = []
    tvm_ffi.structural_walk(stmt, (tirx.For, lambda f: found.append(LOOP_KEY in f.annotations)))
    return any(found)
