"""Tiling plans: for one kernel nest, which loops become program ids, tile axes and serial loops,
which blocks are tl.dots and which values stay in registers. Pure functions of the IR; the Tiling
pass (tiling.py) applies a plan with TVM's schedule and writes it as the tiling contract.

Kernel shapes:
  perfect nest   loops around one block: a contraction gets dot-sized M/N/K tiles, a transposed
                 nest square tiles over its two contiguous loops, any other nest its innermost
                 reduction loop and innermost spatial loops as tiles (tile_sizes.py), a column
                 reduction (columns.py) tiles of columns stepped down the rows;
  fused nest     shared loops around sub-nests (LoopFusion's output): the shared loops are program
                 ids and a tile of rows, each sub-nest's innermost reduction and spatial loops are
                 column tiles; whole-row tiles of sibling sub-nests over the same buffer axis are one
                 axis; a contraction whose M and N are the shared loops sizes the kernel like a matmul;
  other          the outer loops that are spatial for every block become program ids, the rest
                 run serially.
A loop that carries a dependence (dependence.py) is never a program id or a tile: it is serial and
the plan records which buffers it carries (the lowering syncs the program after each iteration).
A value written and read in one kernel stays in registers when every read uses the element the
write produced (storage.py); otherwise it goes through memory with a sync in between ("spilled").
Assumes: HoistAllocations, RemoveUnitLoops and NormalizeLoopStarts ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import s_tir, tirx

from tir_passes.analyses.columns import column_loop, reduces_down_columns
from tir_passes.passes import tile_sizes, walk_stages
from tir_passes.passes.tile_axes import indexed_axes, share_whole_tile
from tir_passes.passes.walk_stages import accumulator_columns
from tir_passes.analyses.dependence import carried_dependences
from tir_passes.analyses.determinism import only_dots_order_sensitive, order_sensitive
from tir_passes.analyses.dot_nest import dot_nest, operand_staging
from tir_passes.analyses.masked_walk import walk_is_masked
from tir_passes.analyses.scans import ScanForm, scan_along_loop
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.contracts.online_contract import online_rescale, online_shift, online_split
from tir_passes.analyses.nest import (
    REDUCE,
    SPATIAL,
    block_accesses,
    batched_along,
    block_sites,
    bound_iter_var,
    contraction_operands,
    loop_chain,
    operands_dtype,
    loop_kind,
    loops_under,
    perfect_nest,
    realizes_under,
    unique_name,
    vars_of,
)
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.names import python_name
from tir_passes.passes.tile_axes import contraction_depth
from tir_passes.passes.tiling_pins import pin
from tir_passes.passes.tiling_types import KernelPlan, TileChoice, _key
from tir_passes.infra.pass_util import static_int
from tir_passes.contracts.tile_contract import (NOT_DOT_EXTRA_AXES, NOT_DOT_MISSING_AXIS, NOT_DOT_SERIAL_K,
                                                NOT_DOT_SMALL_TILE, NotDot)


# --- shapes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FusedShape:
    shared: list[tirx.For]
    subs: list[tuple[list[tirx.For], s_tir.SBlockRealize]]  # each block, with its loops below the shared
    chains: list[list[tirx.For]]  # the loop chains below the shared loops
    walked: bool = False  # the innermost shared loop is walked serially: the row loop of column partials


def fused_shape(stmt, streaming: frozenset[str] = frozenset(), walked: frozenset[str] = frozenset()) \
        -> FusedShape | None:
    """Shared loops around a sequence of nests (perfect nests, bare blocks, or nests of such, as
    LoopFusion leaves them when it fuses at several depths), with every shared loop spatial for
    every block; None for another shape. A nest LoopFusion streamed a contraction into (`streaming`:
    its blocks) shares the spatial loops above the reduction loop it streams along. The blocks of
    column partials RowPartials' record names (`walked`) may reduce over the innermost shared loop
    (then walked: one row per iteration, the partials accumulating over it)."""
    shared, inner = loop_chain(stmt)
    if streaming & {realize.block.name_hint for realize, _ in block_sites(stmt)}:
        sites = block_sites(stmt)
        cut = next((n for n, loop in enumerate(shared)
                    if any(loop_kind(loop, realize) != SPATIAL for realize, _ in sites)), len(shared))
        shared, inner = shared[:cut], (shared[cut] if cut < len(shared) else inner)
    if not shared or not isinstance(inner, (tirx.SeqStmt, tirx.For)):
        return None
    subs = [(list(loops), realize) for realize, loops in block_sites(inner)]
    if not subs:
        return None
    spatial = _spatial_prefix(shared, subs)
    if spatial == len(shared) - 1 and _walks_partials(shared[-1], subs, walked):
        return FusedShape(shared, subs, loop_chains(inner), walked=True)
    if spatial < len(shared) and not (spatial and _split_online(shared[spatial], subs)):
        return None
    if spatial < len(shared):  # the online loop of a split row (SplitOnlineRows): shared rows and chunks above it
        inner = shared[spatial]
        subs = [(list(loops), realize) for realize, loops in block_sites(inner)]
    return FusedShape(shared[:spatial], subs, loop_chains(inner))


def _spatial_prefix(loops: list[tirx.For], subs) -> int:
    """How many leading loops are spatial for every block."""
    count = 0
    while count < len(loops) and all(loop_kind(loops[count], realize) == SPATIAL for _, realize in subs):
        count += 1
    return count


def _walks_partials(loop: tirx.For, subs, walked: frozenset[str]) -> bool:
    """The innermost shared loop is the row loop RowPartials walks: spatial for every block but the
    column partials its record names, which reduce over it."""
    kinds = [(loop_kind(loop, realize), realize.block.name_hint in walked) for _, realize in subs]
    return any(kind == REDUCE for kind, _ in kinds) and all(kind == SPATIAL or (kind == REDUCE and named)
                                                           for kind, named in kinds)


def _split_online(loop: tirx.For, subs) -> bool:
    """The loop is the chunk a split online max walks (its OnlineSplit mark), directly over its blocks."""
    return any(online_split(realize.block) is not None and loop_kind(loop, realize) == REDUCE for _, realize in subs)


def loop_chains(stmt) -> list[list[tirx.For]]:
    """The maximal runs of directly nested loops under `stmt`, outermost first: each is reordered
    (grid, serial, tile) on its own."""
    chains: list[list[tirx.For]] = []

    def walk(node):
        if isinstance(node, tirx.For):
            chain, body = loop_chain(node)
            chains.append(chain)
            walk(body)
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child)
        elif isinstance(node, tirx.IfThenElse):
            walk(node.then_case)
            if node.else_case is not None:
                walk(node.else_case)

    walk(stmt)
    return chains


# --- dependences -------------------------------------------------------------------------------
def blocked_loops(stmt) -> dict[int, tuple[str, ...]]:
    """Loops of the kernel that carry a dependence when every other loop may take any value (the
    question for a program id; asked strictly for tile axes too), with the buffers it goes through."""
    carried: dict[int, tuple[str, ...]] = {}
    for loop in loops_under(stmt):
        found = carried_dependences(stmt, loop)
        if found:
            carried[_key(loop)] = tuple(dict.fromkeys(d.buffer for d in found))
    return carried


def scan_loops(stmt, carried: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ScanForm]]:
    """Loops whose only dependences are one block's scan along them: (block name, its scan)."""
    scans = {}
    for loop in loops_under(stmt):
        if _key(loop) not in carried:
            continue
        blocks = {b for d in carried_dependences(stmt, loop) for b in d.blocks}
        realizes = [r for r in realizes_under(loop) if r.block.name_hint in blocks]
        if len(realizes) == 1:
            form = scan_along_loop(realizes[0], loop.loop_var)
            if form is not None and carried[_key(loop)] == (form.buffer.name,):
                scans[_key(loop)] = (realizes[0].block.name_hint, form)
    return scans


def _loop_named(stmt, key: int) -> str:
    return next(l.loop_var.name for l in loops_under(stmt) if _key(l) == key)


def _dependence_notes(stmt, carried: dict[int, tuple[str, ...]]) -> list[str]:
    return [f"loop {loop.loop_var.name} stays serial: it carries a dependence through {', '.join(carried[_key(loop)])}"
            for loop in loops_under(stmt) if _key(loop) in carried]


# --- perfect nests -----------------------------------------------------------------------------
def _bound_name(loop: tirx.For, realize) -> str | None:
    iv = bound_iter_var(realize, loop.loop_var)
    return iv.var.name if iv is not None else None


def _last(loops, realize, kind: str, wanted, blocked) -> tirx.For | None:
    found = None
    for loop in loops:
        if loop_kind(loop, realize) == kind and _key(loop) not in blocked and wanted(_bound_name(loop, realize)):
            found = loop
    return found


def _axis_namer():
    """Axis names: the loop's name, made unique among the kernel's axes (the lowering names the
    kernel's loops around them)."""
    taken: set[str] = set()

    def name(loop: tirx.For) -> str:
        return unique_name(python_name(loop.loop_var.name), taken)

    return name


def _plan_contraction(spec: GpuSpec, loops, realize, blocked, axis_name, deterministic=False,
                      free_dots=False) -> KernelPlan | None:
    """M, N: the innermost spatial loops only `a` resp. only `b` uses; K: the innermost reduction
    loop both use. Other loops stay grid (spatial) or serial (reduction). Deterministic: the
    sizes do not shrink to small extents (a batch of 1 runs the tiles of a batch of 300), unless
    `free_dots` (the kernel's only order-sensitive sums are tl.dots): K pinned, M and N free above
    the MMA floors (tile_sizes.deterministic_tiles)."""
    a, b = contraction_operands(realize.block)
    m = _last(loops, realize, SPATIAL, lambda it: it in a.var_names and it not in b.var_names, blocked)
    n = _last(loops, realize, SPATIAL, lambda it: it in b.var_names and it not in a.var_names, blocked)
    k = _last(loops, realize, REDUCE, lambda it: it in a.var_names and it in b.var_names, blocked)
    if m is None or n is None or k is None:
        return None
    extents = {} if deterministic and not free_dots else \
        {"M": static_int(m.extent), "N": static_int(n.extent), "K": static_int(k.extent)}
    nest = operand_staging(dot_nest(m, k), a, b, realize, m, n)  # the K loop's dots priced as one (SwiGLU's)
    taken = set(blocked) | {_key(m), _key(n), _key(k)}  # the other spatial loops: programs beside the M·N tiles
    batch = math.prod(static_int(x.extent) or 1 for x in loops
                      if _key(x) not in taken and loop_kind(x, realize) == SPATIAL)
    dtype, out_bytes = operands_dtype(a, b), element_bytes(_store_dtype(realize))
    choose = tile_sizes.deterministic_tiles if deterministic and free_dots else tile_sizes.contraction_tiles
    tiles = choose(spec, dtype, extents, nest, batch, out_bytes)
    plan = KernelPlan([list(loops)], num_warps=tiles.warps, num_stages=tiles.stages, group_m=8,
                      free_dots=deterministic and free_dots, mma_rows="M" if nest.mma_b_side == "b" else "N")
    for loop, role, size in ((m, "M", tiles.m), (n, "N", tiles.n), (k, "K", tiles.k)):
        plan.tiles[_key(loop)] = TileChoice(axis_name(loop), size, False, f"BLOCK_{role}")
    plan.notes += tile_sizes.tile_notes(spec, dtype, extents, nest, tiles, batch, out_bytes)
    return plan


def contiguous_loops(loops, realize) -> list[tirx.For]:
    """Loops that drive the last (contiguous) index of some access of the block, in loop order."""
    driving: set[str] = set()
    for access in block_accesses(realize.block):
        if access.indices:
            driving.update(v.name for v in vars_of(access.indices[-1]))
    return [loop for loop in loops if _bound_name(loop, realize) in driving]


def _plan_transposed(loops, realize, contiguous, axis_name) -> KernelPlan:
    """Accesses contiguous along different loops (a transpose): square tiles over both, so the
    loads and the stores each run along a tile axis and coalesce."""
    plan = KernelPlan([list(loops)], num_warps=4, num_stages=2)
    for loop in contiguous[-2:]:
        plan.tiles[_key(loop)] = TileChoice(axis_name(loop), tile_sizes.transposed_size(static_int(loop.extent)), False)
    return plan


def _store_dtype(realize) -> str:
    """The widest dtype the block stores (a tile's register budget is counted in its elements)."""
    stored = [str(a.buffer.dtype) for a in block_accesses(realize.block) if a.is_store]
    return max(stored, key=element_bytes) if stored else "float32"


def _plan_general(spec: GpuSpec, loops, realize, blocked, axis_name, deterministic=False) -> KernelPlan:
    plan = KernelPlan([list(loops)], num_warps=4, num_stages=2)
    dtype = _store_dtype(realize)
    free = [loop for loop in loops if _key(loop) not in blocked]
    reduce = [loop for loop in free if loop_kind(loop, realize) == REDUCE]
    spatial = [loop for loop in free if loop_kind(loop, realize) == SPATIAL]
    remaining = tile_sizes.spatial_budget(spec, dtype)
    column = column_loop(reduce[-1], spatial, realize) if reduce and not deterministic else None
    if column is not None:  # a column reduction: tiles of columns stepped down the rows, every load coalesced
        for loop, size in ((column, tile_sizes.column_tile(static_int(column.extent))),
                           (reduce[-1], tile_sizes.column_step(static_int(reduce[-1].extent)))):
            plan.tiles[_key(loop)] = TileChoice(axis_name(loop), size, False)
        plan.num_warps = tile_sizes.fused_warps(tile_sizes.COLUMN_TILE, tile_sizes.COLUMN_STEP)
        plan.notes.append(f"loop {reduce[-1].loop_var.name} reduces down the columns of loop {column.loop_var.name}")
        return plan
    if reduce:
        size, plan.num_warps, remaining = tile_sizes.reduction_size(spec, dtype, static_int(reduce[-1].extent))
        plan.tiles[_key(reduce[-1])] = TileChoice(axis_name(reduce[-1]), size, False)
    for loop in reversed(spatial[-2:]):
        size = tile_sizes.spatial_size(static_int(loop.extent), remaining)
        if size <= 1 and not (deterministic and reduce):  # deterministic: one row is a tile of one
            break
        plan.tiles[_key(loop)] = TileChoice(axis_name(loop), size, False)
        remaining = max(1, remaining // size)
    return plan


def _plan_scan(spec: GpuSpec, loops, realize, scan_loop, blocked, axis_name) -> KernelPlan:
    """The scan axis is one tile (stepped by a serial loop when longer than the widest row tile);
    the innermost other spatial loop gets a tile within what is left of the budget."""
    plan = KernelPlan([list(loops)], num_warps=4, num_stages=2)
    size, whole = tile_sizes.row_tile(static_int(scan_loop.extent), spec.limits)
    plan.tiles[_key(scan_loop)] = TileChoice(axis_name(scan_loop), size, whole)
    others = [l for l in loops if loop_kind(l, realize) == SPATIAL and _key(l) not in blocked]
    remaining = max(1, tile_sizes.spatial_budget(spec, _store_dtype(realize)) // size)
    if others and remaining > 1:
        beside = tile_sizes.spatial_size(static_int(others[-1].extent), remaining)
        plan.tiles[_key(others[-1])] = TileChoice(axis_name(others[-1]), beside, False)
    return plan


def _plan_perfect(spec: GpuSpec, loops, realize, blocked, axis_name, scans, deterministic=False,
                  free_dots=False) -> KernelPlan:
    scan = next((l for l in loops if _key(l) in scans), None)
    if scan is not None:
        return _plan_scan(spec, loops, realize, scan, blocked, axis_name)
    if contraction_operands(realize.block) is not None:
        plan = _plan_contraction(spec, loops, realize, blocked, axis_name, deterministic, free_dots)
        if plan is not None:
            return plan
    contiguous = [
        l for l in contiguous_loops(loops, realize) if loop_kind(l, realize) == SPATIAL and _key(l) not in blocked
    ]
    if len(contiguous) >= 2 and all(loop_kind(l, realize) == SPATIAL for l in loops) and not blocked:
        return _plan_transposed(loops, realize, contiguous, axis_name)
    return _plan_general(spec, loops, realize, blocked, axis_name, deterministic)


# --- fused nests -------------------------------------------------------------------------------
def _fused_contraction(spec, shape: FusedShape, blocked, axis_name, deterministic=False,
                       free_dots=False) -> KernelPlan | None:
    """A contraction whose M and N are the shared loops (a matmul with its epilogue; `free_dots`
    holds while only contractions of it sum in an order-sensitive way)."""
    for loops, realize in shape.subs:
        if contraction_operands(realize.block) is None:
            continue
        free = free_dots and not any(order_sensitive(r.block) and contraction_operands(r.block) is None
                                     for _, r in shape.subs)
        plan = _plan_contraction(spec, shape.shared + loops, realize, blocked, axis_name(), deterministic, free)
        if plan is None:
            continue
        tiled_shared = [l for l in shape.shared if _key(l) in plan.tiles]
        tiled_inner = [l for l in loops if _key(l) in plan.tiles]
        if len(tiled_shared) == 2 and len(tiled_inner) == 1:
            plan.chains = [list(shape.shared)] + shape.chains
            return plan
    return None


def _online_loop(shape: FusedShape, blocked, streaming: frozenset[str] = frozenset()
                 ) -> tuple[tirx.For, str, bool] | None:
    """The loop an online nest's running maximum walks, when OnlineSoftmax's mark says it is
    streamed (stepped in tiles), or the reduction loop a block LoopFusion streamed a contraction into
    reduces along; with the dtype of the sums' operands, and whether one is a tl.dot contraction."""
    online = [
        (loops, realize)
        for loops, realize in shape.subs
        if online_shift(realize.block) is not None or online_rescale(realize.block) is not None
    ]
    reduce_loops = [l for loops, realize in online for l in loops if loop_kind(l, realize) == REDUCE]
    streamed = any(mark.streamed for _, realize in online if (mark := online_shift(realize.block)) is not None)
    if not online:  # a contraction LoopFusion streamed into a plain reduction: its loop is walked the same way
        online = [(loops, realize) for loops, realize in shape.subs if realize.block.name_hint in streaming]
        reduce_loops = [l for loops, realize in online for l in loops if loop_kind(l, realize) == REDUCE]
        streamed = bool(online)
    if not reduce_loops or _key(reduce_loops[0]) in blocked or not streamed:
        return None
    loop = reduce_loops[0]
    # a contraction folded along the loop (attention's weighted sum), or one computing its elements (the
    # scores fused under it): its tiles are tl.dot tiles, unless both operands vary along the rows (decode)
    contraction = next((realize for loops, realize in shape.subs if contraction_operands(realize.block) is not None
                        and any(l.same_as(loop) for l in loops) and not batched_along(realize, shape.shared[-1])), None)
    dtype = operands_dtype(*contraction_operands(contraction.block)) if contraction is not None else \
        _store_dtype(online[0][1])
    return loop, dtype, contraction is not None


def _plan_online(spec: GpuSpec, shape: FusedShape, online: tuple[tirx.For, str, bool], plan: KernelPlan,
                 axis_name, online_kind: bool = True) -> tuple[int, int]:
    """Tile the online loop (stepped by a serial loop) and choose the rows; returns (rows, columns)."""
    loop, dtype, contraction = online
    rows_extent, loop_extent = static_int(shape.shared[-1].extent), static_int(loop.extent)
    if plan.deterministic:  # neither the extents nor the GPU's multiprocessors decide the tiles
        rows_extent = loop_extent = None
    depth = None if plan.deterministic else contraction_depth(shape.subs, loop, shape.shared, not contraction)
    # the wide key tiles were measured for OnlineSoftmax's masked walk (one resident tile, K and V per stage); a
    # streamed walk may keep two resident tiles (dQ's Q and dO), over the shared memory at 128 x 128 x 3 stages
    sizes = tile_sizes.online_sizes(spec, dtype, rows_extent, loop_extent, contraction, spec.limits, depth,
                                    online_kind and walk_is_masked(shape.subs, loop), online=online_kind)
    rows, columns, plan.num_warps, plan.num_stages = sizes
    streamed = [r for loops, r in shape.subs if contraction_operands(r.block) is not None
                and loop_kind(loop, r) == SPATIAL and any(l.same_as(loop) for l in loops)]
    if not online_kind and len(streamed) > 1:
        # two tiles per step (dQ's S and dP): at 4 warps the model spills 400 bytes per thread; walk_stages.py
        plan.num_warps = max(plan.num_warps, 8)
        plan.num_stages = walk_stages.streamed_walk_stages(spec, dtype, rows, columns, depth, len(streamed))
        beside = None if plan.deterministic else accumulator_columns(shape.subs, shape.shared, loop)
        rows, plan.num_warps, plan.num_stages = walk_stages.rows_beside_accumulators(
            spec, rows, plan.num_warps, plan.num_stages, beside)
    others = [static_int(l.extent) for l in shape.shared[:-1]]
    if contraction and rows_extent is not None and None not in others:
        fewer = tile_sizes.rows_filling_the_gpu(rows, rows_extent, math.prod(others), spec)
        if fewer < rows and tile_sizes.key_tiles_widen(dtype):  # the same elements a tile: fewer, longer steps
            columns = min(columns * rows // fewer, tile_sizes.next_power_of_two(static_int(loop.extent) or columns))
            plan.num_stages = 3
        rows = fewer
    plan.tiles[_key(loop)] = TileChoice(axis_name(loop), columns, False)
    walks = "an online softmax: tiles of {}, rescaled sums" if online_kind else "a streamed contraction: tiles of {}"
    plan.notes.append(f"loop {loop.loop_var.name} walks {walks.format(columns)}; {rows} rows per program")
    return rows, columns


def _recomputes_the_row(loop: tirx.For, realize, recomputed: frozenset[str]) -> bool:
    """The row loop of a block LoopFusion's record names as a recomputed copy (the scores again,
    for the normalize pass, beside the online loop): walked in the online loop's tiles."""
    return realize.block.name_hint in recomputed and loop_kind(loop, realize) == SPATIAL


def _plan_fused(spec: GpuSpec, shape: FusedShape, blocked, deterministic=False,
                recomputed: frozenset[str] = frozenset(), streaming: frozenset[str] = frozenset(),
                free_dots=False) -> KernelPlan:
    plan = _fused_contraction(spec, shape, blocked, _axis_namer, deterministic, free_dots)
    if plan is not None:
        return plan
    axis_name = _axis_namer()
    plan = KernelPlan([list(shape.shared)] + shape.chains, num_stages=2, deterministic=deterministic)
    online = _online_loop(shape, blocked, streaming)
    marked = any(online_shift(r.block) is not None or online_rescale(r.block) is not None for _, r in shape.subs)
    online_rows, online_columns = (
        _plan_online(spec, shape, online, plan, axis_name, marked) if online is not None else (None, None)
    )
    shared_axes: dict[tuple, str] = {}  # (extent, (buffer, axis)) -> axis name of a whole tile
    widest = 1
    for loops, realize in shape.subs:
        used = {plan.tiles[_key(l)].axis for l in loops if _key(l) in plan.tiles}  # one block: distinct axes
        for kind in (REDUCE, SPATIAL):
            candidates = [l for l in loops if loop_kind(l, realize) == kind and _key(l) not in blocked]
            if not candidates:
                continue
            loop = candidates[-1]
            if _key(loop) in plan.tiles:  # a loop around several blocks that an earlier one tiled
                share_whole_tile(shared_axes, plan.tiles[_key(loop)], realize, loop)
                continue
            extent = static_int(loop.extent)
            size, whole = tile_sizes.row_tile(extent, spec.limits)
            if kind == REDUCE and online_rows is None and not deterministic \
                    and reduces_down_columns(loop, shape.shared[-1], realize):
                size, whole = tile_sizes.column_step(extent), False  # a column reduction: the columns get the tile
                plan.notes.append(f"loop {loop.loop_var.name} reduces down the columns of loop "
                                  f"{shape.shared[-1].loop_var.name}")
            elif online_rows is not None and _recomputes_the_row(loop, realize, recomputed):
                size, whole = online_columns, False  # the row's scores again, beside the online loop: tl.dot tiles
            elif online_rows is not None and not whole:
                size = tile_sizes.stepped_size(size, online_rows)  # beside the online loop, the same rows
            keys = sorted(((extent, key) for key in indexed_axes(realize, loop)), key=str) if whole else []
            axis = next((shared_axes[k] for k in keys if k in shared_axes and shared_axes[k] not in used), None)
            axis = axis or axis_name(loop)
            for k in keys:
                shared_axes.setdefault(k, axis)
            used.add(axis)
            plan.tiles[_key(loop)] = TileChoice(axis, size, whole)
            widest = max(widest, size)
    row_loop = shape.shared[-1]
    has_contraction = any(contraction_operands(r.block) is not None for _, r in shape.subs)
    row_extent = None if deterministic and has_contraction else static_int(row_loop.extent)  # tl.dot rows pinned
    rows = online_rows or tile_sizes.fused_rows(widest, row_extent, has_contraction, spec.limits)
    if shape.walked:
        rows = 1  # the partials' row loop stays serial, one whole row per iteration
        plan.notes.append(f"loop {row_loop.loop_var.name} walks the rows of column partials, one row per iteration")
    elif (rows > 1 or deterministic) and _key(row_loop) not in blocked:  # deterministic: 2-D tiles for one row too
        plan.tiles[_key(row_loop)] = TileChoice(axis_name(row_loop), rows, False)
    if online_rows is None:
        plan.num_warps = tile_sizes.fused_warps(rows, widest, [(realize, loops) for loops, realize in shape.subs])
    return plan


# --- dots ----------------------------------------------------------------------------------------
def _dot_loops(realize, enclosing: list, tiles: dict[int, TileChoice], limits: BackendLimits) -> tuple | NotDot:
    """(m, n, k) loops when a contraction block's tiled loops are exactly one M, one N and one K
    tile axis, each at least tl.dot's minimum: then the block is a tl.dot; else why not."""
    a, b = contraction_operands(realize.block)
    a_vars, b_vars = a.var_names, b.var_names
    roles: dict[str, list[tirx.For]] = {"m": [], "n": [], "k": [], "other": []}
    untiled_k = []
    for loop in enclosing:
        if bound_iter_var(realize, loop.loop_var) is None:
            continue  # an axis the block does not vary along
        it, kind = _bound_name(loop, realize), loop_kind(loop, realize)
        role = (
            "m"
            if kind == SPATIAL and it in a_vars and it not in b_vars
            else "n"
            if kind == SPATIAL and it in b_vars and it not in a_vars
            else "k"
            if kind == REDUCE and it in a_vars and it in b_vars
            else "other"
        )
        if _key(loop) not in tiles:
            if role == "k":
                untiled_k.append(loop)
            continue
        roles[role].append(loop)
    if roles["other"]:
        names = ", ".join(l.loop_var.name for l in roles["other"])
        return NotDot(NOT_DOT_EXTRA_AXES, f"its tiles include loop(s) {names}, which are neither its M, N nor K")
    for role in ("m", "n", "k"):
        if len(roles[role]) > 1:
            names = ", ".join(l.loop_var.name for l in roles[role])
            return NotDot(NOT_DOT_EXTRA_AXES, f"loops {names} are all {role.upper()} tile axes (tl.dot takes one)")
    if not roles["k"]:
        if untiled_k:
            return NotDot(
                NOT_DOT_SERIAL_K,
                f"its reduction loop {untiled_k[-1].loop_var.name} runs serially, one "
                "element of K at a time (the kernel's K tile axis is another loop)",
            )
        return NotDot(NOT_DOT_MISSING_AXIS, "it has no tiled reduction axis shared by both operands")
    for role, what in (
        ("m", "rows (M: an axis only its first operand varies along)"),
        ("n", "columns (N: an axis only its second operand varies along)"),
    ):
        if not roles[role]:
            return NotDot(NOT_DOT_MISSING_AXIS, f"it has no tiled {what}: a matrix-vector product")
    m, n, k = roles["m"][0], roles["n"][0], roles["k"][0]
    small = [l for l in (m, n, k) if tiles[_key(l)].size < limits.dot_min_block]
    if small:
        sizes = ", ".join(f"{l.loop_var.name}={tiles[_key(l)].size}" for l in small)
        return NotDot(NOT_DOT_SMALL_TILE, f"tile(s) {sizes} are below tl.dot's minimum of {limits.dot_min_block}")
    return _key(m), _key(n), _key(k)


def _mark_dots(stmt, plan: KernelPlan, limits: BackendLimits) -> None:
    for realize, enclosing in block_sites(stmt):
        if contraction_operands(realize.block) is None:
            continue
        found = _dot_loops(realize, list(enclosing), plan.tiles, limits)
        if isinstance(found, NotDot):
            plan.not_dots[realize.block.name_hint] = found
        else:
            plan.dots[realize.block.name_hint] = found


# --- kernels -------------------------------------------------------------------------------------
def _parallel_loops(stmt, nest, shape: FusedShape | None, blocked) -> set[int]:
    """Loops that become program ids (or the program-id half of a split): a perfect nest's spatial
    loops, a fused nest's shared loops, or another nest's leading loops that are spatial for every
    block; never a loop that carries a dependence."""
    if nest is not None:
        loops, realize = nest
        return {_key(l) for l in loops if loop_kind(l, realize) == SPATIAL and _key(l) not in blocked}
    if shape is not None:
        shared = shape.shared[:-1] if shape.walked else shape.shared
        return {_key(l) for l in shared if _key(l) not in blocked}
    realizes = realizes_under(stmt)
    parallel: set[int] = set()
    loop = stmt
    while isinstance(loop, tirx.For) and realizes:
        if _key(loop) in blocked or any(loop_kind(loop, r) != SPATIAL for r in realizes):
            break
        parallel.add(_key(loop))
        loop = loop.body
    return parallel


def plan_kernel(
    spec: GpuSpec, stmt, deterministic: bool = False, recomputed: frozenset[str] = frozenset(),
    streaming: frozenset[str] = frozenset(), walked: frozenset[str] = frozenset(), free_dots: bool = True,
) -> KernelPlan:
    """The plan for one kernel statement (any shape); deterministic: with the pins of
    determinism.py (and sizes that read neither the extents of tl.dot axes nor the GPU's SM count,
    but where `free_dots` and the kernel's only order-sensitive sums are tl.dots: their M/N tiles);
    `recomputed`: the blocks LoopFusion's record names as recomputed copies (fusion_record.recomputed_blocks);
    `streaming`: the blocks it streamed a contraction into (fusion_record.streaming_blocks);
    `walked`: the column partials RowPartials' record names (row_partials.walked_blocks)."""
    carried = blocked_loops(stmt)
    blocked = set(carried)
    nest = perfect_nest(stmt)
    scans = scan_loops(stmt, carried) if nest is not None else {}
    for key in scans:  # a scan's dependence stays in registers: the loop needs no sync
        del carried[key]
    shape = fused_shape(stmt, streaming, walked) if nest is None else None
    if nest is not None:
        plan = _plan_perfect(spec, nest[0], nest[1], blocked, _axis_namer(), scans, deterministic, free_dots)
    elif shape is not None:
        plan = _plan_fused(spec, shape, blocked, deterministic, recomputed, streaming, free_dots)
    else:
        leading = loop_chain(stmt)[0]
        inner = [loop for loop in loops_under(stmt) if not any(loop.same_as(l) for l in leading)]
        plan = KernelPlan([leading] + [[loop] for loop in inner], num_warps=spec.limits.default_num_warps,
                          num_stages=spec.limits.default_num_stages)
        plan.notes.append("not a perfect or fused nest: only the common outer spatial loops become program ids")
    plan.parallel = _parallel_loops(stmt, nest, shape, blocked)
    plan.carries = carried
    plan.scans = {block: (key, form) for key, (block, form) in scans.items()}
    plan.notes += [
        f"{block} is a {form.combiner} scan along loop {_loop_named(stmt, key)}" for key, (block, form) in scans.items()
    ]
    plan.notes += _dependence_notes(stmt, carried)
    _mark_dots(stmt, plan, spec.limits)
    if plan.free_dots and not only_dots_order_sensitive(stmt, plan.dots, plan.scans):  # a contraction not a tl.dot
        return plan_kernel(spec, stmt, deterministic, recomputed, streaming, walked, free_dots=False)
    if deterministic:
        pin(stmt, plan, blocked, spec.limits)
    return plan
