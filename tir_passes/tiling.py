"""Tiling: decide, in the IR, how each kernel's loops map onto Triton programs and tiles.

Every statement under the root block becomes one kernel. For a perfect loop nest around one
block, each loop gets a role, written as loop annotations so the dump shows the decision and the
llvm build still runs the loops serially:

  {"tile.role": "grid"}     the loop's iterations are spread over program ids
  {"tile.role": "serial"}   a loop inside each program (reduction loops that do not fit a tile)
  {"tile.role": "tile", "tile.block": "BLOCK_M", "tile.extent": E, "tile.outer": "i_0"}
                            a tile axis: `tl.arange(0, BLOCK_M)`; E is the extent before the
                            split and "tile.outer" names the split's outer loop, so the lowering
                            can index and mask any block size, not only the default

Tiled loops are split (outer grid/serial loop x inner tile loop of the default block size,
with TIR's predicate for the tail) and reordered to grid, serial, tile. The innermost two
spatial loops become tile axes; the innermost reduction loop becomes a tile axis (plus a serial
loop over tiles when it is longer than one tile); other loops stay grid or serial. A spatial nest
whose accesses are contiguous along different loops (a transpose) gets square 64x64 tiles over
those two loops instead, so that both the loads and the stores coalesce.

Block sizes are powers of two from a small model: element size, reduction length, a register
budget per program and, for contractions (tl.dot), shared memory for the pipelined operand
tiles, from the GPU spec table (gpu_specs.py). The kernel's first loop also carries
`tile.num_warps`, `tile.num_stages` and, for contractions, `tile.group_m` (grouped program
order for L2 reuse).

Nests fused by LoopFusion (shared outer loops around several blocks) are tiled by
tiling_fused.py: the shared loops become grid and tile axes of the one kernel.
Assumes: HoistAllocations, RemoveUnitLoops and NormalizeLoopStarts ran. Other nests that are not a
perfect nest only get their common spatial outer loops marked as grid; nests that already carry
tile annotations are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .gpu_specs import GpuSpec, gpu_spec
from .pass_util import s_tir_pass, top_level_statements

SPATIAL, REDUCE, MIXED = "spatial", "reduce", "mixed"


@dataclass(frozen=True)
class LoopInfo:
    var: tirx.Var
    extent: tvm.ir.PrimExpr
    kind: str  # SPATIAL, REDUCE or MIXED


@dataclass(frozen=True)
class NestPlan:
    block_name: str
    tiles: dict[int, tuple[str, int]]  # loop position -> (BLOCK name, default block size)
    num_warps: int
    num_stages: int
    group_m: int | None


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def power_of_two_floor(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


def _perfect_nest(stmt: tirx.Stmt) -> tuple[list[tirx.For], s_tir.SBlockRealize] | None:
    loops = []
    while isinstance(stmt, tirx.For):
        loops.append(stmt)
        stmt = stmt.body
    if isinstance(stmt, s_tir.SBlockRealize) and loops:
        return loops, stmt
    return None


def _vars_of(expr) -> list[tirx.Var]:
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return found


def _classify(loop: tirx.For, realize: s_tir.SBlockRealize) -> str:
    kinds = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if any(v.same_as(loop.loop_var) for v in _vars_of(value)):
            kinds.add(REDUCE if iv.iter_type == tirx.IterVar.CommReduce else SPATIAL)
    return kinds.pop() if len(kinds) == 1 else MIXED


def _static(extent) -> int | None:
    return int(extent.value) if isinstance(extent, tirx.IntImm) else None


def _element_bytes(dtype: str) -> int:
    bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
    return max(1, bits // 8)


def _is_zero(expr) -> bool:
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return isinstance(expr, (tirx.IntImm, tirx.FloatImm)) and expr.value == 0


def _strip_cast(expr):
    """The load under casts and zero padding (`T.if_then_else(inside, X[...], 0)`)."""
    while True:
        if isinstance(expr, tirx.Cast):
            expr = expr.value
        elif (isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op)
              and expr.op.name.endswith("if_then_else") and _is_zero(expr.args[2])):
            expr = expr.args[1]
        else:
            return expr


def contraction_operands(block: s_tir.SBlock):
    """(a, b) loads when the block is `X[..] = X[..] + a * b` with one reduction var, else None."""
    if block.init is None or not isinstance(block.body, tirx.BufferStore):
        return None
    value = block.body.value
    if not isinstance(value, tirx.Add):
        return None
    product = _strip_cast(value.b)
    if not isinstance(product, tirx.Mul):
        return None
    a, b = _strip_cast(product.a), _strip_cast(product.b)
    if not (isinstance(a, tvm.ir.TensorLoad) and isinstance(b, tvm.ir.TensorLoad)):
        return None
    # a contraction pairs an (m, k) operand with a (k, n) one: each has a spatial axis the other lacks
    spatial = {iv.var.name for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar}
    a_vars = {v.name for v in _vars_of(list(a.indices))} & spatial
    b_vars = {v.name for v in _vars_of(list(b.indices))} & spatial
    if not (a_vars - b_vars) or not (b_vars - a_vars):
        return None
    return a, b


def _contraction_sizes(spec: GpuSpec, dtype: str, extents: dict[str, int | None]) -> dict[str, int]:
    elt = _element_bytes(dtype)
    sizes = {"M": 128, "N": 128, "K": 64} if elt <= 2 else {"M": 64, "N": 64, "K": 32}
    for axis, size in sizes.items():
        extent = extents.get(axis)
        if extent is not None:
            sizes[axis] = max(16, min(size, next_power_of_two(extent)))
    stages = 3
    while stages * (sizes["M"] + sizes["N"]) * sizes["K"] * elt > spec.shared_memory_per_block and sizes["K"] > 16:
        sizes["K"] //= 2
    return sizes


def _plan_contraction(spec, loops, infos, realize) -> NestPlan | None:
    """M, N: the innermost spatial loops only `a` resp. only `b` uses; K: the innermost
    reduction loop both use. Other loops stay grid (spatial) or serial (reduction)."""
    a, b = contraction_operands(realize.block)
    a_vars = {v.name for v in _vars_of(list(a.indices))}
    b_vars = {v.name for v in _vars_of(list(b.indices))}
    m_pos = _last_of(infos, realize, SPATIAL, lambda it: it in a_vars and it not in b_vars)
    n_pos = _last_of(infos, realize, SPATIAL, lambda it: it in b_vars and it not in a_vars)
    k_pos = _last_of(infos, realize, REDUCE, lambda it: it in a_vars and it in b_vars)
    if m_pos is None or n_pos is None or k_pos is None:
        return None
    extents = {"M": _static(infos[m_pos].extent), "N": _static(infos[n_pos].extent), "K": _static(infos[k_pos].extent)}
    sizes = _contraction_sizes(spec, str(a.source.dtype), extents)
    warps = 8 if sizes["M"] * sizes["N"] >= 128 * 128 else 4
    tiles = {m_pos: ("BLOCK_M", sizes["M"]), n_pos: ("BLOCK_N", sizes["N"]), k_pos: ("BLOCK_K", sizes["K"])}
    return NestPlan(realize.block.name_hint, tiles, warps, 3, 8)


def _bound_iter(loop_var, realize) -> str | None:
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if any(v.same_as(loop_var) for v in _vars_of(value)):
            return iv.var.name
    return None


def _last_of(infos, realize, kind: str, wanted) -> int | None:
    found = None
    for pos, info in enumerate(infos):
        if info.kind == kind and wanted(_bound_iter(info.var, realize)):
            found = pos
    return found


def _block_name(loop_var: tirx.Var, taken: set[str]) -> str:
    base = "BLOCK_" + "".join(ch for ch in loop_var.name.upper() if ch.isalnum() or ch == "_")
    name, suffix = base, 1
    while name in taken:
        suffix += 1
        name = f"{base}{suffix}"
    taken.add(name)
    return name


TRANSPOSE_TILE = 64


def contiguous_loop_positions(infos: list[LoopInfo], realize) -> list[int]:
    """Loops that drive the last (contiguous) index of some access of the block, in loop order."""
    block = realize.block
    accesses: list = []
    tvm_ffi.structural_walk(block.body, [(tirx.BufferStore, accesses.append), (tvm.ir.TensorLoad, accesses.append)])
    driving: set[str] = set()
    for access in accesses:
        if access.indices:
            driving.update(v.name for v in _vars_of(access.indices[-1]))
    return [p for p, info in enumerate(infos) if _bound_iter(info.var, realize) in driving]


def _plan_transposed(infos: list[LoopInfo], positions: list[int], realize) -> NestPlan:
    """Accesses contiguous along different loops (a transpose): square tiles over both, so the
    loads and the stores each run along a tile axis and coalesce."""
    taken: set[str] = set()
    tiles = {}
    for pos in positions[-2:]:
        size = min(TRANSPOSE_TILE, next_power_of_two(_static(infos[pos].extent) or TRANSPOSE_TILE))
        tiles[pos] = (_block_name(infos[pos].var, taken), size)
    return NestPlan(realize.block.name_hint, tiles, 4, 2, None)


def _plan_general(spec: GpuSpec, infos: list[LoopInfo], realize) -> NestPlan:
    dtype = realize.block.body.buffer.dtype if isinstance(realize.block.body, tirx.BufferStore) else "float32"
    elt = _element_bytes(dtype)
    spatial = [p for p, info in enumerate(infos) if info.kind == SPATIAL]
    reduce = [p for p, info in enumerate(infos) if info.kind == REDUCE]
    num_warps = 4
    budget = spec.tile_element_budget(elt, num_warps) // 2
    tiles: dict[int, tuple[str, int]] = {}
    taken: set[str] = set()
    remaining = budget
    if reduce:
        pos = reduce[-1]
        size = min(next_power_of_two(_static(infos[pos].extent) or 1024), power_of_two_floor(2 * budget))
        if size > budget:
            num_warps = 8
        tiles[pos] = (_block_name(infos[pos].var, taken), size)
        remaining = power_of_two_floor(max(1, 2 * budget // size if size > budget else budget // size))
    for pos in reversed(spatial[-2:]):
        extent = _static(infos[pos].extent)
        size = min(next_power_of_two(extent or 1024), power_of_two_floor(remaining))
        if size <= 1:
            break
        tiles[pos] = (_block_name(infos[pos].var, taken), size)
        remaining = power_of_two_floor(max(1, remaining // size))
    return NestPlan(realize.block.name_hint, tiles, num_warps, 2, None)


def plan_nest(spec: GpuSpec, loops: list[tirx.For], realize: s_tir.SBlockRealize) -> NestPlan:
    infos = [LoopInfo(loop.loop_var, loop.extent, _classify(loop, realize)) for loop in loops]
    if contraction_operands(realize.block) is not None:
        plan = _plan_contraction(spec, loops, infos, realize)
        if plan is not None:
            return plan
    contiguous = [p for p in contiguous_loop_positions(infos, realize) if infos[p].kind == SPATIAL]
    if len(contiguous) >= 2 and all(info.kind == SPATIAL for info in infos):
        return _plan_transposed(infos, contiguous, realize)
    return _plan_general(spec, infos, realize)


def _apply_plan(sch: s_tir.Schedule, plan: NestPlan, kinds: list[str], extents: dict) -> None:
    block = sch.get_sblock(plan.block_name)
    loops = sch.get_loops(block)
    grid, serial, tile = [], [], []
    for pos, loop in enumerate(loops):
        extent = sch.get(loop).extent
        if pos in plan.tiles:
            name, size = plan.tiles[pos]
            outer, inner = sch.split(loop, [None, size], preserve_unit_iters=True)
            sch.annotate(inner, "tile.role", "tile")
            sch.annotate(inner, "tile.outer", sch.get(outer).loop_var.name)
            sch.annotate(inner, "tile.block", name)
            extents[sch.get(inner).loop_var.__chandle__()] = extent
            (grid if kinds[pos] == SPATIAL else serial).append(outer)
            tile.append(inner)
        else:
            (grid if kinds[pos] == SPATIAL else serial).append(loop)
    for loop in grid:
        sch.annotate(loop, "tile.role", "grid")
    for loop in serial:
        sch.annotate(loop, "tile.role", "serial")
    order = grid + serial + tile
    sch.reorder(*order)
    sch.annotate(order[0], "tile.num_warps", plan.num_warps)
    sch.annotate(order[0], "tile.num_stages", plan.num_stages)
    if plan.group_m is not None and len(grid) >= 2:
        sch.annotate(order[0], "tile.group_m", plan.group_m)


def _already_tiled(stmt: tirx.Stmt) -> bool:
    """Nests with tile annotations, or with thread bindings (a CUDA-style schedule), are kept."""
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.For, lambda f: found.append("tile.role" in f.annotations
                                                                    or f.kind == tirx.ForKind.THREAD_BINDING)))
    return any(found)


def _mark_common_grid(sch: s_tir.Schedule, stmt: tirx.Stmt) -> None:
    """For a nest with several blocks: outer loops that are spatial for every block become grid."""
    realizes: list = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, realizes.append))
    loop = stmt
    while isinstance(loop, tirx.For) and realizes:
        if any(_classify(loop, r) != SPATIAL for r in realizes):
            break
        rv = _loop_rv(sch, realizes[0].block.name_hint, loop.loop_var)
        if rv is None:
            break
        sch.annotate(rv, "tile.role", "grid")
        loop = loop.body


def _loop_rv(sch, block_name, loop_var):
    for rv in sch.get_loops(sch.get_sblock(block_name)):
        if sch.get(rv).loop_var.same_as(loop_var):
            return rv
    return None


def tile_function(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    sch = s_tir.Schedule(func)
    changed = False
    extents: dict = {}
    for stmt in top_level_statements(func):
        if _already_tiled(stmt):
            continue
        nest = _perfect_nest(stmt)
        if nest is None:
            from .tiling_fused import split_fused_nest, tile_fused_nest  # noqa: PLC0415 - it imports this module

            fused = split_fused_nest(stmt)
            if fused is not None:
                tile_fused_nest(sch, spec, *fused, extents)
            else:
                _mark_common_grid(sch, stmt)
            changed = True
            continue
        loops, realize = nest
        kinds = [_classify(loop, realize) for loop in loops]
        plan = plan_nest(spec, loops, realize)
        _apply_plan(sch, plan, kinds, extents)
        changed = True
    return _annotate_extents(sch.mod["main"], extents) if changed else func


def _annotate_extents(func: tirx.PrimFunc, extents: dict) -> tirx.PrimFunc:
    """Add "tile.extent" to the split tile loops. Done on the IR, not with sch.annotate, because
    the schedule refuses annotation values that mention variables (symbolic extents)."""

    def annotate(loop: tirx.For) -> tirx.For:
        extent = extents.get(loop.loop_var.__chandle__())
        if extent is None:
            return loop
        annotations = dict(loop.annotations)
        # a static extent as a Python int: that is what the parser reads back (round trip)
        annotations["tile.extent"] = int(extent.value) if isinstance(extent, tirx.IntImm) else extent
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, annotate)))


def Tiling(gpu: str = "H200"):
    spec = gpu_spec(gpu)
    return s_tir_pass("Tiling", lambda func: tile_function(func, spec))
