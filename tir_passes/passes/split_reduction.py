"""SplitReduction: split the reduction loop of a contraction across programs (split-K) where its
M·N tiles alone leave the GPU idle: partial sums into an fp32 buffer over (split, M, N), then one
sum over the splits.

Rewrite (TVM's `split` and `rfactor`): a contraction block `acc[i, j] += A[i, k] * B[k, j]` under
loops (i, j, k) becomes

    acc_rf[s, i, j] += A[i, s * K/S + k'] * B[s * K/S + k', j]    for s in S, k' in K/S   (spatial in s)
    acc[i, j] += acc_rf[s, i, j]                                  for s in S              (a reduction)

Tiling then makes `s` a program id of the first kernel (a tl.dot per split) and the second a
reduction over a tile of the S partials, fused with whatever consumes `acc` (the cast of a linear
layer): two kernels, partials through a scratch buffer, no atomics, and the sum over the splits
in one fixed order (the same bits every run).

The decision is the block's annotation "tile.split" (SplitMark, tile_contract.py): S and the block
it was split from. S is priced by tile_sizes.split_k_factor (the hardware model's terms: Little's
law on the bytes in flight, waves, the partials' round trip and a second launch).

Why: a contraction with few output tiles and a long reduction runs on a few multiprocessors: a
16×128 output over K = 32768 is one program streaming 9 MiB (H200: 226.7 µs); split 32 ways, 32
programs do (39.8 µs; docs/benchmarks.md, issue 17). A decode step's 32 tiles are not split: there
the second kernel costs more than the parallelism hides (measured, tile_sizes.SPLIT_SECONDS).
Assumes: HoistAllocations ran (intermediates are root allocations). Only perfect nests whose block
is a contraction of two loaded operands into float32 (the partials' type; tl.dot accumulates in
it) with static extents are split; symbolic shapes, fp16 accumulators, operands computed in
registers (attention's weights, which OnlineSoftmax fuses) and nests whose programs (M·N tiles
times the other spatial loops, a batch) fill the GPU are left alone.
Column reductions too (`dW[j] += dY[i, j]·X[i, j]`, analyses/columns.py: every matrix load strided
along the reduction), static, into float32, whose column tiles leave fewer than
tile_sizes.COLUMN_PROGRAMS_PER_SM programs per multiprocessor: the rows are split into slices of
at least 512 (tile_sizes.column_splits), the same rfactor and SplitMark (a norm's weight gradient
over 16384 rows: 128 programs become 1024).
"""

from __future__ import annotations

import math

import tvm
from tvm import s_tir, tirx

from tir_passes.analyses.columns import reduces_down_columns
from tir_passes.analyses.nest import (REDUCE, SPATIAL, bound_iter_var, contraction_operands, loop_kind, operands_dtype,
                                     perfect_nest)
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.contracts.tile_contract import SPLIT_KEY, SplitMark, split_value
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import s_tir_pass, static_int, top_level_statements
from tir_passes.passes.tile_sizes import COLUMN_TILE, SplitPrice, column_splits, split_k_factor


def _axis_loops(loops, realize) -> dict[str, tirx.For] | None:
    """The contraction's M, N and K loops (as the tiling plan picks them: the innermost spatial loop
    only one operand uses, the innermost reduction loop both use), when K is the block's one
    reduction loop."""
    operands = contraction_operands(realize.block)
    if operands is None:
        return None
    a, b = operands
    names = {}
    reductions = [loop for loop in loops if loop_kind(loop, realize) == REDUCE]
    if len(reductions) != 1 or len([iv for iv in realize.block.iter_vars
                                    if iv.iter_type == tirx.IterVar.CommReduce]) != 1:
        return None
    for loop in loops:
        iv = bound_iter_var(realize, loop.loop_var)
        if iv is None:
            continue
        used_a, used_b = iv.var.name in a.var_names, iv.var.name in b.var_names
        if loop_kind(loop, realize) == SPATIAL and used_a != used_b:
            names["M" if used_a else "N"] = loop
        elif loop_kind(loop, realize) == REDUCE and used_a and used_b:
            names["K"] = loop
    return names if len(names) == 3 else None


def split_decision(stmt, spec: GpuSpec) -> tuple[str, tirx.For, SplitPrice] | None:
    """(block name, K loop, price) of a contraction nest the model says to split, else None."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    loops, realize = nest
    block = realize.block
    if block.init is None or not isinstance(block.body, tirx.BufferStore):
        return None  # one value per block: a moments block (several stores) is no contraction
    if str(block.body.buffer.dtype) != "float32" or SPLIT_KEY in block.annotations:
        return None
    axes = _axis_loops(loops, realize)
    if axes is None:
        return None
    a, b = contraction_operands(block)
    if not (isinstance(a.value, tvm.ir.TensorLoad) and isinstance(b.value, tvm.ir.TensorLoad)):
        return None  # an operand computed in registers (attention's weights) belongs to a fused form
    extents = {axis: static_int(loop.extent) for axis, loop in axes.items()}
    others = [static_int(loop.extent) for loop in loops if loop_kind(loop, realize) == SPATIAL
              and not any(loop.same_as(axis) for axis in axes.values())]
    if None in others:
        return None
    price = split_k_factor(spec, operands_dtype(a, b), element_bytes(block.body.buffer.dtype), extents,
                           math.prod(others))
    return (block.name_hint, axes["K"], price) if price.splits > 1 else None


def column_split_decision(stmt, spec: GpuSpec) -> tuple[str, tirx.For, int] | None:
    """(block name, reduction loop, splits) of a column reduction (`dW[j] += dY[i, j]·X[i, j]`, the
    reduced axis strided in every load) whose column tiles alone leave the GPU idle."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    loops, realize = nest
    block = realize.block
    if block.init is None or not isinstance(block.body, tirx.BufferStore) or SPLIT_KEY in block.annotations:
        return None
    if str(block.body.buffer.dtype) != "float32" or contraction_operands(block) is not None:
        return None
    reductions = [loop for loop in loops if loop_kind(loop, realize) == REDUCE]
    spatial = [loop for loop in loops if loop_kind(loop, realize) == SPATIAL]
    if len(reductions) != 1 or not spatial or not reduces_down_columns(reductions[0], spatial[-1], realize):
        return None
    rows = static_int(reductions[0].extent)
    extents = [static_int(loop.extent) for loop in spatial]
    if rows is None or None in extents:
        return None
    splits = column_splits(spec, rows, math.prod(extents[:-1]) * -(-extents[-1] // COLUMN_TILE))
    return (block.name_hint, reductions[0], splits) if splits > 1 else None


def _split(func: tirx.PrimFunc, block_name: str, k_loop: tirx.For, splits: int) -> tirx.PrimFunc:
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    block = sch.get_sblock(block_name)
    k = next(rv for rv in sch.get_loops(block) if sch.get(rv).loop_var.same_as(k_loop.loop_var))
    outer, _ = sch.split(k, [splits, None])
    partial = sch.rfactor(outer, factor_axis=0)
    sch.annotate(partial, SPLIT_KEY, split_value(SplitMark(splits, block_name)))
    return sch.mod["main"]


def split_reduction(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    decisions = [d for d in (split_decision(stmt, spec) for stmt in top_level_statements(func)) if d is not None]
    for block_name, k_loop, price in decisions:
        func = _split(func, block_name, k_loop, price.splits)
    columns = [d for d in (column_split_decision(stmt, spec) for stmt in top_level_statements(func)) if d is not None]
    for block_name, loop, splits in columns:
        func = _split(func, block_name, loop, splits)
    return func


def SplitReduction(gpu: str = "H200", deterministic: bool = False, limits=None):
    """deterministic=True splits nothing: the slice count follows the sizes of the other axes (how
    many output tiles fill the GPU), so a row's sum order would change with the batch
    (docs/determinism.md)."""
    spec = gpu_spec(gpu, limits)
    if deterministic:
        return s_tir_pass("SplitReduction", lambda func: func)
    return s_tir_pass("SplitReduction", lambda func: split_reduction(func, spec))
