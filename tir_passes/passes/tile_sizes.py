"""The block-size model of the Tiling pass: powers of two sized from the GPU spec table.

- contractions (tl.dot): BLOCK_M/N/K of 128/128/64 for 16-bit data and 64/64/32 for fp32, each at
  least tl.dot's minimum and at most the extent's next power of two, BLOCK_K halved until the
  pipelined operand tiles fit the GPU's shared memory;
- transposed nests: square tiles over the two loops the loads and the stores are contiguous along;
- other nests: the innermost reduction loop as one tile up to a register budget (8 warps when a
  row is longer than what 4 warps hold), then the innermost spatial loops within what is left;
- fused rows: whole-row tiles (up to the widest row tile) and as many rows as fit 4096 elements;
- column reductions (the reduced axis strided in every load): 64 columns stepped down 64 rows, and
  the rows split into partials while the programs do not fill the GPU (column_splits);
- online nests (a running maximum with sums over the same loop, OnlineSoftmax): that loop in
  tiles of 64 (32 for fp32) beside rows of 128 (64), the shape of flash attention's tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.analyses.nest import next_power_of_two, power_of_two_floor
from tir_passes.infra.dtypes import element_bytes
from tir_passes.contracts.tile_contract import LIMITS

TRANSPOSE_TILE = 64
PIPELINE_STAGES = 3
ROW_ELEMENTS_PER_PROGRAM = 4096
UNKNOWN_EXTENT = 1024   # the size a symbolic extent is planned for


def contraction_sizes(spec: GpuSpec, dtype: str, extents: dict[str, int | None], dots: int = 1) -> dict[str, int]:
    """{"M", "N", "K"} block sizes of a tl.dot over operands of `dtype`; `dots` contractions share
    the K loop (SwiGLU's two projections), each staging its operand tiles in shared memory."""
    elt = element_bytes(dtype)
    sizes = {"M": 128, "N": 128, "K": 64} if elt <= 2 else {"M": 64, "N": 64, "K": 32}
    for axis, size in sizes.items():
        extent = extents.get(axis)
        if extent is not None:
            sizes[axis] = max(LIMITS.dot_min_block, min(size, next_power_of_two(extent)))
    while (PIPELINE_STAGES * dots * (sizes["M"] + sizes["N"]) * sizes["K"] * elt > spec.shared_memory_per_block
           and sizes["K"] > LIMITS.dot_min_block):
        sizes["K"] //= 2
    return sizes


def contraction_warps(sizes: dict[str, int]) -> int:
    return 8 if sizes["M"] * sizes["N"] >= 128 * 128 else 4


def transposed_size(extent: int | None) -> int:
    return min(TRANSPOSE_TILE, next_power_of_two(extent or TRANSPOSE_TILE))


def reduction_size(spec: GpuSpec, dtype: str, extent: int | None) -> tuple[int, int, int]:
    """(block size of the innermost reduction loop, warps, elements left for spatial tiles)."""
    budget = spec.tile_element_budget(element_bytes(dtype), 4) // 2
    size = min(next_power_of_two(extent or UNKNOWN_EXTENT), power_of_two_floor(2 * budget))
    warps = 8 if size > budget else 4
    remaining = power_of_two_floor(max(1, 2 * budget // size if size > budget else budget // size))
    return size, warps, remaining


def spatial_budget(spec: GpuSpec, dtype: str) -> int:
    return spec.tile_element_budget(element_bytes(dtype), 4) // 2


def spatial_size(extent: int | None, remaining: int) -> int:
    return min(next_power_of_two(extent or UNKNOWN_EXTENT), power_of_two_floor(remaining))


def row_tile(extent: int | None) -> tuple[int, bool]:
    """(block size, whole) of a fused sub-nest's column loop: one whole tile when the extent is
    static and fits the widest row tile, else tiles of that width stepped by a serial loop."""
    if extent is not None and extent <= LIMITS.max_row_tile:
        return next_power_of_two(extent), True
    return min(next_power_of_two(extent or UNKNOWN_EXTENT), LIMITS.max_row_tile), False


COLUMN_STEP = 64  # rows per step of a column reduction: 64 columns x 64 rows of loads per program
COLUMN_TILE = 64  # the columns a program of a column reduction holds (ROW_ELEMENTS_PER_PROGRAM / COLUMN_STEP)
COLUMN_PROGRAMS_PER_SM = 4   # programs a column reduction wants per multiprocessor (loads in flight)
MIN_COLUMN_STEPS = 8         # COLUMN_STEP steps each split of a column reduction keeps


def column_splits(spec: GpuSpec, rows: int, programs: int) -> int:
    """How many slices of rows a column reduction's programs are split into (partials summed after):
    doubling while the programs do not fill COLUMN_PROGRAMS_PER_SM per multiprocessor, the slices
    divide the rows and each keeps MIN_COLUMN_STEPS steps (a few MiB of bandwidth-bound loads need
    many programs in flight: 128 column tiles are one per multiprocessor)."""
    splits = 1
    while (programs * splits < COLUMN_PROGRAMS_PER_SM * spec.multiprocessors and splits * 2 <= MAX_SPLITS
           and rows % (splits * 2) == 0 and rows // (splits * 2) >= MIN_COLUMN_STEPS * COLUMN_STEP):
        splits *= 2
    return splits


def column_tile(extent: int | None) -> int:
    return min(COLUMN_TILE, next_power_of_two(extent or COLUMN_TILE))


def column_step(extent: int | None) -> int:
    """The tile of a column reduction's (strided) reduction loop, stepped by a serial loop; the
    fused rows (here: the columns, contiguous) then get ROW_ELEMENTS_PER_PROGRAM / this."""
    return min(COLUMN_STEP, next_power_of_two(extent or COLUMN_STEP))


def fused_rows(widest: int, row_extent: int | None, has_contraction: bool) -> int:
    rows = max(1, power_of_two_floor(max(1, ROW_ELEMENTS_PER_PROGRAM // widest)))
    if has_contraction:
        rows = max(rows, LIMITS.dot_min_block)
    return min(rows, next_power_of_two(row_extent or rows))


def fused_warps(rows: int, widest: int) -> int:
    return max(4, min(16, power_of_two_floor(max(1, rows * widest // 512))))


def online_sizes(dtype: str, rows_extent: int | None, loop_extent: int | None,
                 contraction: bool) -> tuple[int, int, int]:
    """(rows, columns, warps) of an online nest: the rows a program keeps, and the tile of the
    loop its running maximum walks. With a contraction (attention), tl.dot tiles, each at least
    tl.dot's minimum; without (a softmax whose rows are too long for one tile), a row-wise stream:
    wide column tiles and as many rows as a program's element budget allows."""
    if not contraction:
        columns = min(next_power_of_two(loop_extent or UNKNOWN_EXTENT), ROW_ELEMENTS_PER_PROGRAM)
        rows = fused_rows(columns, rows_extent, False)
        return rows, columns, fused_warps(rows, columns)
    rows, columns = (128, 64) if element_bytes(dtype) <= 2 else (64, 32)
    rows = max(LIMITS.dot_min_block, min(rows, next_power_of_two(rows_extent or rows)))
    columns = max(LIMITS.dot_min_block, min(columns, next_power_of_two(loop_extent or columns)))
    return rows, columns, 4   # H200, b4h32s4096d128 fp16: 4 warps 410 TFLOP/s, 8 warps 348 (2026-11-30)


def rows_filling_the_gpu(rows: int, rows_extent: int, other_programs: int, multiprocessors: int) -> int:
    """Fewer rows per program (halving, down to tl.dot's minimum) while twice the programs still
    fit in one wave, one per multiprocessor: softmax(Q·Kᵀ) over 4096 rows would be 32 programs of
    128 rows on 132 multiprocessors; 128 programs of 32 rows keep all busy (each program re-reads
    all keys, so more programs than that cost more than they hide)."""
    while rows > LIMITS.dot_min_block and 2 * other_programs * -(-rows_extent // rows) <= multiprocessors:
        rows //= 2
    return rows


def stepped_size(size: int, rows: int) -> int:
    """The tile of a loop stepped by a serial loop in a program that keeps `rows` rows: within the
    program's element budget (a whole-row tile would not be stepped)."""
    return max(1, min(size, power_of_two_floor(max(1, ROW_ELEMENTS_PER_PROGRAM // rows))))


# --- split-K: the reduction of a contraction split across programs (SplitReduction) ----------------
KERNEL_SECONDS = 5e-6            # a launch, ramp-up and drain (the hardware model's LAUNCH_SECONDS)
# what a split adds beyond its partials' bytes: the sum kernel's launch, the scratch allocation and the
# partial kernel's longer epilogue, measured on the H200 (2026-12-01, benchmarks/sota_sweep.py, 16×4096·4096ᵀ):
# the best split of 2-16 slices took 47.3 µs, the best unsplit tile 20.1 µs
SPLIT_SECONDS = 27e-6
MEMORY_LATENCY_SECONDS = 600e-9  # DRAM latency under load (the hardware model's): Little's law
MIN_SPLIT_STEPS = 4              # K steps of BLOCK_K each split keeps, so its pipeline still fills
MAX_SPLITS = 32


@dataclass(frozen=True)
class SplitPrice:
    """The model's time of a contraction with its K loop split `splits` ways (1: not split)."""

    splits: int
    programs: int
    seconds: float


def split_price(spec: GpuSpec, dtype: str, out_bytes: int, extents: dict[str, int], splits: int,
                batch: int = 1) -> SplitPrice:
    """Operand bytes over the bandwidth the programs' loads in flight sustain (Little's law: a
    program keeps (stages - 1) K steps of operand tiles in flight), or the tensor cores' time, in
    waves of programs; a split adds its fp32 partials' round trip and the reduce kernel's launch.
    `batch`: independent contractions (the other spatial loops, program ids too)."""
    sizes = contraction_sizes(spec, dtype, extents)
    elt = element_bytes(dtype)
    m, n, k = extents["M"], extents["N"], extents["K"]
    tiles = -(-m // sizes["M"]) * -(-n // sizes["N"]) * batch
    programs = tiles * splits
    bandwidth = spec.model_copy_bandwidth_gbs * 1e9
    in_flight = min(programs, spec.multiprocessors * 4) * (PIPELINE_STAGES - 1) * \
        (sizes["M"] + sizes["N"]) * sizes["K"] * elt
    hiding = min(1.0, in_flight / (bandwidth * MEMORY_LATENCY_SECONDS))
    waves = -(-programs // spec.multiprocessors)
    wave_efficiency = programs / (waves * spec.multiprocessors)
    operand_bytes = ((m * k + n * k) * elt + m * n * out_bytes) * batch
    flops = 2 * m * n * k * batch
    peak = (spec.fp16_tensor_tflops or spec.fp32_tflops or 1.0) * 1e12 * 0.7
    seconds = KERNEL_SECONDS + max(operand_bytes / (bandwidth * hiding), flops / (peak * wave_efficiency))
    if splits > 1:
        seconds += SPLIT_SECONDS + 2 * splits * m * n * batch * 4 / bandwidth
    return SplitPrice(splits, programs, seconds)


def split_k_factor(spec: GpuSpec, dtype: str, out_bytes: int, extents: dict[str, int | None],
                   batch: int = 1) -> SplitPrice:
    """The cheapest split of a contraction's K loop by the price above: powers of two that divide K,
    keep MIN_SPLIT_STEPS steps of BLOCK_K per split, and only while the M·N tiles alone do not fill
    the GPU (a split adds work; it pays only by parallelism). Symbolic extents are not split."""
    if any(extents.get(axis) is None for axis in ("M", "N", "K")):
        return SplitPrice(1, 0, 0.0)
    static = {axis: int(extents[axis]) for axis in ("M", "N", "K")}
    best = split_price(spec, dtype, out_bytes, static, 1, batch)
    if best.programs >= spec.multiprocessors:
        return best
    block_k = contraction_sizes(spec, dtype, static)["K"]
    splits = 2
    while splits <= MAX_SPLITS and static["K"] % splits == 0 and static["K"] // splits >= MIN_SPLIT_STEPS * block_k:
        price = split_price(spec, dtype, out_bytes, static, splits, batch)
        if price.seconds < best.seconds:
            best = price
        splits *= 2
    return best
