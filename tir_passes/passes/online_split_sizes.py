"""The price of splitting a row walked by an online softmax into chunks (SplitOnlineRows): the
unsplit walk against the chunks' statistics, the readers on a grid of their own, and the kernels
the split adds, in the GEMM price's terms (contracts/gemm_price.py: Little's law per program, the
copy bandwidth) and split-K's measured cost of a kernel (tile_sizes.SPLIT_SECONDS).
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.gemm_price import CONFIDENCE, copy_bytes_per_second, program_stream_seconds
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.passes.tile_sizes import MAX_SPLITS, SPLIT_SECONDS

MIN_ONLINE_CHUNK = 512   # elements each chunk of a split row keeps: several tiles, so its loop still pipelines
ONLINE_WAVES = 2         # programs per multiprocessor a split aims for (the store's programs run beside)
# each kernel a split adds (the combine and the readers' own): split-K's measured second kernel (launch,
# scratch, run()'s checks; SPLIT_SECONDS), which the suite's times include (measured before run() replayed
# the launches of modules with scratch buffers: see SPLIT_SECONDS)
ONLINE_SPLIT_KERNEL_SECONDS = SPLIT_SECONDS


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


@dataclass(frozen=True)
class OnlineSplitPrice:
    splits: int
    seconds: float
    unsplit_seconds: float


def _walk_seconds(spec: GpuSpec, programs: int, program_bytes: float, in_flight: float) -> float:
    """The busiest multiprocessor's time to stream its programs' bytes (gemm_price's Little's law)."""
    return program_stream_seconds(spec, -(-programs // spec.multiprocessors), program_bytes, in_flight)


def online_unsplit_seconds(spec: GpuSpec, walk: OnlineRow) -> float:
    program = walk.row * (walk.walks * (walk.key_bytes + walk.rows * walk.element_bytes) + walk.rows * walk.out_bytes)
    stored = walk.programs * walk.rows * walk.row * walk.out_bytes / copy_bytes_per_second(spec)
    return max(_walk_seconds(spec, walk.programs, program, walk.in_flight), stored)


def online_split_seconds(spec: GpuSpec, walk: OnlineRow, splits: int) -> float:
    """The chunks' statistics (splits × the programs, a chunk each), the readers on a grid of their own
    (their bytes at the copy bandwidth), and the two kernels the split adds."""
    chunk = walk.row // splits
    stats = _walk_seconds(spec, walk.programs * splits, chunk * (walk.key_bytes + walk.rows * walk.element_bytes),
                          walk.in_flight)
    readers = walk.programs * walk.rows * walk.row * (walk.element_bytes + walk.out_bytes) / copy_bytes_per_second(spec)
    return stats + readers + 2 * ONLINE_SPLIT_KERNEL_SECONDS


def online_splits(spec: GpuSpec, walk: OnlineRow, chunked: OnlineRow | None = None) -> OnlineSplitPrice:
    """The cheapest split of a row walked by an online softmax by the price above, among powers of two
    that divide the row, keep MIN_ONLINE_CHUNK elements a chunk and are needed to make ONLINE_WAVES
    waves of programs; a split must save CONFIDENCE of the unsplit price. `walk`: the unsplit kernel's
    programs (Tiling's, which may hold fewer rows than a chunk's `chunked` programs). softmax(Q·Kᵀ)
    over 4096 rows of 4096 keys: the two kernels a split adds (54 µs) cost more than the 28 µs the
    model gives the unsplit walk of 128 programs of 32 rows: not split; over 65536 keys it is."""
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
