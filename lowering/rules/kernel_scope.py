"""What the loops of one kernel mean on tiles: grid axes, serial loops and tile axes.

Built once per kernel from the tiling contract (tir_passes/contracts/tile_contract.py), before any block is
lowered. Nothing here is decided again: every loop's role, every tile axis's name, block size,
extent and split partner is read as Tiling wrote it.
  grid loop        -> a factor of the launch grid; its index comes from `tl.program_id(0)`
  serial loop      -> a `for` loop inside the program
  tile loop        -> the tile axis it names, `start + tl.arange(0, BLOCK)`; when split, its outer
                      loop (grid or serial) steps by BLOCK and the TIR loop variable stands for 0;
                      whole tiles of sibling sub-nests that name the same axis are that one axis
  unannotated loop -> a serial loop (correct for any TIR, one element at a time)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import tvm
from tvm import sym, tirx

from tir_passes.analyses.nest import loop_sites, unique_name
from tir_passes.infra.names import python_name
from tir_passes.contracts.tile_contract import GRID, TILE, ContractError, LoopTile, TileWindow, kernel_tile, loop_tile
from tir_passes.analyses.tile_window import Arithmetic, window_range
from tir_passes.contracts.prefetch_record import LoopPrefetch

from lowering.rules.exprs import fold_binary
from lowering.tile_ir import Arange, Binary, Cast, Const, Expr, GridAxis, Scalar, TileDim


@dataclass
class LoopPlan:
    """How one TIR loop is realised in the kernel."""

    loop: tirx.For
    kind: str                 # grid, serial, tile
    name: str                 # Python name of its index (grid/serial) or of its tile axis
    substitute: Expr          # what the TIR loop variable becomes
    partner_of: str | None = None   # for a split's outer loop: the tile axis it steps
    count: Expr | None = None       # grid/serial trip count (a windowed walk: the tile it stops before)
    first: Expr | None = None       # a windowed walk's first tile (tile_window.py), else 0
    carries: tuple[str, ...] = ()   # serial: buffers whose dependence it carries (sync after each iteration)
    prefetch: LoopPrefetch | None = None   # serial row walk: Tiling's prefetch of its row loads


@dataclass
class KernelScope:
    grid_loops: list[tirx.For]
    plans: dict[int, LoopPlan] = field(default_factory=dict)   # key: the loop Var's node address
    dims: list[TileDim] = field(default_factory=list)
    grid: list[GridAxis] = field(default_factory=list)
    analyzer: sym.Analyzer = field(default_factory=sym.Analyzer)

    def plan(self, loop: tirx.For) -> LoopPlan:
        return self.plans[_key(loop.loop_var)]

    def substitute(self, var: tirx.Var) -> Expr | None:
        plan = self.plans.get(_key(var))
        return plan.substitute if plan else None

    def dim_order(self) -> list[str]:
        return [d.name for d in self.dims]

    def dim(self, name: str) -> TileDim | None:
        return next((d for d in self.dims if d.name == name), None)


def _key(var: tirx.Var) -> int:
    # NOTE: Vars overload ==, so they cannot be dict keys; their node address identifies them
    return var.__chandle__()


def _role(loop: tirx.For) -> str | None:
    tile = loop_tile(loop)
    return tile.role if tile is not None else None


def build_scope(stmt: tirx.Stmt, lower_scalar, where: str) -> tuple[KernelScope, tirx.Stmt]:
    """Peel the grid loops off `stmt` and plan every loop inside; returns (scope, kernel body)."""
    grid_loops = []
    while isinstance(stmt, tirx.For) and _role(stmt) == GRID:
        grid_loops.append(stmt)
        stmt = stmt.body
    scope = KernelScope(grid_loops)
    all_loops = [(loop, grid_loops[:i]) for i, loop in enumerate(grid_loops)] + loop_sites(stmt, tuple(grid_loops))
    for loop, _ in all_loops:
        scope.analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    tiles = {_key(loop.loop_var): loop_tile(loop) for loop, _ in all_loops}
    partners = _partners(all_loops, tiles)
    names = _loop_names([loop for loop, _ in all_loops], tiles)
    for loop, _ in all_loops:
        _plan_loop(scope, loop, tiles, partners, lower_scalar, where, names)
    record = kernel_tile(grid_loops[0]) if grid_loops else None   # the kernel's decision sits on its outer loop
    longest = record.longest_first if record is not None else None
    scope.grid = [dataclasses.replace(axis, longest_first=loop.loop_var.name == longest)
                  for axis, loop in zip(scope.grid, grid_loops)]
    return scope, stmt


def _loop_names(loops: list[tirx.For], tiles: dict[int, LoopTile | None]) -> dict[int, str]:
    """A Python name per grid/serial loop, clear of the tile axes' names (sub-nests of a fused
    kernel often reuse loop names such as ax0)."""
    taken = {tile.axis for tile in tiles.values() if tile is not None and tile.role == TILE}
    names = {}
    for loop in loops:
        names[_key(loop.loop_var)] = unique_name(python_name(loop.loop_var.name), taken)
    return names


def _partners(all_loops, tiles) -> dict[int, tirx.For]:
    """For each split's outer loop (by key), its inner tile loop."""
    partners: dict[int, tirx.For] = {}
    for loop, stack in all_loops:
        tile = tiles[_key(loop.loop_var)]
        if tile is None or tile.role != TILE or tile.outer is None:
            continue
        outer = next((l for l in reversed(stack) if l.loop_var.name == tile.outer), None)
        if outer is None:
            raise ContractError(f"loop {loop.loop_var.name}", f"its outer loop {tile.outer} does not enclose it")
        if tiles[_key(outer.loop_var)] is not None and tiles[_key(outer.loop_var)].role == TILE:
            raise ContractError(f"loop {outer.loop_var.name}", f"the outer loop of tile {tile.axis} is itself a tile")
        partners[_key(outer.loop_var)] = loop
    return partners


def _plan_loop(scope: KernelScope, loop: tirx.For, tiles, partners, lower_scalar, where, names) -> None:
    key = _key(loop.loop_var)
    tile = tiles[key]
    if tile is not None and tile.role == TILE:
        scope.plans[key] = _plan_tile(scope, loop, tile, lower_scalar, where)
        return
    name = names[key]
    inner = partners.get(key)
    kind = GRID if tile is not None and tile.role == GRID else "serial"
    carries = tile.carries if tile is not None else ()
    if inner is not None:
        inner_tile = tiles[_key(inner.loop_var)]
        count = Binary("cdiv", lower_scalar(inner_tile.extent), Scalar(inner_tile.block, "int32"), "int32", ())
        first = None
        if tile is not None and tile.window is not None:
            first, count = _window_bounds(scope, loop, tile.window, inner_tile, count, name)
        plan = LoopPlan(loop, kind, name, Const(0, "int32"), partner_of=inner_tile.axis, count=count, carries=carries,
                        first=first)
    else:
        start = lower_scalar(loop.min)
        index = Scalar(name, "int32")
        substitute = index if kind == "serial" else fold_binary("+", start, index, "int32", ())
        plan = LoopPlan(loop, kind, name, substitute, count=lower_scalar(loop.extent), carries=carries,
                        prefetch=tile.prefetch if tile is not None else None)
    scope.plans[key] = plan
    if kind == GRID:
        scope.grid.append(GridAxis(name, plan.count))


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.value < 0:   # `x - 40`, not `x + -40`
        return fold_binary("-", a, Const(-b.value, "int32"), "int32", ())
    return fold_binary("+", a, b, "int32", ())


TILE_ARITHMETIC = Arithmetic(
    const=lambda v: Const(v, "int32"), add=_add,
    mul=lambda a, b: fold_binary("*", a, b, "int32", ()), floordiv=lambda a, b: fold_binary("//", a, b, "int32", ()),
    cdiv=lambda a, b: Binary("cdiv", a, b, "int32", ()), min=lambda a, b: Binary("min", a, b, "int32", ()),
    max=lambda a, b: Binary("max", a, b, "int32", ()))


def window_names(loop_name: str) -> tuple[str, str]:
    """The names a windowed walk's first and stop tile get in the kernel."""
    return f"{loop_name}_first", f"{loop_name}_stop"


def _window_bounds(scope: KernelScope, loop: tirx.For, window: TileWindow, inner_tile: LoopTile, tiles: Expr,
                   loop_name: str):
    """(first, stop) tile of a windowed walk, in the kernel's BLOCK constexprs (tile_window.py);
    the stop reads the first by its name (window_names)."""
    rows = scope.dim(window.rows)
    rows_outer = next((p for p in scope.plans.values() if p.partner_of == window.rows and p.kind == GRID), None)
    if rows is None or rows_outer is None:
        raise ContractError(f"loop {loop.loop_var.name}", f"its tile window names rows {window.rows}, which is not a "
                            "tile axis split over program ids around it")
    first_name = window_names(loop_name)[0]
    return window_range(window, Scalar(rows_outer.name, "int32"), Scalar(rows.block, "int32"),
                        Scalar(inner_tile.block, "int32"), tiles, TILE_ARITHMETIC,
                        name_start=lambda start: Scalar(first_name, "int32"))


def _shared_axis(scope: KernelScope, loop: tirx.For, tile: LoopTile, lower_scalar) -> TileDim:
    """An axis an earlier sibling loop already opened: the contract says they are one axis, which
    holds only for whole tiles over the same extent and block."""
    dim = scope.dim(tile.axis)
    whole = tile.whole and dim.min_block == dim.default
    if not (whole and dim.block == tile.block and dim.default == tile.size and dim.extent == lower_scalar(tile.extent)):
        raise ContractError(f"loop {loop.loop_var.name}", f"it names axis {tile.axis}, which another loop opened with "
                            "another block, size or extent (only whole tiles of one extent can be one axis)")
    return dim


def _plan_tile(scope: KernelScope, loop: tirx.For, tile: LoopTile, lower_scalar, where) -> LoopPlan:
    if scope.dim(tile.axis) is not None:
        dim = _shared_axis(scope, loop, tile, lower_scalar)
        return LoopPlan(loop, TILE, dim.name, dim.index)
    name, block = tile.axis, tile.block
    arange = Arange(name, block)
    extent = lower_scalar(tile.extent)
    dtype = str(loop.loop_var.ty.dtype)  # int64 when the axis is longer than int32 can count
    if tile.outer is not None:
        outer_plan = next(p for p in scope.plans.values() if p.partner_of == name)
        outer = Scalar(outer_plan.name, "int32")
        start = Binary("*", outer if dtype == "int32" else Cast(outer, dtype, ()), Scalar(block, "int32"), dtype, ())
        hoisted = outer_plan.kind == GRID
    else:
        start = lower_scalar(loop.min)
        hoisted = True
        if tile.size < (_static(loop.extent) or 0):
            raise ContractError(f"loop {loop.loop_var.name}", f"a whole tile of size {tile.size} cannot cover its "
                                f"{loop.extent} iterations")
    substitute = fold_binary("+", start, arange, start.dtype if start.dtype == "int64" else "int32", (name,))
    static_extent = _static(tile.extent)
    even = static_extent is not None and static_extent % tile.size == 0
    tail = None if even else Binary("<", substitute, extent, "bool", (name,))
    scope.dims.append(TileDim(name, block, tile.size, extent, even, substitute, tail, hoisted,
                              min_block=tile.size if tile.whole else 1))
    return LoopPlan(loop, TILE, name, substitute)


def _static(expr) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None
