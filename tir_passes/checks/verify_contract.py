"""The `contract` check: the tiling decisions in the IR are well formed and true of the IR.

TVM's llvm build ignores annotations, so the numerics check cannot see a wrong decision; this
check can. After every pass (a no-op before Tiling), for every kernel it verifies:

- every decision parses (roles, power-of-two sizes, names);
- program-id loops are the kernel's outermost loops, and neither they nor tile loops carry a
  dependence (dependence.py); serial loops that carry one name the buffers (the program syncs);
- a split tile loop runs `size` iterations, its outer loop ceil(extent / size), and every
  predicate conjunct of a block under it that bounds `outer * size + inner` implies
  `outer * size + inner < extent` (the tail, or a stricter condition of the user's, which the
  kernel masks with as well); a whole tile covers its loop, whose extent is the tile's extent;
- loops that name one axis are whole tiles of one block size and extent, never nested;
- a tl.dot mark names tile axes (m, n, k) that are the block's M, N and K loops, each at least
  tl.dot's minimum, on a block that is a contraction;
- every value the kernel writes and reads again is in registers (and may be, by storage.py's
  rule) or spilled through memory;
- a serial loop with a TileWindow steps a tile axis, its rows are a tile axis split over program
  ids around it, it runs from 0 to the window's stop at the default sizes
  (tile_window.tir_window_range), and the masks prove a window at least as narrow
  (tile_window.provable_window): the skipped tiles fold only identities.

When the root block carries Tiling's deterministic promise (compile(deterministic=True)), also
the pins it rests on (verify_determinism.py).

And, from OnlineSoftmax on (online_contract.py), in every kernel whether tiled or not: a block
marked "online.shift" is a reduction over one axis that writes the shift and previous buffers it
names (and, once tiled, its row loop is walked in tiles when the mark says streamed); a block
marked "online.rescale" names a shift block of the same nest, and both reduce along the same loop
(a pass that moved them apart breaks the rescaling, which per element TIR does not show until the
lowering folds tiles).

And the root block's records, LoopFusion's and BufferLayout's (verify_records.py).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import sym, tirx

from tir_passes.analyses.dependence import carried_dependences
from tir_passes.analyses.nest import (REDUCE, SPATIAL, block_sites, blocks_under, bound_iter_var, conjuncts,
                                      contraction_operands,
                                      is_reduction_block, loop_kind, loop_sites, realizes_under, uses_var,
                                      written_buffers)
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.infra.pass_util import root_block, static_int, top_level_statements
from tir_passes.analyses.storage import decide_storage
from tir_passes.contracts.tile_contract import (
    GRID,
    SERIAL,
    TILE,
    ContractError,
    LoopTile,
    TileWindow,
    deterministic_promise,
    dot_mark,
    kernel_tile,
    loop_tile,
    not_dot_mark,
    scan_mark,
    split_mark,
)
from tir_passes.checks.online_checks import online_problems, stream_problems
from tir_passes.checks.verify_determinism import determinism_problems
from tir_passes.contracts.tile_root import backend_limits
from tir_passes.checks.verify_records import record_problems
from tir_passes.analyses.tile_window import WalkedAxis, provable_window, read_outside, tir_window_range, window_loops

PROOF = sym.ProofStrength.SYMBOLIC_BOUND


def check_contract(mod: tvm.IRModule) -> list[str]:
    problems: list[str] = []
    for _, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None and bool(func.attrs.get("s_tir", False)):
            params = {p.name for p in func.params if tirx.is_buffer_var(p)}
            deterministic = _record(deterministic_promise, func, problems, False)
            limits = _record(backend_limits, func, problems, None) or BackendLimits()   # before Tiling: the default
            problems += record_problems(func)
            for index, stmt in enumerate(top_level_statements(func)):
                found = _kernel_problems(stmt, params, root_block(func).body, limits)
                if deterministic and not found:
                    found = determinism_problems(stmt, limits)
                problems += [f"kernel {index}: {p}" for p in found]
            problems += _split_problems(func)
    return problems


def _record(read, func, problems: list[str], fallback):
    """A root record of `func` (`read` it), or `fallback` with the problem when it does not parse."""
    try:
        return read(func)
    except ContractError as err:
        problems.append(str(err))
        return fallback


def _split_problems(func: tirx.PrimFunc) -> list[str]:
    """Every SplitMark (SplitReduction): the marked block writes partials over a spatial axis of
    `splits` values, and the block it names sums them over a reduction axis."""
    problems = []
    sites = [realize for stmt in top_level_statements(func) for realize, _ in block_sites(stmt)]
    by_name = {realize.block.name_hint: realize for realize in sites}
    for realize in sites:
        try:
            mark = split_mark(realize.block)
        except ContractError as err:
            problems.append(str(err))
            continue
        if mark is None:
            continue
        name, block = realize.block.name_hint, realize.block
        written = written_buffers(block)
        partials = written[0] if len(written) == 1 else None
        slice_axes = [
            iv
            for iv in block.iter_vars
            if iv.iter_type == tirx.IterVar.DataPar and static_int(iv.dom.extent) == mark.splits
        ]
        # BufferLayout may move the slice axis of the partials (their layout is its decision)
        if not slice_axes or partials is None or mark.splits not in [static_int(d) for d in partials.shape]:
            problems.append(
                f"split block {name}: it must write its partials over a spatial axis of the "
                f"{mark.splits} splits (SplitReduction wrote this decision)"
            )
            continue
        total = by_name.get(mark.of)
        reads = {r.source.name for r in total.block.reads} if total is not None else set()
        if total is None or partials.name not in reads or not is_reduction_block(total.block):
            problems.append(
                f"split block {name}: block {mark.of} must sum its partials {partials.name} "
                "(SplitReduction wrote this decision)"
            )
    return problems


def _kernel_problems(stmt, params: set[str], body, limits: BackendLimits) -> list[str]:
    online = online_problems(stmt)
    if online:
        return online
    loops = loop_sites(stmt)
    try:
        tiles = {loop.loop_var.__chandle__(): loop_tile(loop) for loop, _ in loops}
        kernel = kernel_tile(stmt)
        for realize in realizes_under(stmt):
            dot_mark(realize.block), scan_mark(realize.block), not_dot_mark(realize.block)
    except ContractError as err:
        return [str(err)]
    if all(tile is None for tile in tiles.values()):
        return []  # not tiled (yet)
    problems = _grid_prefix(stmt, tiles) + stream_problems(stmt, tiles)
    analyzer = sym.Analyzer()
    for loop, _ in loops:
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    for loop, enclosing in loops:
        tile = tiles[loop.loop_var.__chandle__()]
        if tile is not None and tile.role == TILE:
            problems += _tile_problems(analyzer, loop, tile, enclosing)
        if tile is not None and tile.window is not None:
            problems += _window_problems(analyzer, body, loop, tile.window, enclosing, loops, tiles, params)
        if tile is not None and tile.prefetch is not None:
            problems += _prefetch_problems(stmt, loop, tile, params)
        problems += _dependence_problems(stmt, loop, tile, enclosing, tiles)
    problems += _axis_problems(loops, tiles)
    problems += _dot_problems(stmt, loops, tiles, limits)
    if kernel is not None:
        problems += _storage_problems(stmt, kernel, loops, tiles)
    grid = [loop.loop_var.name for loop, _ in loops
            if (tile := tiles[loop.loop_var.__chandle__()]) is not None and tile.role == GRID]
    if kernel is not None and kernel.longest_first is not None and kernel.longest_first not in grid:
        problems.append(f"longest_first names {kernel.longest_first}, not one of the kernel's grid loops {grid}")
    return problems


def _prefetch_problems(stmt, loop: tirx.For, tile: LoopTile, params: set[str]) -> list[str]:
    """A prefetching walk (prefetch_record.py) carries no dependence and runs at least once, and the
    buffers it loads early are parameters no block of the kernel writes: loads moved earlier read the same."""
    where = f"loop {loop.loop_var.name} prefetches {', '.join(tile.prefetch.buffers)}"
    written = {b.name for block in blocks_under(stmt) for b in written_buffers(block)}
    problems = [f"{where}, but it carries a dependence through {', '.join(tile.carries)}"] if tile.carries else []
    if (static_int(loop.extent) or 0) < 1:
        problems.append(f"{where}, but it may run no iteration (extent {loop.extent})")
    if bad := [name for name in tile.prefetch.buffers if name in written or name not in params]:
        problems.append(f"{where}, but {', '.join(bad)} is not a parameter the kernel only reads")
    return problems


def _grid_prefix(stmt, tiles) -> list[str]:
    outer, seen_other = [], False
    for loop, _ in loop_sites(stmt):
        tile = tiles[loop.loop_var.__chandle__()]
        is_grid = tile is not None and tile.role == GRID
        if is_grid and seen_other:
            outer.append(f"grid loop {loop.loop_var.name} is inside a loop that is not a program id")
        seen_other = seen_other or not is_grid
    return outer


def _tile_problems(analyzer: sym.Analyzer, loop: tirx.For, tile: LoopTile, enclosing) -> list[str]:
    name = f"tile loop {loop.loop_var.name} (axis {tile.axis})"
    if tile.outer is None:
        if not analyzer.can_prove(loop.extent <= tile.size, PROOF):
            return [f"{name}: a whole tile of {tile.size} does not cover the loop's {loop.extent} iterations"]
        if not analyzer.can_prove(loop.extent == tile.extent, PROOF):
            return [f"{name}: extent {tile.extent} is not the loop's extent {loop.extent}"]
        return []
    outer = next((l for l in reversed(enclosing) if l.loop_var.name == tile.outer), None)
    if outer is None:
        return [f"{name}: its outer loop {tile.outer} does not enclose it"]
    problems = []
    if not analyzer.can_prove(loop.extent == tile.size, PROOF):
        problems.append(f"{name}: it runs {loop.extent} iterations, not its block size {tile.size}")
    windowed = loop_tile(outer) is not None and loop_tile(outer).window is not None  # _window_problems checks it
    if not windowed and not analyzer.can_prove(
        outer.extent == tirx.floordiv(tile.extent + tile.size - 1, tile.size), PROOF
    ):
        problems.append(
            f"{name}: outer loop {outer.loop_var.name} runs {outer.extent} iterations, not "
            f"ceil({tile.extent} / {tile.size})"
        )
    position = outer.loop_var * tile.size + loop.loop_var
    for realize in realizes_under(loop.body):
        problems += _tail_problems(analyzer, name, realize, loop, position, tile, outer)
    return problems


def _tail_problems(analyzer, name, realize, loop, position, tile: LoopTile, outer) -> list[str]:
    """The block's predicate never lets the split axis run past the tile's extent: its conjuncts
    `outer * size + inner < E`, together, imply `< extent` (the kernel masks at the extent and with
    every conjunct, so a stricter one, a user's `j < 2`, is masked too; with a symbolic extent a
    user's `i < 5` does not imply `i < n` alone, and Tiling keeps both)."""
    tails = [
        c for c in conjuncts(realize.predicate) if isinstance(c, tirx.LT) and analyzer.can_prove_equal(c.a, position)
    ]
    inside = position < tile.extent
    if not tails:
        if analyzer.can_prove(outer.extent * tile.size <= tile.extent, PROOF):
            return []
        return [
            f"{name}: block {realize.block.name_hint} has no tail predicate, but the extent {tile.extent} "
            "leaves part of the last tile out"
        ]
    together = tails[0]
    for tail in tails[1:]:
        together = tirx.And(together, tail)
    with analyzer.constraint_scope(together):
        within = analyzer.can_prove(inside, PROOF)
    if not within:
        return [
            f"{name}: block {realize.block.name_hint}'s predicate `{together}` lets iterations past "
            f"`{position} < {tile.extent}` run (the extent the kernel masks at)"
        ]
    return []


def _window_problems(analyzer, body, loop: tirx.For, window: TileWindow, enclosing, loops, tiles, params) -> list[str]:
    name = f"serial loop {loop.loop_var.name} (tile window)"
    inner = next((l for l, around in loops if any(a.same_as(loop) for a in around) and _steps(tiles, l, loop)), None)
    if inner is None:
        return [f"{name}: it steps no tile axis"]
    inner_tile = tiles[inner.loop_var.__chandle__()]
    rows = window_loops(enclosing, tiles, window)
    if rows is None:
        return [f"{name}: rows {window.rows} are not a tile axis split over program ids around it"]
    start, extent = tir_window_range(window, rows[0], rows[1], inner_tile.size, inner_tile.extent)
    if not (analyzer.can_prove_equal(loop.min, start) and analyzer.can_prove_equal(loop.extent, extent)):
        return [f"{name}: it runs from {loop.min} for {loop.extent} iterations, not the window's {start} for {extent}"]
    proven, why = provable_window(
        WalkedAxis(loop, inner, inner_tile.size), enclosing, tiles, read_outside(body, loop), params
    )
    if proven is None:
        return [f"{name}: the skipped tiles may fold more than identities: {why}"]
    if proven.rows != window.rows or not (_covers(window.low, proven.low, -1) and _covers(window.high, proven.high, 1)):
        return [f"{name}: the window {window} is narrower than the masks prove ({proven})"]
    return []


def _steps(tiles, inner: tirx.For, outer: tirx.For) -> bool:
    """`outer` is the split's outer loop of tile loop `inner`."""
    tile = tiles[inner.loop_var.__chandle__()]
    return tile is not None and tile.role == TILE and tile.outer == outer.loop_var.name


def _covers(decided: int | None, proven: int | None, side: int) -> bool:
    """The decided bound lets through everything the proven one does (None: unbounded)."""
    if decided is None:
        return True
    return proven is not None and decided * side >= proven * side


def _in_registers(dependence, scans: dict[str, str]) -> bool:
    """A scan block's dependence on its own output: the lowering carries it in registers."""
    return dependence.blocks[0] == dependence.blocks[1] and scans.get(dependence.blocks[0]) == dependence.buffer


def _dependence_problems(stmt, loop, tile: LoopTile | None, enclosing, tiles) -> list[str]:
    role = tile.role if tile is not None else SERIAL
    scans = {r.block.name_hint: mark.buffer for r in realizes_under(loop.body) if (mark := scan_mark(r.block))}
    if role == GRID:
        reduced = _reductions_walked(loop)
        if reduced:  # programs would each fold a part into the same output, with nothing to combine them
            return [
                f"grid loop {loop.loop_var.name} walks the reduction axis of block {reduced[0]}: a program id "
                "cannot carry a reduction (the programs would race on its output)"
            ]
    if role in (GRID, TILE):
        found = [d for d in carried_dependences(stmt, loop) if role == GRID or not _in_registers(d, scans)]
        return [f"{role} loop {loop.loop_var.name}: {d}" for d in found[:1]]
    fixed = [l for l in enclosing if (t := tiles[l.loop_var.__chandle__()]) is None or t.role != TILE]
    carried = {d.buffer for d in carried_dependences(stmt, loop, fixed) if not _in_registers(d, scans)}
    missing = sorted(carried - set(tile.carries if tile is not None else ()))
    if missing:
        return [
            f"serial loop {loop.loop_var.name} carries a dependence through {', '.join(missing)} "
            "that its decision does not name (the program would not sync)"
        ]
    return []


def _reductions_walked(loop: tirx.For) -> list[str]:
    """Blocks under `loop` whose reduction variables it binds."""
    return [
        realize.block.name_hint
        for realize in realizes_under(loop.body)
        if any(
            iv.iter_type == tirx.IterVar.CommReduce and uses_var(value, loop.loop_var)
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
        )
    ]


def _axis_problems(loops, tiles) -> list[str]:
    by_axis: dict[str, list[tuple[tirx.For, LoopTile, list]]] = {}
    blocks: dict[str, str] = {}
    problems = []
    for loop, enclosing in loops:
        tile = tiles[loop.loop_var.__chandle__()]
        if tile is None or tile.role != TILE:
            continue
        by_axis.setdefault(tile.axis, []).append((loop, tile, enclosing))
        if blocks.setdefault(tile.block, tile.axis) != tile.axis:
            problems.append(f"axes {blocks[tile.block]} and {tile.axis} share the block constexpr {tile.block}")
    for axis, members in by_axis.items():
        if len(members) < 2:
            continue
        first = members[0][1]
        for loop, tile, enclosing in members:
            same = (
                tile.whole
                and (tile.block, tile.size) == (first.block, first.size)
                and tvm_ffi.structural_equal(tile.extent, first.extent)
            )
            if not same:
                problems.append(
                    f"loop {loop.loop_var.name} names axis {axis} with another block, size or extent, "
                    "or is not a whole tile"
                )
            if any(other.same_as(l) for other, _, _ in members for l in enclosing):
                problems.append(f"loop {loop.loop_var.name} names axis {axis}, like a loop around it")
    return problems


def _dot_problems(stmt, loops, tiles, limits: BackendLimits) -> list[str]:
    axes: dict[str, list[tirx.For]] = {}
    for loop, _ in loops:
        tile = tiles[loop.loop_var.__chandle__()]
        if tile is not None and tile.role == TILE:
            axes.setdefault(tile.axis, []).append(loop)
    problems = []
    for realize in realizes_under(stmt):
        mark = dot_mark(realize.block)
        if mark is None:
            continue
        name = f"tl.dot mark of block {realize.block.name_hint}"
        if not_dot_mark(realize.block) is not None:
            problems.append(f"{name}: the block is also marked as not a tl.dot")
        operands = contraction_operands(realize.block)
        if operands is None:
            problems.append(f"{name}: the block is not a contraction X[..] += a * b")
            continue
        a_vars = operands[0].var_names
        b_vars = operands[1].var_names
        wanted = {
            "m": (SPATIAL, lambda it: it in a_vars and it not in b_vars),  # noqa: B023 - used in this iteration
            "n": (SPATIAL, lambda it: it in b_vars and it not in a_vars),  # noqa: B023 - used in this iteration
            "k": (REDUCE, lambda it: it in a_vars and it in b_vars),  # noqa: B023 - used in this iteration
        }
        for role, axis in (("m", mark.m), ("n", mark.n), ("k", mark.k)):
            kind, test = wanted[role]
            drivers = [l for l in axes.get(axis, []) if bound_iter_var(realize, l.loop_var) is not None]
            tile = tiles[drivers[0].loop_var.__chandle__()] if drivers else None
            if (
                not drivers
                or loop_kind(drivers[0], realize) != kind
                or not test(bound_iter_var(realize, drivers[0].loop_var).var.name)
            ):
                problems.append(f"{name}: axis {axis} is not the block's {role.upper()} loop")
            elif tile.size < limits.dot_min_block:
                problems.append(f"{name}: axis {axis} has size {tile.size}, under tl.dot's {limits.dot_min_block}")
    return problems


def _storage_problems(stmt, kernel, loops, tiles) -> list[str]:
    whole = {
        loop.loop_var.__chandle__(): tile.axis
        for loop, _ in loops
        if (tile := tiles[loop.loop_var.__chandle__()]) is not None and tile.whole
    }
    expected = decide_storage(stmt, whole)
    problems = [
        f"{name} is held in registers, but {note.split(': ', 1)[1]}"
        for name, note in zip(expected.spilled, expected.notes)
        if name in kernel.registers
    ]
    for name in expected.registers + expected.spilled:
        if name not in kernel.registers and name not in kernel.spilled:
            problems.append(
                f"{name} is written and read again in the kernel, but the decision neither holds it in "
                "registers nor spills it"
            )
    return problems
