"""Tiling: decide, in the IR, how each kernel's loops map onto Triton programs and tiles.

Every statement under the root block becomes one kernel. For each, a plan (tiling_plan.py) says
which loops are program ids ("grid"), which run inside a program ("serial") and which are tile
axes ("tile"), which blocks are tl.dots, and which written-then-read values stay in registers
(storage.py). This pass applies the plan with TVM's schedule, so the llvm build still runs the
loops serially and the numerics check verifies the rewrite:

  a tile loop of default block size B is split into an outer loop (grid or serial) and an inner
  loop of B iterations, with TIR's predicate for the tail; a whole tile keeps its loop;
  each loop chain is reordered grid, serial, tile;

then bounds each serial walk over a tile axis whose masked elements fold only identities to the
tiles the current row tile needs (tile_window.py: causal attention stops at the diagonal; the TIR
loop carries the upper bound, so the numerics check runs it) and marks each serial row walk whose rows
reduce before it goes on to load its next row one iteration early (tiling_prefetch.py: a "prefetch"
entry in the loop's "tile"), and writes every decision through
the tiling contract (tile_contract.py), the only form the lowering reads: {"tile": {"role": ..., "axis": ...,
"block": ..., "size": ..., "extent": ...,
"outer": ...}} on loops (a serial walk's "window": {"rows", "low", "high"}), {"tile.kernel": {...}} on each
kernel's outermost loop, {"tile.dot": ...}
on contraction blocks, {"tile.not_dot": {"reason", "detail"}} on a contraction that is not one. The root
block's "tile.decisions" says, per kernel, what was decided and
why (dependences that keep loops serial, values that go through memory). With
deterministic=True the plans pin every order-sensitive reduction's tiles and warps
(tiling_plan._pin, analyses/determinism.py); the pins go in "tile.kernel" and the root block
carries "tile.deterministic".
Assumes: HoistAllocations, RemoveUnitLoops and NormalizeLoopStarts ran. Nests that are already
tiled or bound to GPU threads (CUDA-style schedules) are left alone.
"""

from __future__ import annotations

import dataclasses

from tvm import s_tir, tirx

from tir_passes.contracts.gemm_price import persistent_default
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.analyses.nest import blocks_under, loop_sites, loops_under, unique_name
from tir_passes.infra.pass_util import root_block, s_tir_pass, static_int, top_level_statements
from tir_passes.analyses.storage import decide_storage
from tir_passes.contracts.tile_contract import (
    GRID,
    PIN_WARPS,
    SERIAL,
    TILE,
    WARPS,
    DotMark,
    KernelTile,
    LoopTile,
    Pin,
    Floor,
    PIN_MMA,
    ScanMark,
    TileDecision,
    TileNote,
    is_tiled,
    write_decision,
)
from tir_passes.analyses.tile_window import WalkedAxis, provable_window, read_outside, tir_window_range, window_loops
from tir_passes.passes.tiling_plan import KernelPlan, plan_kernel
from tir_passes.passes.tiling_prefetch import prefetch_walks
from tir_passes.contracts.fusion_record import recomputed_blocks, streaming_blocks
from tir_passes.contracts.row_partials import walked_blocks


def _key(loop: tirx.For) -> int:
    return loop.loop_var.__chandle__()


def _thread_bound(stmt) -> bool:
    return any(loop.kind == tirx.ForKind.THREAD_BINDING for loop in loops_under(stmt))


def _loop_rv(sch: s_tir.Schedule, block_name: str, loop: tirx.For):
    for rv in sch.get_loops(sch.get_sblock(block_name)):
        if sch.get(rv).loop_var.same_as(loop.loop_var):
            return rv
    raise AssertionError(f"loop {loop.loop_var.name} is not around block {block_name}")


def _block_under(loop: tirx.For) -> str:
    return blocks_under(loop)[0].name_hint


class _KernelApplier:
    """Applies one kernel's plan to the schedule and records its decisions (by new loop vars)."""

    def __init__(self, sch: s_tir.Schedule, plan: KernelPlan, decision: TileDecision):
        self.sch, self.plan, self.decision = sch, plan, decision
        self.blocks: dict[str, str] = {}  # axis -> BLOCK constexpr
        self.block_names: set[str] = set()
        self.axis_loops: dict[int, str] = {}  # pre-split loop handle -> axis name (for dot marks)

    def block_of(self, axis: str, wanted: str | None) -> str:
        if axis not in self.blocks:
            self.blocks[axis] = unique_name(wanted or f"BLOCK_{axis.upper()}", self.block_names)
        return self.blocks[axis]

    def apply_chain(self, chain: list[tirx.For]) -> object | None:
        """Split and reorder one loop chain; returns the RV of its new outermost loop."""
        if not chain:
            return None
        anchor = _block_under(chain[-1])
        rvs = [_loop_rv(self.sch, anchor, loop) for loop in chain]
        ordered: dict[str, list] = {GRID: [], SERIAL: [], TILE: []}
        for loop, rv in zip(chain, rvs):
            for role, new_rv in self._apply_loop(loop, rv):
                ordered[role].append(new_rv)
        order = ordered[GRID] + ordered[SERIAL] + ordered[TILE]
        if len(order) > 1:
            self.sch.reorder(*order)
        return order[0]

    def _role(self, loop: tirx.For) -> str:
        return GRID if _key(loop) in self.plan.parallel else SERIAL

    def _apply_loop(self, loop: tirx.For, rv) -> list[tuple[str, object]]:
        choice = self.plan.tiles.get(_key(loop))
        carries = self.plan.carries.get(_key(loop), ())
        if choice is None:
            self.decision.loops[_key(loop)] = LoopTile(self._role(loop), carries=carries)
            return [(self._role(loop), rv)]
        self.axis_loops[_key(loop)] = choice.axis
        tile = LoopTile(TILE, choice.axis, self.block_of(choice.axis, choice.block), choice.size, loop.extent)
        if choice.whole:
            self.decision.loops[_key(loop)] = tile
            return [(TILE, rv)]
        outer, inner = self.sch.split(rv, [None, choice.size], preserve_unit_iters=True)
        outer_var, inner_var = self.sch.get(outer).loop_var, self.sch.get(inner).loop_var
        self.decision.loops[outer_var.__chandle__()] = LoopTile(self._role(loop), carries=carries)
        self.decision.loops[inner_var.__chandle__()] = LoopTile(
            TILE, tile.axis, tile.block, tile.size, tile.extent, outer=outer_var.name
        )
        return [(self._role(loop), outer), (TILE, inner)]

    def block_marks(self) -> None:
        for block, (m, n, k) in self.plan.dots.items():
            self.decision.dots[block] = DotMark(self.axis_loops[m], self.axis_loops[n], self.axis_loops[k])
        for block, (loop, form) in self.plan.scans.items():
            self.decision.scans[block] = ScanMark(form.buffer.name, self.axis_loops[loop], form.combiner)
        self.decision.not_dots.update(self.plan.not_dots)


def _tile_kernel(
    sch, spec: GpuSpec, stmt, index: int, decision: TileDecision, deterministic: bool, recomputed: frozenset[str],
    streaming: frozenset[str] = frozenset(), walked: frozenset[str] = frozenset(),
) -> list[TileNote]:
    plan = plan_kernel(spec, stmt, deterministic, recomputed, streaming, walked)
    whole_axes = {key: choice.axis for key, choice in plan.tiles.items() if choice.whole}
    storage = decide_storage(stmt, whole_axes)
    applier = _KernelApplier(sch, plan, decision)
    outermost = None
    for chain in plan.chains:
        first = applier.apply_chain(chain)
        outermost = outermost if outermost is not None else first
    applier.block_marks()
    kernel = KernelTile(
        plan.num_warps,
        plan.num_stages,
        plan.group_m if _grid_count(plan) >= 2 else None,
        tuple(storage.registers),
        tuple(storage.spilled),
        _pins(plan, applier),
        *_persistent(spec, stmt, plan),
        floors=tuple(Floor(applier.blocks[axis], minimum, PIN_MMA) for axis, minimum in plan.floors.items()) +
        ((Floor(WARPS, plan.warps_floor, PIN_MMA),) if plan.warps_floor else ()),
    )
    if outermost is not None:
        decision.kernels[sch.get(outermost).loop_var.__chandle__()] = kernel
    else:
        decision.kernels[blocks_under(stmt)[0].name_hint] = kernel
    not_dots = [f"{block} is not a tl.dot ({why.reason}): {why.detail}" for block, why in plan.not_dots.items()]
    return [TileNote(index, _summary(index, stmt, plan, storage))] + [
        TileNote(index, f"kernel {index}: {note}") for note in plan.notes + not_dots + storage.notes
    ]


def _pins(plan: KernelPlan, applier: _KernelApplier) -> tuple[Pin, ...]:
    """The plan's pinned axes as the BLOCK constexprs the applier named (num_warps last)."""
    sizes = {choice.axis: choice.size for choice in plan.tiles.values()}
    pins = [Pin(applier.blocks[axis], sizes[axis], why) for axis, why in plan.pins.items()]
    if plan.pin_warps:
        pins.append(Pin(WARPS, plan.num_warps, PIN_WARPS))
    return tuple(pins)


def _persistent(spec: GpuSpec, stmt, plan: KernelPlan) -> tuple[bool, int]:
    """(persistent, programs per SM): a contraction over a grouped grid of more tiles than the GPU
    has SMs, static and not deterministic, is written as a persistent tile loop; its default launch
    is the GEMM price's (gemm_price.persistent_default), the tuner searches the rest."""
    # a deterministic kernel only where its tl.dots are its only sums: walking tiles changes no element's sum
    if not plan.dots or (plan.deterministic and not plan.free_dots) or plan.group_m is None or _grid_count(plan) < 2:
        return False, 0
    tiles = 1
    for loop in loops_under(stmt):
        if _key(loop) in plan.parallel:
            extent, choice = static_int(loop.extent), plan.tiles.get(_key(loop))
            if extent is None:
                return False, 0
            tiles *= -(-extent // choice.size) if choice is not None else extent
    return (True, persistent_default(spec, tiles)) if tiles > spec.multiprocessors else (False, 0)


def _grid_count(plan: KernelPlan) -> int:
    return len(plan.parallel)


def _summary(index: int, stmt, plan: KernelPlan, storage) -> str:
    """One line for the dump: what the kernel became, in loop order."""
    loops = loops_under(stmt)
    blocks = ", ".join(b.name_hint for b in blocks_under(stmt))
    grid = [l.loop_var.name for l in loops if _key(l) in plan.parallel]
    tiles = [f"{c.axis}={c.size}{' whole' if c.whole else ''}" for l in loops if (c := plan.tiles.get(_key(l)))]
    text = (
        f"kernel {index} ({blocks}): program ids over {', '.join(grid) or 'nothing (one program)'}; "
        f"tile axes {', '.join(tiles) or 'none'}; {plan.num_warps} warps, {plan.num_stages} stages"
    )
    if plan.dots:
        text += f"; tl.dot for {', '.join(plan.dots)}"
    if storage.registers:
        text += f"; in registers: {', '.join(storage.registers)}"
    return text


def tile_function(func: tirx.PrimFunc, spec: GpuSpec, deterministic: bool = False) -> tirx.PrimFunc:
    todo = [
        (index, stmt)
        for index, stmt in enumerate(top_level_statements(func))
        if not is_tiled(stmt) and not _thread_bound(stmt)
    ]
    if not todo:
        return func
    sch = s_tir.Schedule(func)
    decision = TileDecision(deterministic=deterministic, limits=spec.limits)
    notes: list[TileNote] = []
    recomputed, streaming, walked = recomputed_blocks(func), streaming_blocks(func), walked_blocks(func)
    for index, stmt in todo:
        notes += _tile_kernel(sch, spec, stmt, index, decision, deterministic, recomputed, streaming, walked)
    tiled = sch.mod["main"]
    for index, _ in todo:
        notes += _window_walks(tiled, top_level_statements(tiled)[index], index, decision)
        notes += prefetch_walks(tiled, top_level_statements(tiled)[index], index, decision)
    return write_decision(sch.mod["main"], dataclasses.replace(decision, notes=tuple(notes)))


def _window_walks(func: tirx.PrimFunc, stmt, index: int, decision: TileDecision) -> list[TileNote]:
    """Serial loops stepping a tile axis whose masked elements fold only identities visit just the
    tiles the current row tile needs (tile_window.py): the TileWindow and the loop's bounds."""
    notes = []
    sites = loop_sites(stmt)
    tiles = {loop.loop_var.__chandle__(): decision.loops.get(loop.loop_var.__chandle__()) for loop, _ in sites}
    params = {p.name for p in func.params if tirx.is_buffer_var(p)}
    for inner, enclosing in sites:
        tile = tiles[inner.loop_var.__chandle__()]
        position = next(
            (k for k, l in enumerate(enclosing) if tile is not None and tile.outer == l.loop_var.name), None
        )
        outer = enclosing[position] if position is not None else None
        outer_tile = tiles[outer.loop_var.__chandle__()] if outer is not None else None
        if outer_tile is None or outer_tile.role != SERIAL:
            continue
        around = enclosing[:position]
        window, why = provable_window(
            WalkedAxis(outer, inner, tile.size), around, tiles, read_outside(root_block(func).body, outer), params
        )
        if window is None:
            continue
        rows_outer, rows_size = window_loops(around, tiles, window)
        key = outer.loop_var.__chandle__()
        decision.loops[key] = dataclasses.replace(decision.loops[key], window=window)
        decision.bounds[key] = tir_window_range(window, rows_outer, rows_size, tile.size, tile.extent)
        notes.append(TileNote(index, f"kernel {index}: loop {outer.loop_var.name} {why}"))
        notes += _longest_first(stmt, index, decision, window, rows_outer)
    return notes


def _longest_first(stmt, index: int, decision: TileDecision, window, rows_outer) -> list[TileNote]:
    """A window open below and bounded above (causal: keys up to the diagonal) walks more tiles for
    later row tiles: their programs launch first, so the last wave is of short ones (FA3's
    longest-processing-time-first order), unless a grouped grid orders the tiles (GEMM's GROUP_M)."""
    key = next((k for loop in loops_under(stmt) if (k := loop.loop_var.__chandle__()) in decision.kernels), None)
    rows = next((static_int(t.extent) for t in decision.loops.values()
                 if t is not None and t.axis == window.rows and t.outer == rows_outer.loop_var.name), None)
    open_below = window.low is None or (rows is not None and window.low <= 1 - rows)   # i + low <= 0, every row
    if not open_below or window.high is None or key is None or decision.kernels[key].group_m is not None:
        return []
    decision.kernels[key] = dataclasses.replace(decision.kernels[key], longest_first=rows_outer.loop_var.name)
    return [TileNote(index, f"kernel {index}: tiles of {rows_outer.loop_var.name} launch last first (longer walks)")]


def Tiling(gpu: str = "H200", deterministic: bool = False, limits=None):
    """deterministic: every kernel keeps its reduction orders in every config (determinism.py);
    limits: the backend's (backend_limits.py; None: the default ones), recorded in "tile.limits"."""
    spec = gpu_spec(gpu, limits)
    return s_tir_pass("Tiling", lambda func: tile_function(func, spec, deterministic))
