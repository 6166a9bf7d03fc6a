"""The pipeline stages of a streamed walk that computes two tiles per step (Tiling's `_plan_online`).

A streamed walk (LoopFusion's step "stream": attention backward's dQ kernel, rows i walking the keys j,
and its dK kernel, rows j walking the queries i) recomputes two products per step (S = Q·Kᵀ and
dP = dO·Vᵀ, each against a tile the program keeps: Q and dO, or K and V) and feeds a third dot (dQ += dS·K,
dK += dSᵀ·Q) from a tile of the walk. Each step thus loads `products + 1` tiles of the walk (the reader's
operand may be one of the products' tiles again, loaded under another axis name) beside `products` resident
tiles; the loads of the next steps are in flight while this step's three dots run only with a third stage.

Measured on the H200 (2026-12-02, benchmarks/attention_backward_variants_gpu.py at b2 h16 s2048 d128 fp16,
JSON benchmarks/results/2026-12-02-h200-attention-backward-variants.json; each kernel alone, descriptors):
dQ 255.6 µs at 128 × 64, 8 warps, 2 stages and 203.6 at 3 stages; dK 275.9 and 245.9. At 4 warps the
same tiles ran 513.6 and 506.9 µs (the two fp32 tiles and the 128-column accumulator spill). The dV
kernel (one product per step, 4 warps) keeps 2 stages: 166.7 µs, against 212.9 at 8 warps and 3 stages.

Only on sm_90 (the GPU measured) and where the resident tiles and three stages of the walk's tiles fit
the program's shared memory (rows and walk tiles × the head dimension, which must be known); else 2.

A walk whose accumulators beside it are wider than one head (LoopFusion's share step puts dK's and dV's
beside one walk: 256 fp32 columns per row) takes 64 rows at 4 warps and 2 stages (`rows_beside_accumulators`):
at 128 rows and 8 warps the accumulators alone are 128 registers a thread, the hardware model puts the kernel
at 255 registers with spills and one program per multiprocessor (0.290 ms at b2 h16 s2048 d128), at 64 rows
and 4 warps at two programs (0.258 ms); on the H200, dV accumulated in the dK kernel by hand ran 263.2 µs at
64 × 64 / 4 / 2 against 285.9 at 128 × 64 / 8 / 3 (the same JSON). On sm_90 only (the GPU measured). The threshold
is a column count, not a register count: the other walks measured are one head of accumulators at 128 rows
(dQ) and these two heads; a single 256-wide head (d256) would take 64 rows too, unmeasured.
"""

from __future__ import annotations

import math

from tvm import tirx

from tir_passes.analyses.nest import REDUCE, SPATIAL, contraction_operands, loop_kind
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import static_int

STREAMED_STAGES = 3
DEFAULT_STAGES = 2


def streamed_walk_stages(spec: GpuSpec, dtype: str, rows: int, columns: int, depth: int | None,
                         products: int) -> int:
    """Stages of a streamed walk of `columns`-wide tiles computing `products` tiles per step in a program
    of `rows` rows, the products' other axis `depth` long (None: unknown)."""
    if spec.compute_capability < 90 or products < 2 or depth is None:
        return DEFAULT_STAGES
    resident = products * rows * depth
    walked = STREAMED_STAGES * (products + 1) * columns * depth
    fits = (resident + walked) * element_bytes(dtype) <= spec.shared_memory_per_block
    return STREAMED_STAGES if fits else DEFAULT_STAGES


ONE_HEAD_OF_ACCUMULATORS = 128   # fp32 columns per row beside a walk that 128 rows at 8 warps hold without spilling
WIDE_ACCUMULATOR_ROWS, WIDE_ACCUMULATOR_WARPS = 64, 4


def rows_beside_accumulators(spec: GpuSpec, rows: int, warps: int, stages: int,
                             accumulator_columns: int | None) -> tuple[int, int, int]:
    """(rows, warps, stages) of a streamed walk computing two tiles per step with `accumulator_columns` fp32
    columns per row of accumulators beside it (None: unknown, as chosen). Only on sm_90, the GPU measured."""
    if spec.compute_capability < 90 or accumulator_columns is None or accumulator_columns <= ONE_HEAD_OF_ACCUMULATORS:
        return rows, warps, stages
    return min(rows, WIDE_ACCUMULATOR_ROWS), WIDE_ACCUMULATOR_WARPS, DEFAULT_STAGES


def accumulator_columns(subs: list, shared: list, walk: tirx.For) -> int | None:
    """The columns per row of the contractions that reduce along the walk (their accumulators beside it):
    each one's spatial loops other than the `shared` ones and the walk (`subs`: (loops, realize) of the nest;
    None: a symbolic extent)."""
    total = 0
    for loops, realize in subs:
        if contraction_operands(realize.block) is None or loop_kind(walk, realize) != REDUCE \
                or not any(l.same_as(walk) for l in loops):
            continue
        inner = [static_int(l.extent) for l in loops if loop_kind(l, realize) == SPATIAL
                 and not any(l.same_as(s) for s in shared)]
        if None in inner:
            return None
        total += math.prod(inner)
    return total
