"""The Tiling plan's records for one kernel (tiling_plan.py makes them, tiling.py applies them):
which loops are tiles of which size, which are program ids, and the deterministic pins."""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

from tir_passes.analyses.scans import ScanForm
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.tile_contract import NotDot


@dataclass(frozen=True)
class TileChoice:
    axis: str
    size: int
    whole: bool  # the loop itself is the tile (no split): the size covers its whole extent
    block: str | None = None  # the BLOCK constexpr's name when not BLOCK_<AXIS> (BLOCK_M/N/K of a tl.dot)


@dataclass
class KernelPlan:
    """Decisions for one kernel, keyed by the handles of the loop variables before splitting."""

    chains: list[list[tirx.For]]  # loop chains, each reordered grid, serial, tile
    tiles: dict[int, TileChoice] = field(default_factory=dict)
    parallel: set[int] = field(default_factory=set)  # loops (or split outer halves) that become grid
    carries: dict[int, tuple[str, ...]] = field(default_factory=dict)
    num_warps: int = BackendLimits.default_num_warps   # every plan sets both (its model's, or the backend's)
    num_stages: int = BackendLimits.default_num_stages
    group_m: int | None = None
    dots: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # block -> (m, n, k) loops
    scans: dict[str, tuple[int, ScanForm]] = field(default_factory=dict)  # block -> (scan loop, form)
    not_dots: dict[str, NotDot] = field(default_factory=dict)  # contraction block -> why not a tl.dot
    notes: list[str] = field(default_factory=list)
    deterministic: bool = False  # sizes that do not read extents or the GPU's SM count
    pins: dict[str, str] = field(default_factory=dict)  # deterministic: tile axis -> why it is pinned
    pin_warps: bool = False  # deterministic: num_warps is pinned too
    # deterministic, a kernel whose only order-sensitive sums are tl.dots: its M/N tiles follow the extents
    # (tile_sizes.deterministic_tiles) and only BLOCK_K is pinned; tile axis -> the minimum no config goes under
    free_dots: bool = False
    floors: dict[str, int] = field(default_factory=dict)
    warps_floor: int = 0     # num_warps' minimum (0: none)
    mma_rows: str = "M"      # which of a contraction's M and N is the output's rows, the MMA's M (dot_nest.py)


def _key(loop: tirx.For) -> int:
    # NOTE: Vars overload ==, so they cannot be dict keys; their node address identifies them
    return loop.loop_var.__chandle__()
