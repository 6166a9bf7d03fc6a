"""Tiling's prefetch of row walks: which serial loops issue their row loads iterations ahead.

What it decides: a serial loop that walks rows one whole tile at a time (it steps no tile axis and
carries no dependence, at least 2 iterations) whose blocks, each directly under it through tile loops,
load rows of buffers the kernel only reads (indices that use the loop, or a block predicate that does:
a ragged program's rows; indices and predicate of the kernel's loops and the function's sizes only,
reading no buffer) and reduce a tile across the
program before the same iteration goes on (a block whose reduction runs along a tile loop inside the
walk: a norm backward's mean, var and row sums). Its LoopPrefetch (prefetch_record.py) names those
buffers; the lowering issues their row loads one iteration ahead, double-buffered in registers, so they
are in flight while the row before reduces.
Why: such a walk is latency bound. One program per multiprocessor is resident (a whole 8192-wide row
tile at 16 warps takes ~125 registers), and without the prefetch row r + 1's loads start only after
row r's reductions and stores. Measured on the H200 (benchmarks/norm_backward_variants_gpu.py,
16384×8192 fp16): LayerNorm's backward 449 → 280 µs, RMSNorm's 355 → 224 µs.
With several block reductions in the walk it also records `sums_together`: the lowering reduces the
iteration's sums that do not read each other as one (lowering/rewrites/sums_together.py), one shared-memory
round trip for them (LayerNorm's backward 246.8 → 235.1 µs, RMSNorm's 221.8 → 220.6 on the H200).
Refused, with a note, where the early tiles would take more than PREFETCH_REGISTERS registers per
thread (the row's tiles are already most of the 255), so it never makes a kernel spill.
Assumes: the tiled function (Tiling's schedule applied) and the decisions for its loops.
"""

from __future__ import annotations

import dataclasses
import math

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.analyses.nest import block_accesses, block_sites, blocks_under, loop_sites, loops_under
from tir_passes.analyses.nest import substitute_bindings, uses_var, vars_of, written_buffers
from tir_passes.contracts.prefetch_record import LoopPrefetch
from tir_passes.contracts.tile_contract import (SERIAL, TILE, LoopTile, TileDecision, TileNote, kernel_tile, loop_tile,
                                                write_decision)
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import static_int, top_level_statements

DISTANCE = 1               # the next row: the measured win (two ahead is a variant of the benchmark)
SUMS_TOGETHER = True       # a prefetching walk's independent sums reduced as one (measured: the benchmark's base)
PREFETCH_REGISTERS = 32    # registers per thread the early tiles may take (of 255; a row of 8192 fp16
                           # X and dY at 16 warps: 16)
THREADS_PER_WARP = 32


def prefetch_walks(func: tirx.PrimFunc, stmt, index: int, decision: TileDecision) -> list[TileNote]:
    """Writes each qualifying walk's LoopPrefetch into `decision`; returns the notes for the dump."""
    params = {p.name for p in func.params if tirx.is_buffer_var(p)}
    written = {buffer.name for block in blocks_under(stmt) for buffer in written_buffers(block)}
    warps = _num_warps(stmt, decision)
    notes = []
    for loop, _ in loop_sites(stmt):
        key = loop.loop_var.__chandle__()
        tile = decision.loops.get(key)
        if not _is_row_walk(loop, tile, decision):
            continue
        rows = _row_loads(loop, decision, params - written, _program_vars(func, stmt))
        if not rows or not _reduces_inside(loop, decision):
            continue
        registers = DISTANCE * math.ceil(sum(rows.values()) / 4 / (warps * THREADS_PER_WARP))
        name, buffers = loop.loop_var.name, ", ".join(sorted(rows))
        if registers > PREFETCH_REGISTERS:
            notes.append(TileNote(index, f"kernel {index}: loop {name} does not prefetch rows of {buffers}: "
                                         f"{registers} registers per thread, over {PREFETCH_REGISTERS}"))
            continue
        together = SUMS_TOGETHER and _reductions_inside(loop, decision) > 1
        prefetch = LoopPrefetch(DISTANCE, tuple(sorted(rows)), registers, together)
        decision.loops[key] = dataclasses.replace(tile, prefetch=prefetch)
        notes.append(TileNote(index, f"kernel {index}: loop {name} prefetches rows of {buffers} {DISTANCE} "
                                     f"iteration ahead ({registers} registers per thread): its rows reduce "
                                     "before it goes on, so the next row's loads wait behind them otherwise"
                                     + ("; its independent sums reduce together" if together else "")))
    return notes


def decide_prefetch(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The prefetch decisions alone, written into a function Tiling already tiled (read from its
    contract), for tests that state a Before and an Expected program; Tiling itself calls prefetch_walks."""
    decision = TileDecision()
    for loop in loops_under(func.body):
        key = loop.loop_var.__chandle__()
        if (tile := loop_tile(loop)) is not None:
            decision.loops[key] = tile
        if (kernel := kernel_tile(loop)) is not None:
            decision.kernels[key] = kernel
    for index, stmt in enumerate(top_level_statements(func)):
        prefetch_walks(func, stmt, index, decision)
    return write_decision(func, decision)


def _num_warps(stmt, decision: TileDecision) -> int:
    for loop in loops_under(stmt):
        if (kernel := decision.kernels.get(loop.loop_var.__chandle__())) is not None:
            return kernel.num_warps
    kernel = next((decision.kernels.get(block.name_hint) for block in blocks_under(stmt)
                   if block.name_hint in decision.kernels), None)
    return kernel.num_warps if kernel is not None else 4


def _is_row_walk(loop: tirx.For, tile: LoopTile | None, decision: TileDecision) -> bool:
    """A serial loop stepping one row per iteration: no tile axis of it, no dependence carried."""
    if tile is None or tile.role != SERIAL or tile.carries or tile.window is not None:
        return False
    extent = static_int(loop.extent)
    if extent is None or extent < 2:
        return False
    inner = [decision.loops.get(l.loop_var.__chandle__()) for l in loops_under(loop.body)]
    return not any(t is not None and t.outer == loop.loop_var.name for t in inner)


def _direct_blocks(loop: tirx.For, decision: TileDecision):
    """(block realize, the tile loops around it inside `loop`) for the blocks only tile loops separate from it."""
    for realize, around in block_sites(loop.body):
        tiles = [decision.loops.get(l.loop_var.__chandle__()) for l in around]
        if all(t is not None and t.role == TILE for t in tiles):
            yield realize, list(zip(around, tiles))


def _reads_memory(expr) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, found.append))
    return bool(found)


def _program_vars(func: tirx.PrimFunc, stmt) -> set[int]:
    """The variables an early load's address may use: the kernel's loops and the function's scalars and
    shape sizes (not a let inside a block: the lowering assigns those in the walk, after the load)."""
    found = {loop.loop_var.__chandle__() for loop in loops_under(stmt)}
    for param in func.params:
        if tirx.is_buffer_var(param):
            found |= {v.__chandle__() for v in vars_of(list(param.shape))}
        else:
            found.add(param.__chandle__())
    return found


def _only_program_vars(expr, allowed: set[int]) -> bool:
    return not _reads_memory(expr) and all(v.__chandle__() in allowed for v in vars_of(expr))


def _row_loads(loop: tirx.For, decision: TileDecision, read_only: set[str], allowed: set[int]) -> dict[str, int]:
    """{buffer: bytes of its largest row tile} of the loads the walk may issue early: those whose index,
    or the predicate of whose block (a ragged last program's rows), uses the walk's row. A buffer one of
    whose loads under the walk has an address or predicate of anything else (a let) is refused whole:
    the lowering moves every row load of a buffer it names."""
    rows: dict[str, int] = {}
    refused: set[str] = set()
    for realize, tiles in _direct_blocks(loop, decision):
        plain = _only_program_vars(realize.predicate, allowed)
        masked = uses_var(realize.predicate, loop.loop_var)
        for access in block_accesses(realize.block):
            if access.is_store or access.name not in read_only:
                continue
            indices = [substitute_bindings(index, realize) for index in access.indices]
            if not plain or not all(_only_program_vars(i, allowed) for i in indices):
                refused.add(access.name)
                continue
            if not (masked or any(uses_var(i, loop.loop_var) for i in indices)):
                continue
            elements = math.prod(tile.size for around, tile in tiles
                                 if any(uses_var(i, around.loop_var) for i in indices))
            size = elements * element_bytes(str(access.buffer.dtype))
            rows[access.name] = max(rows.get(access.name, 0), size)
    return {name: size for name, size in rows.items() if name not in refused}


def _reduces_inside(loop: tirx.For, decision: TileDecision) -> bool:
    """Some block under the walk reduces along a tile loop inside it (a block-wide reduction)."""
    return _reductions_inside(loop, decision) > 0


def _reductions_inside(loop: tirx.For, decision: TileDecision) -> int:
    """The blocks under the walk that reduce along a tile loop inside it."""
    return sum(any(iv.iter_type == tirx.IterVar.CommReduce and any(uses_var(value, l.loop_var) for l, _ in tiles)
                   for iv, value in zip(realize.block.iter_vars, realize.iter_values))
               for realize, tiles in _direct_blocks(loop, decision))
