"""The block-size model of the Tiling pass: powers of two sized from the GPU spec table.

- contractions (tl.dot): BLOCK_M/N/K of 128/128/64 for 16-bit data and 64/64/32 for fp32, each at
  least tl.dot's minimum and at most the extent's next power of two, BLOCK_K halved until the
  pipelined operand tiles fit the GPU's shared memory (the base); with static extents, narrower
  tiles that fill the GPU (at deeper K steps and more stages where they fill half a wave: the bytes
  a memory-bound walk keeps in flight) or wider ones on sm_90 where the GEMM price
  (contracts/gemm_price.py) says they save CONFIDENCE of its time; split-K's price (SplitReduction) at the end; a
  deterministic kernel whose only sums are tl.dots the same choice with BLOCK_K pinned and BLOCK_M
  and the warps at least what keeps the MMA instruction (deterministic_tiles);
- transposed nests: square tiles over the two loops the loads and the stores are contiguous along;
- other nests: the innermost reduction loop as one tile up to a register budget (8 warps when a
  row is longer than what 4 warps hold), then the innermost spatial loops within what is left;
- fused rows: whole-row tiles (up to the widest row tile), as many rows as fit 4096 elements (warps: row_registers);
- column reductions (the reduced axis strided in every load): 64 columns stepped down 64 rows, and
  the rows split into partials while the programs do not fill the GPU (column_splits);
- online nests (a running maximum with sums over the same loop, OnlineSoftmax): that loop in
  tiles of 64 (32 for fp32) beside rows of 128 (64), the shape of flash attention's tiles; on
  sm_90 with 16-bit operands, 128 keys with 8 warps and 3 stages where they fit (measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.gemm_price import (MAX_DOT_WARPS, MMA_ROWS, MMA_WARPS, ONE_GEMM, DotNest, GemmTiles,
                                             accumulators_fit, gemm_price, staged_output_bytes)
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.analyses.nest import next_power_of_two, power_of_two_floor
from tir_passes.analyses.row_registers import held_row_values, row_warps
from tir_passes.infra.dtypes import element_bytes
from tir_passes.passes.filling_tiles import (FILL_BLOCK_K, FILL_DEPTHS, FILL_STAGE_CHOICES, FILL_STAGES,  # noqa: F401
                                             MMA_BARRIER_BYTES, candidates_filling, contraction_warps, fits)
from tir_passes.contracts.backend_limits import BackendLimits

TRANSPOSE_TILE = 64
PIPELINE_STAGES = 3
# stages of the wide sm_90 tiles where they fit: on the H200 (2026-12-02, gemm_tiles_gpu.py) 128×256×64
# ran 4096³ in 199.0 µs at 4 stages against 205.2 at 3, 8192×11008×4096 in 1087.9 against 1101.7
# (256×128×64 at 4: 1049.5), and 3000×5000×1000 with pointer stores 79.0 against 77.9 (2026-12-01); again
# on 2026-12-02 (benchmarks/gemm_misses_gpu.py): 4096³ 198.5 against 206.0, 8192×11008×4096 1005.0 against 1009.1.
# The final suite run of 2026-12-02 found matmul's backward at 4 stages asking for 245,760 bytes of shared
# memory where the price counted 196,608 (OutOfResources on the H200): its fp32 dC is staged at 4 bytes and
# cast to fp16 in registers, and as dB = Aᵀ·dC's MMA B operand staged again after the cast. The price counts
# that now (DotNest.staged_bytes): 4 stages where they fit, 3 where they do not (dB; dA's 229,432 fit).
WIDE_STAGES = 4
CONFIDENCE = 0.1     # the share of the base's price another tile must save to replace it
ROW_ELEMENTS_PER_PROGRAM = 4096
UNKNOWN_EXTENT = 1024   # the size a symbolic extent is planned for


def contraction_sizes(spec: GpuSpec, dtype: str, extents: dict[str, int | None], nest: DotNest = ONE_GEMM,
                      batch: int = 1, out_bytes: int = 4) -> dict[str, int]:
    """{"M", "N", "K"} block sizes of a tl.dot over operands of `dtype` (contraction_tiles)."""
    tiles = contraction_tiles(spec, dtype, extents, nest, batch, out_bytes)
    return {"M": tiles.m, "N": tiles.n, "K": tiles.k}


def base_sizes(spec: GpuSpec, dtype: str, extents: dict[str, int | None], nest: DotNest = ONE_GEMM) -> dict[str, int]:
    """128/128/64 for 16-bit data and 64/64/32 for fp32, each at least tl.dot's minimum and at most
    the extent's next power of two; for a nest of several dots (SwiGLU's two projections) the wider
    of BLOCK_M and BLOCK_N halved until their accumulators fit MAX_DOT_WARPS warps' registers; then
    BLOCK_K halved until the pipelined operand tiles fit, each distinct tile staged once."""
    elt, limits = element_bytes(dtype), spec.limits
    sizes = {"M": 128, "N": 128, "K": 64} if elt <= 2 else {"M": 64, "N": 64, "K": 32}
    for axis, size in sizes.items():
        extent = extents.get(axis)
        if extent is not None:
            sizes[axis] = max(limits.dot_min_block, min(size, next_power_of_two(extent)))
    while not accumulators_fit(nest, sizes["M"], sizes["N"], MAX_DOT_WARPS) and \
            max(sizes["M"], sizes["N"]) > limits.dot_min_block:
        sizes["N" if sizes["N"] >= sizes["M"] else "M"] //= 2
    while not fits(spec, elt, sizes, PIPELINE_STAGES, nest) and sizes["K"] > limits.dot_min_block:
        sizes["K"] //= 2
    return sizes


def contraction_tiles(spec: GpuSpec, dtype: str, extents: dict[str, int | None], nest: DotNest = ONE_GEMM,
                      batch: int = 1, out_bytes: int = 4) -> GemmTiles:
    """The base tiles, or the candidate the GEMM price (contracts/gemm_price.py) finds cheaper:
    wide tiles (candidates_wide) or, where the tiles are fewer than the SMs, narrow ones
    (candidates_filling). Symbolic extents keep the base. Ties go to the one with less
    shared-memory traffic; the base stays unless the best is CONFIDENCE cheaper (tiny
    contractions, all launch, keep their tiles). A nest of several dots (DotNest) is priced as a
    whole: its dots' flops, its distinct operand tiles, its accumulators."""
    elt = element_bytes(dtype)
    sizes = base_sizes(spec, dtype, extents, nest)
    base = GemmTiles(sizes["M"], sizes["N"], sizes["K"], PIPELINE_STAGES, contraction_warps(sizes, nest))
    if any(extents.get(axis) is None for axis in ("M", "N", "K")):
        return base
    static = {axis: int(extents[axis]) for axis in ("M", "N", "K")}
    candidates = [base] + candidates_wide(spec, elt, static, base, nest, out_bytes) + \
        candidates_filling(spec, elt, static, base, nest, batch)
    return _cheapest(spec, elt, out_bytes, static, candidates, batch, nest)


def deterministic_tiles(spec: GpuSpec, dtype: str, extents: dict[str, int | None], nest: DotNest = ONE_GEMM,
                        batch: int = 1, out_bytes: int = 4) -> GemmTiles:
    """The tiles of a deterministic kernel whose only order-sensitive sums are tl.dots
    (docs/determinism.md). BLOCK_K is the base's for the dtype whatever the extents (64 for 16-bit
    operands, 32 for fp32, halved only to fit the spec's shared memory at 128×128): the one tile
    that fixes the order an element's partial products are added in, pinned. The output's rows (the
    MMA's M: BLOCK_M, or BLOCK_N of a product the lowering writes as tl.dot(b, a), DotNest.mma_b_side)
    are at least MMA_ROWS and the warps at least MMA_WARPS, so that Triton keeps one MMA family (wgmma
    on sm_90; a narrower tile or fewer warps would run mma.sync). Within that, the choice without
    the flag at this K (the base, the wide tiles, the filling ones, by the GEMM price): the M and N
    tiles, warps and stages do not enter an element's arithmetic, so they may follow the extents and
    the spec's SM count as the plan without the flag does."""
    elt, rows = element_bytes(dtype), "M" if nest.mma_b_side == "b" else "N"   # the output's rows: the MMA's M
    k = base_sizes(spec, dtype, {}, nest)["K"]
    sizes = {**base_sizes(spec, dtype, {"M": extents.get("M"), "N": extents.get("N")}, nest), "K": k}
    sizes[rows] = max(MMA_ROWS, sizes[rows])
    base = GemmTiles(sizes["M"], sizes["N"], k, PIPELINE_STAGES, max(MMA_WARPS, contraction_warps(sizes, nest)))
    if any(extents.get(axis) is None for axis in ("M", "N", "K")):
        return base
    static = {axis: int(extents[axis]) for axis in ("M", "N", "K")}
    candidates = [base] + candidates_wide(spec, elt, static, base, nest, out_bytes) + \
        candidates_filling(spec, elt, static, base, nest, batch, block_k=k)
    kept = [t for t in candidates if t.k == k and (t.m if rows == "M" else t.n) >= MMA_ROWS and t.warps >= MMA_WARPS]
    return _cheapest(spec, elt, out_bytes, static, kept, batch, nest)


def _cheapest(spec: GpuSpec, elt: int, out_bytes: int, static: dict[str, int], candidates: list[GemmTiles],
              batch: int, nest: DotNest) -> GemmTiles:
    """The first candidate (the base) unless another is CONFIDENCE cheaper by the GEMM price; ties
    to less shared-memory traffic, then to the earlier candidate."""
    prices = [gemm_price(spec, elt, out_bytes, static, tiles, batch, nest) for tiles in candidates]
    best = min(range(len(candidates)), key=lambda i: (round(prices[i].seconds, 9), prices[i].shared_bytes, i))
    return candidates[best] if prices[best].seconds < (1 - CONFIDENCE) * prices[0].seconds else candidates[0]


def candidates_wide(spec: GpuSpec, elt: int, extents: dict[str, int], base: GemmTiles, nest: DotNest = ONE_GEMM,
                    out_bytes: int = 4) -> list[GemmTiles]:
    """128×256 and 256×128 tiles of 16-bit data where the extents hold them and the stages fit
    (WIDE_STAGES where they fit, else PIPELINE_STAGES), on
    GPUs whose tensor cores read both operands from shared memory (sm_90's wgmma: the 128×256 fp32
    accumulator is the only large register tile). Learnt from the H200 sweeps (docs/benchmarks.md):
    128×256 tiles ran 4096³ in 197 µs against 210 at 128×128; torch inductor's Hopper configs lead
    with the same shape. Where the tiles do not divide the extents the launcher runs the
    descriptor variant; where that variant stages the output tile (gemm_price.staged_output_bytes)
    a wide tile is a candidate only if the tile fits too (3000×5000×1000 into fp32 needed 278,552
    bytes of 232,448; its pointer fallback ran 183 µs against 104 at 128×128, H200 2026-12-02).
    Only where the nest's accumulators fit 8 warps: two dots of 128×256 would hold 256 fp32 values
    a thread."""
    if elt > 2 or spec.compute_capability < 90 or (base.m, base.n) != (128, 128):
        return []
    found = []
    for m, n in ((128, 256), (256, 128)):
        sizes = {"M": m, "N": n, "K": base.k}
        divides = extents["M"] % m == 0 and extents["N"] % n == 0 and extents["K"] % base.k == 0
        staged_output = staged_output_bytes(m, n, out_bytes, divides)
        if next_power_of_two(extents["M"]) < m or next_power_of_two(extents["N"]) < n or \
                not accumulators_fit(nest, m, n, MAX_DOT_WARPS):
            continue
        stages = next((s for s in (WIDE_STAGES, PIPELINE_STAGES) if fits(spec, elt, sizes, s, nest, staged_output)),
                      None)
        if stages is not None:
            found.append(GemmTiles(m, n, base.k, stages, 8))
    return found


def tile_notes(spec: GpuSpec, dtype: str, extents: dict[str, int | None], nest: DotNest, tiles: GemmTiles,
               batch: int, out_bytes: int) -> list[str]:
    """Why a contraction's tiles are not the base ones, with the GEMM price of both (the dump's
    decision lines); nothing when they are."""
    base = base_sizes(spec, dtype, extents, nest)
    if (base["M"], base["N"], base["K"]) == (tiles.m, tiles.n, tiles.k):
        return []
    static = {axis: int(extents[axis]) for axis in ("M", "N", "K")}
    elt = element_bytes(dtype)
    was = gemm_price(spec, elt, out_bytes, static,
                     GemmTiles(base["M"], base["N"], base["K"], PIPELINE_STAGES, contraction_warps(base, nest)), batch,
                     nest)
    now = gemm_price(spec, elt, out_bytes, static, tiles, batch, nest)
    why = "fill the GPU" if was.programs < spec.multiprocessors else "fewer, wider tiles"
    return [f"contraction tiles {tiles.m}x{tiles.n}x{tiles.k}, {tiles.stages} stages, {tiles.warps} warps "
            f"({why}: {now.programs} programs, {now.seconds * 1e6:.1f} us by the GEMM price) instead of "
            f"{base['M']}x{base['N']}x{base['K']} ({was.programs} programs, {was.seconds * 1e6:.1f} us) on {spec.name}"]


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


def row_tile(extent: int | None, limits: BackendLimits) -> tuple[int, bool]:
    """(block size, whole) of a fused sub-nest's column loop: one whole tile when the extent is
    static and fits the widest row tile, else tiles of that width stepped by a serial loop."""
    if extent is not None and extent <= limits.max_row_tile:
        return next_power_of_two(extent), True
    return min(next_power_of_two(extent or UNKNOWN_EXTENT), limits.max_row_tile), False


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


def fused_rows(widest: int, row_extent: int | None, has_contraction: bool, limits: BackendLimits) -> int:
    rows = max(1, power_of_two_floor(max(1, ROW_ELEMENTS_PER_PROGRAM // widest)))
    if has_contraction:
        rows = max(rows, limits.dot_min_block)
    return min(rows, next_power_of_two(row_extent or rows))


def fused_warps(rows: int, widest: int, sites=()) -> int:
    """Of a program of rows x widest elements whose blocks are `sites` (row_registers.row_warps)."""
    return row_warps(rows * widest, held_row_values(sites))


def online_sizes(spec: GpuSpec, dtype: str, rows_extent: int | None, loop_extent: int | None,
                 contraction: bool, limits: BackendLimits, depth: int | None = None,
                 masked: bool = True, online: bool = True) -> tuple[int, int, int, int]:
    """(rows, columns, warps, stages) of an online nest: the rows a program keeps, and the tile of
    the loop its running maximum walks. With a contraction (attention; `depth`: its other axis,
    the head dimension), tl.dot tiles, each at least tl.dot's minimum; without (a softmax whose
    rows are too long for one tile), a row-wise stream: wide column tiles and as many rows as a
    program's element budget allows; a batched contraction (no tl.dot: decode attention, its rows
    the heads, each with its own keys) is such a stream whose products also span `depth`, so the
    budget holds rows × columns × depth. `masked`: the walk selects on its position (a causal or
    windowed walk, analyses/masked_walk.py); only those take the wide key tiles. `online`: an
    online softmax's walk (one resident tile, the keys and values per stage), not a backward's
    streamed walk (two resident tiles)."""
    if not contraction:
        per_column = next_power_of_two(depth) if depth else 1
        columns = min(next_power_of_two(loop_extent or UNKNOWN_EXTENT), max(1, ROW_ELEMENTS_PER_PROGRAM // per_column))
        rows = fused_rows(columns * per_column, rows_extent, False, limits)
        return rows, columns, fused_warps(rows, columns * per_column), 2
    (rows, columns), warps, stages = ((128, 64) if element_bytes(dtype) <= 2 else (64, 32)), 4, 2
    if masked and _wide_key_tiles_fit(spec, dtype, depth):
        columns, warps, stages = 128, 8, PIPELINE_STAGES
    elif online and _wide_fp32_tiles_fit(spec, dtype, depth):
        rows, columns, warps = 128, 64, 8
    rows = max(limits.dot_min_block, min(rows, next_power_of_two(rows_extent or rows)))
    columns = max(limits.dot_min_block, min(columns, next_power_of_two(loop_extent or columns)))
    return rows, columns, warps, stages


def _wide_key_tiles_fit(spec: GpuSpec, dtype: str, depth: int | None) -> bool:
    """128 rows × 128 keys, 8 warps, 3 stages: on the H200 (2026-12-01, b4h32s4096d128 fp16,
    benchmarks/results/2026-12-01-h200-sota-sweep.json) 1197 µs causal against 1234 at 128×64,
    4 warps, 2 stages, and 2193 against 2186 unmasked, with descriptors (what attention runs,
    triton_codegen/descriptors.py); on pointers 1283 against 1321 and 2284 against 2255; each
    knob alone lost (128 keys with 4 warps 4420 µs, 3 stages alone 2346). Only on sm_90 (the GPU
    measured), for 16-bit operands, and where the query tile and the stages' key and value tiles
    fit the program's shared memory (head dimension known; 4 stages did not fit). Unmasked walks
    keep 128×64 / 4 warps / 2 stages: on 2026-12-02 they ran 2103 µs against 2244 at 128×128
    (2159 on pointers), and causal ran 1257 µs against 1431 at 128×64 (benchmarks/attention_gpu.py)."""
    if spec.compute_capability < 90 or element_bytes(dtype) > 2 or depth is None:
        return False
    depth = next_power_of_two(depth)
    return (128 + PIPELINE_STAGES * 2 * 128) * depth * element_bytes(dtype) <= spec.shared_memory_per_block


def _wide_fp32_tiles_fit(spec: GpuSpec, dtype: str, depth: int | None) -> bool:
    """128 rows × 64 keys, 8 warps, 2 stages for 4-byte operands (TF32 or fp32 dots) on sm_90, where
    the query tile and two stages of key and value tiles fit the program's shared memory (head
    dimension known). Measured on an H100 (2026-12-07, fp32 attention b4h32s4096d128 under
    float32_matmul_precision "high", benchmarks/config_sweep.py, JSON
    benchmarks/results/2026-12-07-h100-fp32-attention-configs.json): 9.85 ms against 14.1 at 64×32,
    4 warps, 2 stages in the suite run of the same call (the sweep's 14.2; the 16-bit tiles' halves); 128×32 at 3 stages
    10.3, 64-row tiles 14.2-20.9. Measured only under TF32 ("high"), unmasked, head dimension 128."""
    if spec.compute_capability < 90 or element_bytes(dtype) != 4 or depth is None:
        return False
    depth = next_power_of_two(depth)
    return (128 + 2 * 2 * 64) * depth * element_bytes(dtype) <= spec.shared_memory_per_block


def key_tiles_widen(dtype: str) -> bool:
    """Whether a walk whose rows Tiling halves to fill the GPU takes key tiles as much wider (the same
    elements a tile, 3 stages): 16-bit operands only; 4-byte ones at twice the keys and 3 stages
    overflow shared memory (fp32 attention b1 h8 s1024 d128: 64 × 128 keys, 426 KB)."""
    return element_bytes(dtype) <= 2


def rows_filling_the_gpu(rows: int, rows_extent: int, other_programs: int, spec: GpuSpec) -> int:
    """Fewer rows per program (halving, down to tl.dot's minimum) while twice the programs still
    fit in one wave, one per multiprocessor: softmax(Q·Kᵀ) over 4096 rows would be 32 programs of
    128 rows on 132 multiprocessors; 128 programs of 32 rows keep all busy (each program re-reads
    all keys, so more programs than that cost more than they hide)."""
    while rows > spec.limits.dot_min_block and 2 * other_programs * -(-rows_extent // rows) <= spec.multiprocessors:
        rows //= 2
    return rows


def stepped_size(size: int, rows: int) -> int:
    """The tile of a loop stepped by a serial loop in a program that keeps `rows` rows: within the
    program's element budget (a whole-row tile would not be stepped)."""
    return max(1, min(size, power_of_two_floor(max(1, ROW_ELEMENTS_PER_PROGRAM // rows))))


# --- split-K: the reduction of a contraction split across programs (SplitReduction) ----------------
# what a split adds beyond its partials' bytes: the sum kernel's launch, the scratch allocation and the
# partial kernel's longer epilogue, measured on the H200 (2026-12-01, benchmarks/sota_sweep.py, 16×4096·4096ᵀ):
# the best split of 2-16 slices took 47.3 µs, the best unsplit tile 20.1 µs. Timed through run(), which then
# took its full path (argument checks, launchers) on every call of a module with scratch buffers; since
# 2026-12-07 a repeated call replays them (launch_replay.py); re-measured then (H100, benchmarks/split_k_gpu.py): run()
# 16-30 us above a CUDA graph of the split module, about this constant, which stays
SPLIT_SECONDS = 27e-6
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
    """The GEMM price (contracts/gemm_price.py) of the partial kernel: K/splits deep, `splits`
    times the programs, at the tiles the size model gives it; a split adds its fp32 partials' round
    trip and SPLIT_SECONDS. `batch`: independent contractions (the other spatial loops)."""
    elt = element_bytes(dtype)
    m, n = extents["M"], extents["N"]
    sliced = {"M": m, "N": n, "K": -(-extents["K"] // splits)}
    tiles = contraction_tiles(spec, dtype, sliced, ONE_GEMM, batch * splits, 4 if splits > 1 else out_bytes)
    price = gemm_price(spec, elt, 4 if splits > 1 else out_bytes, sliced, tiles, batch * splits)
    seconds = price.seconds
    if splits > 1:
        seconds += SPLIT_SECONDS + 2 * splits * m * n * batch * 4 / (spec.model_copy_bandwidth_gbs * 1e9)
    return SplitPrice(splits, price.programs, seconds)


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

