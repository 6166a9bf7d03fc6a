"""Tiling of fused nests (part of the Tiling pass): shared outer loops around several blocks.

LoopFusion leaves nests such as

    for i:                       # shared by every block below
        for k: row_max ...       # sub-nest of one block
        for k: row_sum ...
        for j: normalize ...

The shared loops become grid loops and tile axes (every block of the kernel works on the same
rows); inside, each sub-nest gets its innermost reduction and innermost spatial loops as tile
axes (with serial loops over tiles when a row is longer than one tile). When one block is a
contraction whose M and N loops are the shared loops (a matmul with its epilogue), the
contraction model sizes BLOCK_M/N/K and the epilogue shares the accumulator's tile.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .gpu_specs import GpuSpec
from .tiling import (REDUCE, SPATIAL, LoopInfo, _block_name, _classify, _perfect_nest, _plan_contraction, _static,
                     contraction_operands, next_power_of_two, power_of_two_floor)

MAX_ROW_TILE = 16384


def split_fused_nest(stmt) -> tuple[list[tirx.For], list[tuple[list[tirx.For], s_tir.SBlockRealize]]] | None:
    """(shared loops, [(sub-nest loops, realize)]) or None when the nest has another shape."""
    shared = []
    while isinstance(stmt, tirx.For):
        shared.append(stmt)
        stmt = stmt.body
    children = list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else None
    if not shared or children is None:
        return None
    subs = []
    for child in children:
        if isinstance(child, s_tir.SBlockRealize):
            subs.append(([], child))
            continue
        nest = _perfect_nest(child)
        if nest is None:
            return None
        subs.append(nest)
    if any(_classify(loop, realize) != SPATIAL for loop in shared for _, realize in subs):
        return None
    return shared, subs


def _contraction_plan(spec, shared, subs):
    for loops, realize in subs:
        if contraction_operands(realize.block) is None:
            continue
        all_loops = shared + loops
        infos = [LoopInfo(l.loop_var, l.extent, _classify(l, realize)) for l in all_loops]
        plan = _plan_contraction(spec, all_loops, infos, realize)
        if plan is None:
            continue
        positions = sorted(plan.tiles)
        m_n = [p for p in positions if p < len(shared)]
        k = [p for p in positions if p >= len(shared)]
        if len(m_n) == 2 and len(k) == 1:
            return plan, realize.block.name_hint, k[0] - len(shared)
    return None


def _indexed_axes(realize, loop_var) -> set[tuple[str, int]]:
    """(buffer, axis) pairs that the loop indexes directly: loops of different sub-nests that index
    the same axis of the same buffer walk the same columns and can share one tile axis."""
    iter_var = next((iv.var for iv, v in zip(realize.block.iter_vars, realize.iter_values)
                     if isinstance(v, tirx.Var) and v.same_as(loop_var)), None)
    if iter_var is None:
        return set()
    accesses: list = []
    tvm_ffi.structural_walk(realize.block.body, [(tirx.BufferStore, accesses.append), (tvm.ir.TensorLoad, accesses.append)])
    axes = set()
    for access in accesses:
        buf = access.buffer if isinstance(access, tirx.BufferStore) else access.source
        for axis, index in enumerate(access.indices):
            if isinstance(index, tirx.Var) and index.same_as(iter_var):
                axes.add((buf.name, axis))
    return axes


def _row_sizes(shared, subs, taken):
    """Tile the innermost shared loop by rows and each sub-nest's innermost reduction and spatial
    loops by columns. Rows up to MAX_ROW_TILE wide are one whole tile (no serial loop), so
    intermediates along them can stay in registers; tiles of different sub-nests over the same
    axis of the same buffer share a block size (and the lowering makes them one axis)."""
    whole_rows = max((_static(l.extent) or MAX_ROW_TILE + 1) for loops, _ in subs for l in loops) <= MAX_ROW_TILE \
        if any(loops for loops, _ in subs) else True
    names_by_key: dict[tuple, str] = {}  # (extent, (buffer, axis)) -> block name
    sub_tiles, widest = [], 1
    for loops, realize in subs:
        tiles: dict[int, tuple[str, int, bool]] = {}
        used: set[str] = set()  # two loops of one block never share an axis
        for kind in (REDUCE, SPATIAL):
            positions = [p for p, l in enumerate(loops) if _classify(l, realize) == kind]
            if not positions:
                continue
            pos = positions[-1]
            extent = _static(loops[pos].extent)
            size = min(next_power_of_two(extent or 1024), MAX_ROW_TILE)
            keys = {(extent, key) for key in _indexed_axes(realize, loops[pos].loop_var)} if whole_rows else set()
            name = next((names_by_key[k] for k in sorted(keys, key=str) if k in names_by_key
                         and names_by_key[k] not in used), None) or _block_name(loops[pos].loop_var, taken)
            for key in keys:
                names_by_key.setdefault(key, name)
            used.add(name)
            tiles[pos] = (name, size, whole_rows and extent is not None)
            widest = max(widest, size)
        sub_tiles.append(tiles)
    rows = max(1, power_of_two_floor(max(1, 4096 // widest)))
    if any(contraction_operands(realize.block) is not None for _, realize in subs):
        rows = max(rows, 16)  # a contraction in the kernel: tl.dot needs 16 rows
    rows = min(rows, next_power_of_two(_static(shared[-1].extent) or rows))
    shared_tiles = {len(shared) - 1: (_block_name(shared[-1].loop_var, taken), rows, False)} if rows > 1 else {}
    warps = max(4, min(16, power_of_two_floor(max(1, rows * widest // 512))))
    return shared_tiles, sub_tiles, warps


def _split(sch, loop_rv, name, size, whole, extents):
    """Outer (grid or serial) x inner tile loop; a whole tile keeps the loop and records its size."""
    if whole:
        sch.annotate(loop_rv, "tile.role", "tile")
        sch.annotate(loop_rv, "tile.block", name)
        sch.annotate(loop_rv, "tile.size", size)
        return None, loop_rv
    extent = sch.get(loop_rv).extent
    outer, inner = sch.split(loop_rv, [None, size], preserve_unit_iters=True)
    sch.annotate(inner, "tile.role", "tile")
    sch.annotate(inner, "tile.outer", sch.get(outer).loop_var.name)
    sch.annotate(inner, "tile.block", name)
    extents[sch.get(inner).loop_var.__chandle__()] = extent
    return outer, inner


def _split_loops(sch, loops, tiles, extents, outer_role: str) -> tuple[list, list]:
    """Split the planned loops; return (outer loops, tile loops), the outer ones given `outer_role`."""
    outer_loops, tile_loops = [], []
    for pos, loop in enumerate(loops):
        if pos in tiles:
            outer, inner = _split(sch, loop, *tiles[pos], extents)
            outer_loops += [outer] if outer is not None else []
            tile_loops.append(inner)
        else:
            outer_loops.append(loop)
    for loop in outer_loops:
        sch.annotate(loop, "tile.role", outer_role)
    if len(outer_loops) + len(tile_loops) > 1:
        sch.reorder(*(outer_loops + tile_loops))
    return outer_loops, tile_loops


def _apply_shared(sch, anchor: str, count: int, tiles, extents) -> tuple[object, int]:
    loops = sch.get_loops(sch.get_sblock(anchor))[:count]
    grid, tile = _split_loops(sch, loops, tiles, extents, "grid")
    return grid[0], len(grid) + len(tile)


def _apply_sub(sch, block: str, skip: int, tiles, extents) -> None:
    _split_loops(sch, sch.get_loops(sch.get_sblock(block))[skip:], tiles, extents, "serial")


def tile_fused_nest(sch: s_tir.Schedule, spec: GpuSpec, shared, subs, extents: dict) -> None:
    taken: set[str] = set()
    contraction = _contraction_plan(spec, shared, subs)
    if contraction is not None:
        plan, name, k_pos = contraction
        shared_tiles = {p: (*t, False) for p, t in plan.tiles.items() if p < len(shared)}
        sub_tiles = [{k_pos: (*plan.tiles[len(shared) + k_pos], False)} if r.block.name_hint == name else {} for _, r in subs]
        warps, stages, group_m = plan.num_warps, plan.num_stages, plan.group_m
    else:
        shared_tiles, sub_tiles, warps = _row_sizes(shared, subs, taken)
        stages, group_m = 2, None
    first, count = _apply_shared(sch, subs[0][1].block.name_hint, len(shared), shared_tiles, extents)
    for (loops, realize), tiles in zip(subs, sub_tiles):
        if loops:
            _apply_sub(sch, realize.block.name_hint, count, tiles, extents)
    sch.annotate(first, "tile.num_warps", warps)
    sch.annotate(first, "tile.num_stages", stages)
    if group_m is not None and len(shared_tiles) >= 2:
        sch.annotate(first, "tile.group_m", group_m)
