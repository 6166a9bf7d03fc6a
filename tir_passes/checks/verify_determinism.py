"""The contract check's part for compile(deterministic=True) (determinism.py): the pins the promise rests on.

For every kernel under the root's promise: every tile axis an order-sensitive reduction (a float
sum, not max or min) reduces along is pinned at its size, never a program id: either one whole
tile of a static row along the loads' contiguous axis, at exactly determinism.whole_tile (the
row's padded length, and a full vector for every thread of the pinned warps), or chunks of at
least determinism.chunk_elements (a whole tile anywhere else follows the extent); where the
reduction does not run along its loads' contiguous axis its other tile axes are pinned too; a
kernel whose only order-sensitive sums are tl.dots pins each one's K tile and keeps its M tile
and num_warps at least MMA_ROWS and MMA_WARPS (a floor or a pin); another kernel with a tl.dot
pins every tile; a float sum or product scan pins its axis; and num_warps is pinned wherever one
of these is. A pin's value is the loop's size: no config may change what the
promise rests on. Called by verify_contract.check_contract.
"""

from __future__ import annotations

from tir_passes.analyses.determinism import (chunk_elements, fits_whole, narrowest_load, order_sensitive,
                                             reduces_along_contiguous, reduces_serially, whole_tile)
from tir_passes.analyses.dot_nest import drives_output_columns
from tir_passes.analyses.nest import REDUCE, block_sites, loop_kind, loop_sites, written_buffers
from tir_passes.contracts.tile_contract import (GRID, TILE, WARPS, KernelTile, LoopTile, dot_mark, kernel_tile,
                                                loop_tile, scan_mark)
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.gemm_price import MMA_ROWS, MMA_WARPS
from tir_passes.infra.pass_util import static_int
from tir_passes.infra.reduction_kinds import ORDER_SENSITIVE


def determinism_problems(stmt, limits: BackendLimits) -> list[str]:
    """The pins a deterministic kernel needs are there, and hold the sizes its loops have."""
    sites = loop_sites(stmt)
    tiles = {loop.loop_var.__chandle__(): loop_tile(loop) for loop, _ in sites}
    if all(tile is None for tile in tiles.values()):
        return []
    kernel = kernel_tile(stmt) or KernelTile()
    problems = _pin_values(sites, tiles, kernel)
    blocks = block_sites(stmt)
    has_dot = any(dot_mark(realize.block) is not None for realize, _ in blocks)
    if has_dot and _only_dots(blocks):
        return [p for p in problems + _dot_step_pins(blocks, tiles, kernel) if p]
    sensitive = has_dot
    if has_dot:
        problems += [
            _unpinned(
                tile,
                kernel,
                "a kernel with a tl.dot keeps every tile (the MMA instruction and its K steps follow the tile shape)",
            )
            for tile in tiles.values()
            if tile is not None and tile.role == TILE
        ]
    for realize, enclosing in blocks:
        scan = scan_mark(realize.block)
        if (
            scan is not None
            and scan.combiner in ORDER_SENSITIVE
            and str(_scan_dtype(realize, scan)).startswith(("float", "bfloat"))
        ):
            sensitive = True
            problems += _scan_pins(realize, enclosing, tiles, kernel, scan)
        elif not has_dot and order_sensitive(realize.block):
            sensitive = True
            problems += _reduction_pins(realize, list(enclosing), tiles, kernel, limits)
    if sensitive:
        pin = kernel.pinned(WARPS)
        if pin is None or pin.size != kernel.num_warps:
            problems.append(f"num_warps ({kernel.num_warps}) is not pinned: tl.sum's tree runs across the warps")
    return [p for p in problems if p]


def _only_dots(blocks) -> bool:
    """Every order-sensitive block is a tl.dot and no float scan runs beside them (determinism.py:
    the M/N tiles and warps then decide no tl.sum's layout)."""
    scans = any(scan_mark(r.block) is not None for r, _ in blocks)
    return not scans and all(dot_mark(r.block) is not None for r, _ in blocks if order_sensitive(r.block))


def _dot_step_pins(blocks, tiles, kernel: KernelTile) -> list[str]:
    """A kernel whose only sums are tl.dots: each one's K tile pinned (the order of an element's
    partial products), its rows' tile (the output's rows: the MMA's M) and num_warps at least
    MMA_ROWS and MMA_WARPS, pinned or floored there in every config (below, Triton runs another MMA
    instruction family)."""
    by_axis = {tile.axis: tile for tile in tiles.values() if tile is not None and tile.role == TILE}
    problems = []
    for realize, enclosing in blocks:
        mark = dot_mark(realize.block)
        if mark is None or not {mark.m, mark.n, mark.k} <= set(by_axis):
            continue
        name = realize.block.name_hint
        problems.append(_unpinned(by_axis[mark.k], kernel, f"{name}'s K steps (the order its partial products add in)"))
        columns = {tiles[loop.loop_var.__chandle__()].axis for loop in enclosing
                   if tiles[loop.loop_var.__chandle__()] is not None and drives_output_columns(realize, loop)}
        rows = by_axis[mark.n if mark.m in columns and mark.n not in columns else mark.m]   # the MMA's M
        problems.append(_at_least(rows.block, rows.size, MMA_ROWS, kernel))
    problems.append(_at_least(WARPS, kernel.num_warps, MMA_WARPS, kernel))
    return problems


def _at_least(name: str, size: int, minimum: int, kernel: KernelTile) -> str:
    """`name` keeps the MMA instruction: at least `minimum` now, and pinned or floored there in every config."""
    pin, floor = kernel.pinned(name), kernel.floor(name)
    if size < minimum:
        return f"{name}={size} is under {minimum}: Triton would run another MMA instruction (mma.sync, not wgmma)"
    if pin is None and (floor is None or floor.minimum < minimum):
        return f"{name} has no floor of {minimum} (nor a pin): a config could change the MMA instruction family"
    return ""


def _pin_values(sites, tiles, kernel: KernelTile) -> list[str]:
    problems = []
    for loop, _ in sites:
        tile = tiles[loop.loop_var.__chandle__()]
        if (
            tile is not None
            and tile.role == TILE
            and (pin := kernel.pinned(tile.block)) is not None
            and pin.size != tile.size
        ):
            problems.append(f"pin {pin.name}={pin.size} differs from tile loop {loop.loop_var.name}'s size {tile.size}")
    return problems


def _unpinned(tile: LoopTile, kernel: KernelTile, why: str) -> str:
    return "" if kernel.pinned(tile.block) is not None else f"{tile.block} (axis {tile.axis}) is not pinned: {why}"


def _reduction_pins(realize, loops, tiles, kernel: KernelTile, limits: BackendLimits) -> list[str]:
    name = realize.block.name_hint
    problems = []
    chunk = chunk_elements(narrowest_load(realize.block), limits, kernel.num_warps)
    for loop in loops:
        tile = tiles[loop.loop_var.__chandle__()]
        if tile is None or loop_kind(loop, realize) != REDUCE:
            continue
        if tile.role == GRID:
            problems.append(
                f"{name} reduces along program-id loop {loop.loop_var.name}: its partial sums would meet "
                "in an order the GPU schedules"
            )
        elif tile.role == TILE:
            problems.append(_unpinned(tile, kernel, f"{name} adds along it (the association of its partial sums)"))
            if tile.whole:
                problems.append(_whole_row_problem(realize, loops, loop, tile, tiles, kernel, limits))
            elif tile.size < chunk:
                problems.append(
                    f"{name}'s chunk {tile.block}={tile.size} is under {chunk}: threads would not all hold "
                    "a full vector of it, and the rows per program would change the tree"
                )
    is_tile = lambda loop: _is_tile(tiles, loop)  # noqa: E731
    if not reduces_along_contiguous(realize, loops, is_tile) and not reduces_serially(realize, loops, is_tile):
        problems += [
            _unpinned(
                tiles[loop.loop_var.__chandle__()],
                kernel,
                f"{name} reduces along a non-contiguous axis, whose split over threads this tile decides",
            )
            for loop in loops
            if _is_tile(tiles, loop) and loop_kind(loop, realize) != REDUCE
        ]
    return problems


def _whole_row_problem(realize, loops, loop, tile: LoopTile, tiles, kernel: KernelTile,
                       limits: BackendLimits) -> str:
    """A whole tile is invariant only as one static row along the contiguous axis, padded to the
    size the program fixes (whole_tile): then no config and no other axis changes its tree."""
    name, extent = realize.block.name_hint, static_int(loop.extent)
    contiguous = reduces_along_contiguous(realize, loops, lambda l: _is_tile(tiles, l))
    if not fits_whole(loop.extent, limits) or not contiguous:
        return (f"{name} reduces along a whole tile {tile.block}={tile.size} that is not one static row along "
                "its loads' contiguous axis: its size or its split follows the extent")
    wanted = whole_tile(extent, narrowest_load(realize.block), kernel.num_warps, limits)
    if tile.size != wanted:
        return (f"{name}'s whole row {tile.block}={tile.size} is not the program's tile of {wanted} (the row's "
                f"padded length, a full vector for every thread of {kernel.num_warps} warps)")
    return ""


def _is_tile(tiles, loop) -> bool:
    tile = tiles[loop.loop_var.__chandle__()]
    return tile is not None and tile.role == TILE


def _scan_dtype(realize, scan) -> str:
    return next((str(buf.dtype) for buf in written_buffers(realize.block) if buf.name == scan.buffer), "float32")


def _scan_pins(realize, enclosing, tiles, kernel: KernelTile, scan) -> list[str]:
    problems = []
    for loop in enclosing:
        tile = tiles[loop.loop_var.__chandle__()]
        if tile is not None and tile.role == TILE and tile.axis == scan.axis:
            problems.append(_unpinned(tile, kernel, f"{realize.block.name_hint} scans along it (the scan's tree)"))
            if tile.whole:
                problems.append(
                    f"{realize.block.name_hint} scans along a whole tile {tile.block}={tile.size}, whose "
                    "size follows the extent"
                )
    return problems
