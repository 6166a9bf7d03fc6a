"""The kernel plan: a small typed summary of what the compiler decided for a program, free of the
names the user chose (loops, buffers, blocks), so two programs that compute the same thing
written differently can be compared by it (tests/plan_invariance: the plan must not change under
a meaning-preserving rewrite).

Derived once from the two records that hold the decisions: the lowered TileProgram (kernels, grid
axes, tile axes, dots with their operand dtypes, loops) and the tiling contract in the tiled TIR
(tile_contract.py: which serial loops visit a TileWindow of their tiles; a walk's prefetch, as lowered),
with each tile axis placed by the output indices it drives.
Nothing here decides.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields, is_dataclass

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import block_accesses, realizes_under, vars_of
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.contracts.online_contract import online_shift
from tir_passes.contracts.tile_contract import SERIAL, TILE, loop_tile

from .tile_ir import Dot, Loop, TileProgram


@dataclass(frozen=True, order=True)
class DotPlan:
    """A tl.dot: its operands' dtypes, its accumulator's, and the precision of fp32 operands."""

    a: str
    b: str
    acc: str
    precision: str


@dataclass(frozen=True)
class TileAxisPlan:
    """A tile axis: its default block size, the extent it covers, whether a loop steps it (split)
    or one program holds it whole, and where the kernel stores along it: (parameter position,
    index position) of every output index it drives (256 rows of dB by 128 columns is not 128 rows
    by 256 columns, whatever the loops are called or the order they are written in)."""

    size: int
    extent: int | None
    split: bool
    stored: tuple[tuple[int, int], ...] = ()

    def key(self) -> tuple:
        return (self.size, self.extent is None, self.extent or 0, self.split, self.stored)


@dataclass(frozen=True, order=True)
class WindowPlan:
    """A serial loop that visits only the tiles of a band j - rows in [low, high] (None: open)."""

    low: int | None
    high: int | None


@dataclass(frozen=True)
class KernelPlan:
    grid: int                          # factors of the launch grid
    tile_axes: tuple[TileAxisPlan, ...]  # sorted: the order the axes are declared in is a name order
    dots: tuple[DotPlan, ...]          # in program order
    loops: tuple[int, ...]             # the nesting depth of every loop, in program order
    windows: tuple[WindowPlan, ...]    # sorted by band
    restarts: tuple[bool, ...] = ()    # per online shift, in program order: do its sums restart at -inf
    prefetches: tuple[tuple[int, int], ...] = ()   # per prefetching walk, in program order: (distance, loads)

    def describe(self) -> str:
        axes = ", ".join(f"{a.size}{'/split' if a.split else ''} of {a.extent}"
                         + "".join(f" at output {p}[{i}]" for p, i in a.stored) for a in self.tile_axes) or "-"
        dots = ", ".join(f"dot({d.a}, {d.b}) -> {d.acc}" + (f" {d.precision}" if d.a == "float32" else "")
                         for d in self.dots) or "no dot"
        windows = ", ".join(f"window[{w.low}, {w.high}]" for w in self.windows) or "no window"
        restarts = "".join(f", online sums {'restart' if r else 'without restart'}" for r in self.restarts)
        restarts += "".join(f", {loads} loads {distance} ahead" for distance, loads in self.prefetches)
        return f"grid {self.grid}, tiles [{axes}], {dots}, loops {list(self.loops)}, {windows}{restarts}"


@dataclass(frozen=True)
class ProgramPlan:
    kernels: tuple[KernelPlan, ...]

    def describe(self) -> str:
        return "\n".join(f"kernel {index}: {kernel.describe()}" for index, kernel in enumerate(self.kernels))


def program_plan(program: TileProgram, tiled: tirx.PrimFunc) -> ProgramPlan:
    """The plan of `program`, lowered from `tiled` (the pipeline's last module's function)."""
    statements = top_level_statements(tiled)
    if len(statements) != len(program.kernels):
        raise ValueError(f"{len(program.kernels)} kernels lowered from {len(statements)} top-level statements")
    params = [p for p in tiled.params if tirx.is_buffer_var(p)]
    return ProgramPlan(tuple(_kernel_plan(kernel, stmt, params) for kernel, stmt in zip(program.kernels, statements)))


def plan_of(kernel) -> ProgramPlan:
    """The plan of a compiled TritonKernel (triton_codegen.compile's result)."""
    return program_plan(kernel.program, kernel.tir["main"])


def _kernel_plan(kernel, stmt, params) -> KernelPlan:
    tile_axes, windows = _contract_loops(stmt, _stored_along(stmt, params))
    return KernelPlan(len(kernel.grid), tuple(sorted(tile_axes, key=TileAxisPlan.key)), tuple(_dots(kernel.body)),
                      tuple(_loop_depths(kernel.body, 0)), tuple(windows), _restarts(stmt),
                      tuple(_prefetches(kernel.body)))


def _restarts(stmt) -> tuple[bool, ...]:
    """OnlineSoftmax's decision per shift block (online_contract.OnlineShift.first_finite)."""
    found: list[bool] = []

    def visit(block: s_tir.SBlock) -> None:
        mark = online_shift(block)
        if mark is not None:
            found.append(not mark.first_finite)

    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, visit))
    return tuple(found)


Positions = tuple[tuple[int, int], ...]   # (parameter position, index position) pairs


def _stored_along(stmt, params) -> dict[int, Positions]:
    """Loop variable (its handle: generated loops repeat names) -> (parameter position, index position)
    of every store to a parameter whose index the loop drives, through the storing block's bindings."""
    positions = {param.__chandle__(): position for position, param in enumerate(params)}
    found: dict[int, set[tuple[int, int]]] = {}
    for realize in realizes_under(stmt):
        bindings = {iv.var.__chandle__(): value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
        for access in block_accesses(realize.block):
            param = positions.get(access.buffer.__chandle__())
            if not access.is_store or param is None:
                continue
            for index_position, index in enumerate(access.indices):
                for var in vars_of(index):
                    for loop_var in vars_of(bindings.get(var.__chandle__(), var)):
                        found.setdefault(loop_var.__chandle__(), set()).add((param, index_position))
    return {handle: tuple(sorted(pairs)) for handle, pairs in found.items()}


def _contract_loops(stmt, stored: dict[int, Positions]) -> tuple[list[TileAxisPlan], list[WindowPlan]]:
    axes: dict[str, TileAxisPlan] = {}
    along: dict[str, set[tuple[int, int]]] = {}   # a tile axis: the stores of every loop that steps it
    windows: list[WindowPlan] = []

    def visit(loop: tirx.For) -> None:
        tile = loop_tile(loop)
        if tile is None:
            return
        if tile.role == TILE:
            along.setdefault(tile.axis, set()).update(stored.get(loop.loop_var.__chandle__(), ()))
        if tile.role == TILE and tile.axis not in axes:
            extent = tile.extent.value if isinstance(tile.extent, tirx.IntImm) else None
            axes[tile.axis] = TileAxisPlan(tile.size, extent, tile.outer is not None)
        if tile.role == SERIAL and tile.window is not None:
            windows.append(WindowPlan(tile.window.low, tile.window.high))

    tvm_ffi.structural_walk(stmt, (tirx.For, visit))
    placed = [dataclasses.replace(axis, stored=tuple(sorted(along[name]))) for name, axis in axes.items()]
    return placed, sorted(windows, key=lambda w: (w.low is None, w.low or 0, w.high is None, w.high or 0))


def _dots(node) -> list[DotPlan]:
    found: list[DotPlan] = []

    def visit(value) -> None:
        if isinstance(value, Dot):
            found.append(DotPlan(value.a.dtype, value.b.dtype, value.dtype, value.precision))
        if isinstance(value, (tuple, list)):
            for item in value:
                visit(item)
        elif is_dataclass(value):
            for item in fields(value):
                visit(getattr(value, item.name))

    visit(node)
    return found


def _prefetches(body) -> list[tuple[int, int]]:
    """(distance, loads issued ahead) of every walk Tiling's prefetch applies to (prefetch_loads.py)."""
    found: list[tuple[int, int]] = []
    for stmt in body:
        if isinstance(stmt, Loop):
            if stmt.prefetched:
                found.append((stmt.prefetch_distance, len(stmt.prefetched)))
            found += _prefetches(stmt.body)
    return found


def _loop_depths(body, depth: int) -> list[int]:
    depths: list[int] = []
    for stmt in body:
        if isinstance(stmt, Loop):
            depths.append(depth)
            depths += _loop_depths(stmt.body, depth + 1)
    return depths
