"""The price of splitting a row walked by an online softmax into chunks (SplitOnlineRows): the
unsplit walk against the chunks' statistics, the readers on a grid of their own, and the kernels
the split adds, in the GEMM price's terms (contracts/gemm_price.py: Little's law per program, the
copy bandwidth) and the online split's measured cost of a kernel.

A walk's compute (an exponential per element and walk on the multi-function unit's share of a
multiprocessor, the contraction's flops on its share of the tensor cores) adds to its streaming
where a multiprocessor holds one program (nothing else runs while that program waits on its loads
or its dots), and overlaps it where it holds several. Measured on an H100 (2026-12-07,
benchmarks/scores_split_gpu.py, benchmarks/results/2026-12-07-h100-scores-split.json), softmax(Q·Kᵀ)
4096×4096×128 with its scores written: the unsplit kernel (128 programs of 32 rows, one a
multiprocessor) 61.1 µs, priced 46.7 (28.8 without its compute); the statistics of 4 chunks (128
programs, one each) 22.9 µs, priced 18.5; of 8 chunks (256 programs) 15.2 µs, priced 9.6. The
modules as compiled: split 8 ways 60.6 µs, unsplit 66.1, split 4 ways 69.2: on the H100's figures
the price's order too (40.1, 46.7, 49.1 µs; on the H200's, 33.3, 46.7 and 42.3: 4 ways before the
unsplit walk, unmeasured there). The streaming term keeps a multiprocessor's programs one after
another (Little's law per program, as before); only their compute is taken to overlap it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.gemm_price import CONFIDENCE, copy_bytes_per_second, program_stream_seconds
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.passes.tile_sizes import MAX_SPLITS

MIN_ONLINE_CHUNK = 512   # elements each chunk of a split row keeps: several tiles, so its loop still pipelines
ONLINE_WAVES = 2         # programs per multiprocessor a split aims for (the store's programs run beside)
# each kernel a split adds (the combine and the readers' own), measured on an H100 (2026-12-07, the module
# split 8 ways, its launches replayed): run() 60.6 µs, a CUDA graph of it 58.8, its three kernels alone 53.4,
# so 2.4 µs of gaps and host time a launch; the two added kernels: the combine's 2.9 µs and two launches,
# 7.7 µs, about 4 each. (Split-K's SPLIT_SECONDS, 27 µs, was timed before launches were replayed.)
ONLINE_SPLIT_KERNEL_SECONDS = 4e-6


@dataclass(frozen=True)
class OnlineRow:
    """What one program of an online nest streams per element of its row: `key_bytes` read once per
    walk whatever its rows (a contraction's key row, from L2), `element_bytes` read per row and walk
    (a plain softmax's input), `out_bytes` written per row; `walks`: the passes over the row (2 where
    the readers walk it again); `in_flight`: the bytes a program keeps in flight (Little's law)."""

    programs: int
    rows: int
    row: int
    key_bytes: int
    element_bytes: int
    out_bytes: int
    walks: int
    in_flight: float
    dot_flops: int = 0            # a contraction's flops per element and walk (2 × its depth)
    dot_tflops: float | None = None   # the peak those flops run against (GpuSpec.dot_tflops)


@dataclass(frozen=True)
class OnlineSplitPrice:
    splits: int
    seconds: float
    unsplit_seconds: float


def _walk_seconds(spec: GpuSpec, walk: OnlineRow, programs: int, keys: int, walks: int, program_bytes: float) -> float:
    """The busiest multiprocessor's time for its programs, each walking `keys` elements of its rows
    `walks` times: streaming their bytes (gemm_price's Little's law), and their compute, added where the
    multiprocessor holds one program, overlapped where it holds several."""
    per_sm = -(-programs // spec.multiprocessors)
    stream = program_stream_seconds(spec, per_sm, program_bytes, walk.in_flight)
    compute = per_sm * _compute_seconds(spec, walk, walks * walk.rows * keys)
    return stream + compute if per_sm == 1 else max(stream, compute)


def _compute_seconds(spec: GpuSpec, walk: OnlineRow, elements: int) -> float:
    """One program's exponentials (one an element) and dots over `elements` on a multiprocessor's share."""
    seconds = 0.0
    if spec.special_function_tops:
        seconds += elements / (spec.special_function_tops * 1e12 / spec.multiprocessors)
    if walk.dot_flops and walk.dot_tflops:
        seconds += elements * walk.dot_flops / (walk.dot_tflops * 1e12 / spec.multiprocessors)
    return seconds


def online_unsplit_seconds(spec: GpuSpec, walk: OnlineRow) -> float:
    program = walk.row * (walk.walks * (walk.key_bytes + walk.rows * walk.element_bytes) + walk.rows * walk.out_bytes)
    stored = walk.programs * walk.rows * walk.row * walk.out_bytes / copy_bytes_per_second(spec)
    return max(_walk_seconds(spec, walk, walk.programs, walk.row, walk.walks, program), stored)


def online_split_seconds(spec: GpuSpec, walk: OnlineRow, splits: int) -> float:
    """The chunks' statistics (splits × the programs, a chunk each, walked once), the readers on a grid
    of their own (their bytes at the copy bandwidth), and the two kernels the split adds."""
    chunk = walk.row // splits
    stats = _walk_seconds(spec, walk, walk.programs * splits, chunk, 1,
                          chunk * (walk.key_bytes + walk.rows * walk.element_bytes))
    readers = walk.programs * walk.rows * walk.row * (walk.element_bytes + walk.out_bytes) / copy_bytes_per_second(spec)
    return stats + readers + 2 * ONLINE_SPLIT_KERNEL_SECONDS


def online_splits(spec: GpuSpec, walk: OnlineRow, chunked: OnlineRow | None = None) -> OnlineSplitPrice:
    """The cheapest split of a row walked by an online softmax by the price above, among powers of two
    that divide the row, keep MIN_ONLINE_CHUNK elements a chunk and are needed to make ONLINE_WAVES
    waves of programs; a split must save CONFIDENCE of the unsplit price. `walk`: the unsplit kernel's
    programs (Tiling's, which may hold fewer rows than a chunk's `chunked` programs). softmax(Q·Kᵀ)
    over 4096 rows of 4096 keys on the H200: 46.7 µs unsplit (128 programs of 32 rows, one a
    multiprocessor), 42.3 split 4 ways (128 statistics programs, one each), 33.3 split 8 ways: 8."""
    unsplit = online_unsplit_seconds(spec, walk)
    best = OnlineSplitPrice(1, unsplit, unsplit)
    chunked = chunked or walk
    splits = 2
    while (chunked.programs * splits // 2 < ONLINE_WAVES * spec.multiprocessors and splits <= MAX_SPLITS
           and walk.row % splits == 0 and walk.row // splits >= MIN_ONLINE_CHUNK):
        seconds = online_split_seconds(spec, chunked, splits)
        if seconds < best.seconds and seconds < (1 - CONFIDENCE) * unsplit:
            best = OnlineSplitPrice(splits, seconds, unsplit)
        splits *= 2
    return best
