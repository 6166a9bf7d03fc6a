"""What the loops of one kernel mean on tiles: grid axes, serial loops and tile axes.

Built once per kernel from the Tiling pass's annotations, before any block is lowered:
  grid loop        -> a factor of the launch grid; its index comes from `tl.program_id(0)`
  serial loop      -> a `for` loop inside the program
  tile loop        -> a tile axis `start + tl.arange(0, BLOCK)`; when it is the inner loop of a
                      split, its outer loop (grid or serial) steps by BLOCK and stands for 0
  unannotated loop -> a serial loop (correct for any TIR, one element at a time)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import sym, tirx

from tir_passes.errors import UnsupportedConstructError

from .exprs import fold_binary
from .tile_ir import Arange, Binary, Const, Expr, GridAxis, Scalar, TileDim


def role_of(loop: tirx.For) -> str | None:
    value = loop.annotations.get("tile.role") if loop.annotations else None
    return str(value) if value is not None else None


def python_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"v_{cleaned}"


@dataclass
class LoopPlan:
    """How one TIR loop is realised in the kernel."""

    loop: tirx.For
    kind: str                 # grid, serial, tile
    name: str                 # Python name of its index (grid/serial) or of its tile axis
    substitute: Expr          # what the TIR loop variable becomes
    partner_of: str | None = None   # for a split's outer loop: the tile axis it steps
    count: Expr | None = None       # grid/serial trip count


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


def _key(var: tirx.Var) -> int:
    # NOTE: Vars overload ==, so they cannot be dict keys; their node address identifies them
    return var.__chandle__()


def _loops_inside(stmt, outer: list[tirx.For]) -> list[tuple[tirx.For, list[tirx.For]]]:
    """(loop, enclosing loops) for every loop under `stmt`, outermost first."""
    found: list = []

    def walk(node, stack):
        if isinstance(node, tirx.For):
            found.append((node, list(stack)))
            walk(node.body, stack + [node])
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child, stack)
        elif hasattr(node, "block"):  # SBlockRealize: loops inside blocks are not kernel loops
            walk(node.block.body, stack)
        elif isinstance(node, tirx.IfThenElse):
            walk(node.then_case, stack)
            if node.else_case is not None:
                walk(node.else_case, stack)

    walk(stmt, list(outer))
    return found


def build_scope(stmt: tirx.Stmt, lower_scalar, where: str) -> tuple[KernelScope, tirx.Stmt]:
    """Peel the grid loops off `stmt` and plan every loop inside; returns (scope, kernel body)."""
    grid_loops = []
    while isinstance(stmt, tirx.For) and role_of(stmt) == "grid":
        grid_loops.append(stmt)
        stmt = stmt.body
    scope = KernelScope(grid_loops)
    all_loops = [(loop, grid_loops[:i]) for i, loop in enumerate(grid_loops)] + _loops_inside(stmt, grid_loops)
    for loop, _ in all_loops:
        scope.analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
    partners = _partners(all_loops, where)
    names = _unique_names([loop for loop, _ in all_loops])
    for loop, enclosing in all_loops:
        _plan_loop(scope, loop, partners, lower_scalar, where, names, enclosing)
    return scope, stmt


def _unique_names(loops: list[tirx.For]) -> dict[int, str]:
    """A Python name per loop; sub-nests of a fused kernel often reuse loop names (ax0, ax1)."""
    names, taken = {}, set()
    for loop in loops:
        base = python_name(loop.loop_var.name)
        name, suffix = base, 1
        while name in taken:
            suffix += 1
            name = f"{base}_{suffix}"
        taken.add(name)
        names[_key(loop.loop_var)] = name
    return names


def _partners(all_loops, where) -> dict[int, tirx.For]:
    """For each split's outer loop (by key), its inner tile loop."""
    partners: dict[int, tirx.For] = {}
    for loop, stack in all_loops:
        if role_of(loop) != "tile" or "tile.outer" not in loop.annotations:
            continue
        outer_name = str(loop.annotations["tile.outer"])
        outer = next((l for l in reversed(stack) if l.loop_var.name == outer_name), None)
        if outer is None:
            raise UnsupportedConstructError(f"{where}: tile loop {loop.loop_var.name} names outer loop "
                                            f"{outer_name}, which does not enclose it")
        partners[_key(outer.loop_var)] = loop
    return partners


def _static_int(expr) -> int | None:
    if isinstance(expr, int):  # annotation values arrive as Python ints
        return expr
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _plan_loop(scope: KernelScope, loop: tirx.For, partners, lower_scalar, where, names, enclosing) -> None:
    role = role_of(loop)
    name = names[_key(loop.loop_var)]
    key = _key(loop.loop_var)
    if role == "tile":
        scope.plans[key] = _plan_tile(scope, loop, name, lower_scalar, where, enclosing)
        return
    inner = partners.get(key)
    kind = "grid" if role == "grid" else "serial"
    if inner is not None:
        block = str(inner.annotations["tile.block"])
        extent = lower_scalar(inner.annotations["tile.extent"])
        count = Binary("cdiv", extent, Scalar(block, "int32"), "int32", ())
        plan = LoopPlan(loop, kind, name, Const(0, "int32"), partner_of=names[_key(inner.loop_var)], count=count)
    else:
        start = lower_scalar(loop.min)
        index = Scalar(name, "int32")
        substitute = fold_binary("+", start, index, "int32", ())
        plan = LoopPlan(loop, kind, name, substitute, count=lower_scalar(loop.extent))
        if kind == "serial":  # a plain serial loop iterates min..min+extent itself
            plan.substitute = index
    scope.plans[key] = plan
    if kind == "grid":
        scope.grid.append(GridAxis(name, plan.count))


def _same_whole_tile(scope: KernelScope, block: str, loop: tirx.For, lower_scalar, enclosing) -> TileDim | None:
    """A whole-extent axis of an earlier sub-nest over the same columns (never of an enclosing
    loop: two loops of one block are two axes)."""
    extent = lower_scalar(loop.extent)
    taken = {scope.plans[_key(outer.loop_var)].name for outer in enclosing if _key(outer.loop_var) in scope.plans}
    for dim in scope.dims:
        if (dim.block == block and dim.min_block == dim.default and dim.extent == extent
                and _static_int(loop.min) == 0 and dim.name not in taken):
            return dim
    return None


def _plan_tile(scope: KernelScope, loop: tirx.For, name: str, lower_scalar, where, enclosing) -> LoopPlan:
    block = str(loop.annotations.get("tile.block", f"BLOCK_{name.upper()}"))
    whole = "tile.size" in loop.annotations  # a whole-extent tile: no split, block >= extent
    default = _static_int(loop.annotations["tile.size"]) if whole else _static_int(loop.extent)
    if default is None or default & (default - 1):
        raise UnsupportedConstructError(f"{where}: tile loop {loop.loop_var.name} must have a power-of-two "
                                        f"extent (the block size), not {loop.extent}")
    extent_tir = loop.annotations.get("tile.extent")
    outer_name = loop.annotations.get("tile.outer")
    if whole:
        shared = _same_whole_tile(scope, block, loop, lower_scalar, enclosing)
        if shared is not None:  # another sub-nest's tile over the same columns: one axis, so
            return LoopPlan(loop, "tile", shared.name, shared.index)  # equal loads become one load
    arange = Arange(name, block)
    if outer_name is not None:
        outer_plan = next(p for p in scope.plans.values() if p.partner_of == name)
        start = Binary("*", Scalar(outer_plan.name, "int32"), Scalar(block, "int32"), "int32", ())
        substitute = fold_binary("+", start, arange, "int32", (name,))
        extent = lower_scalar(extent_tir)
    else:
        start = lower_scalar(loop.min)
        substitute = fold_binary("+", start, arange, "int32", (name,))
        extent = lower_scalar(loop.extent)
        extent_tir = loop.extent
    static_extent = _static_int(extent_tir) if extent_tir is not None else None
    even = static_extent is not None and static_extent % default == 0
    tail = None if even else Binary("<", substitute, extent, "bool", (name,))
    hoisted = outer_name is None or outer_plan.kind == "grid"
    scope.dims.append(TileDim(name, block, default, extent, even, substitute, tail, hoisted,
                              min_block=default if whole else 1))
    return LoopPlan(loop, "tile", name, substitute)
