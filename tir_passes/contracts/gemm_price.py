"""The price of a tiled contraction (a GEMM, or a nest of several tl.dots over one K loop): the
tile size model (tir_passes/passes/tile_sizes.py) ranks its candidate tiles by it and the hardware
model (triton_codegen/hardware_model.py) draws its tensor-core term and its bandwidth ceiling from
the same terms, so the two never disagree on why a tile wins.

A nest (DotNest) is D dots walking one K loop, reading A distinct M×K operand tiles and B distinct
N×K ones per step (a tile read by several dots is loaded and staged once: SwiGLU's X is D = 2,
A = 1, B = 2) and storing O M×N tiles; one GEMM is D = A = B = O = 1.

    per SM    = ceil(P / SMs) programs (tiles) for the busiest SM
    in flight = (stages − 1) × (A × BLOCK_M + B × BLOCK_N) × BLOCK_K × element bytes, per program
    compute   = per SM × (D × tile flops / (tensor peak / SMs) + TILE_SECONDS) + O × stored bytes / copy bandwidth
    memory    = max((operands + outputs) / min(copy bandwidth, resident programs × in flight / latency),
                    per SM × (a program's operand bytes / min(in flight / its latency, L2 bandwidth / SMs)
                              + TILE_SECONDS))
    seconds   = LAUNCH_SECONDS + max(memory, compute)

A candidate whose D fp32 accumulators exceed ACCUMULATOR_ELEMENTS_PER_THREAD at its warps is not
priced (accumulators_fit): it would spill. So two dots of 128×128 are priced as one 128×256 GEMM
(the same flops, operand bytes and accumulator registers per step), and 128×256 per dot is out.

TILE_SECONDS is what a tile costs beyond its tensor-core time (the pipeline's fill, the
accumulator's drain and store), measured on the H200: on 3000×5000×1000 fp16 (2026-12-01 sweep)
128×128 tiles took 103 µs and 128×256 tiles 77.9 µs, which the formula meets with 5.9 µs a tile
and no other free term; it then predicts 203 µs for 4096³ at 128×128 (measured 210) and 180 µs at
128×256 (torch.compile's Triton template, measured 180.5). The memory term is Little's law twice:
over the GPU (the decode step 16×4096·4096ᵀ in 32 programs of 16×128×64 keeps 1.2 MB in flight, half
of what the copy bandwidth needs; predicted 22 µs, measured 39.8) and per program (a long reduction
on few programs). A program's loads wait L2's latency for tiles other programs read too and
STREAM_LATENCY_SECONDS for the share it alone reads from DRAM (stream_latency, as the hardware
model's streaming term), and each tile's fill and drain is paid whatever bounds its steady state:
so priced, the decode step's 23 tiles measured on the H200 (2026-12-02, 32 to 128 programs, 128- to
512-deep K steps, 3 to 6 stages: 16.5 to 28.1 µs, benchmarks/gemm_variants_gpu.py) are within 15%.

Imports nothing that needs TVM (the hardware model runs where the tuner does).
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.gpu_specs import GpuSpec

LAUNCH_SECONDS = 5e-6             # a kernel's launch, ramp-up and drain (the hardware model's)
MEMORY_LATENCY_SECONDS = 600e-9   # DRAM latency under load: Little's law sizes the bytes in flight
# what one program's load that misses L2 waits, streaming (read-once operands: a decode step's
# weights): from the 2026-12-01 split-K run, 16×4096·4096ᵀ in 32 programs of 16×128×64 at 3 stages
# (37 KB in flight each) took 39.8 µs for 1.18 MB a program: 1.1 µs
STREAM_LATENCY_SECONDS = 1.1e-6
TILE_SECONDS = 5.9e-6             # a tile's fixed cost on top of its tensor-core time (see above)
# a persistent program's saving on each tile after its first (no block launch, no cold start), from
# the H200 sweep's 128×128×64 tiles at 4 stages: 99.3 µs one program a tile, 95.5 µs one program an
# SM over 8 tiles each; at 128×256 it lost 1.9 µs (77.9 against 79.8): not a gain the price trusts
PERSISTENT_SAVING_SECONDS = 0.5e-6
CONFIDENCE = 0.1                  # the share of a price a choice must save to become a default
WGMMA_ROWS = 64                   # rows of one warpgroup MMA: the B tile is read once per 64 rows
# a deterministic tl.dot's floors (docs/determinism.md): on sm_90 Triton runs wgmma only where the M tile is a
# multiple of 64 (a warpgroup's rows) and num_warps a multiple of 4 (AccelerateMatmul's MMAv3 condition); else
# mma.sync, another instruction's arithmetic. Applied on every GPU: a module runs one family wherever it runs.
MMA_ROWS = WGMMA_ROWS
MMA_WARPS = 4
# fp32 accumulator elements one thread may hold: the 128×256 tile at 8 warps (torch inductor's widest
# Hopper GEMM tile, and the model's measured best for 4096³); more spills beside the operands' registers
ACCUMULATOR_ELEMENTS_PER_THREAD = 128
MAX_DOT_WARPS = 8


@dataclass(frozen=True)
class DotNest:
    """The tl.dots that walk one K loop: `dots` products over `a_tiles` distinct M×K operand tiles
    and `b_tiles` distinct N×K ones per K step (a tile several dots read is loaded and staged
    once), storing `outputs` M×N tiles. The default is one GEMM."""

    dots: int = 1
    a_tiles: int = 1
    b_tiles: int = 1
    outputs: int = 1
    # how the operand tiles reach the MMA (analyses/dot_nest.operand_staging): the bytes of the element each
    # side's tiles are loaded at (0: the dot's dtype; 4 for an fp32 gradient cast to an fp16 dot in registers),
    # and which side is the MMA's B operand (the one along the output's columns: wgmma reads it from shared memory)
    a_load_bytes: int = 0
    b_load_bytes: int = 0
    mma_b_side: str = "b"

    def staged_elements(self, m: int, n: int, k: int) -> int:
        """Operand elements one K step stages in shared memory (each distinct tile once)."""
        return (self.a_tiles * m + self.b_tiles * n) * k

    def staged_bytes(self, m: int, n: int, k: int, stages: int, element_bytes: int) -> int:
        """Shared memory the operand tiles of `stages` pipeline stages take, as Triton allocates them
        on sm_90 (read from its TTGIR, tests/tir_passes/test_gemm_tiles.py): a tile loaded at the dot's
        dtype is a buffer of `stages` tiles; one loaded at another dtype and cast in registers is a
        buffer of `stages - 1` tiles at its load bytes and, when it is the MMA's B operand, one more
        tile after the cast (matmul's backward dB = Aᵀ·dC with an fp32 dC at 128×256×64, 4 stages:
        98,304 + 16,384 + 131,072 = 245,760 bytes, what the H200 refused on 2026-12-02)."""
        total = 0
        for side, rows, tiles, load in (("a", m, self.a_tiles, self.a_load_bytes),
                                        ("b", n, self.b_tiles, self.b_load_bytes)):
            tile = tiles * rows * k
            if not load or load == element_bytes:
                total += stages * tile * element_bytes
            else:
                total += (stages - 1) * tile * load + (tile * element_bytes if side == self.mma_b_side else 0)
        return total

    def accumulator_elements(self, m: int, n: int) -> int:
        return self.dots * m * n


ONE_GEMM = DotNest()


def accumulators_fit(nest: DotNest, m: int, n: int, warps: int) -> bool:
    """The nest's fp32 accumulators fit the registers of `warps` warps (ACCUMULATOR_ELEMENTS_PER_THREAD)."""
    return nest.accumulator_elements(m, n) <= ACCUMULATOR_ELEMENTS_PER_THREAD * 32 * warps
# How a plain contraction's `_tma` variant (tiles that do not divide: triton_codegen/descriptors.py)
# stores its output tile: "pointers" (masked stores straight from the accumulator's registers) or
# "descriptors" (a TMA store, which stages the whole output tile in shared memory beside the
# pipeline's operand stages). Read by the descriptor plan and by the tile size model, which counts
# the staged tile against shared memory. Pointers, measured on the H200 (2026-11-30 sweep,
# 3000×5000×1000 fp16 into fp32): descriptor loads with masked pointer stores ran 128×256 tiles in
# 77.9 µs, where the staged fp32 tile (128 KB) leaves no room for 3 stages and 128×128 ran 103; as the
# default (128×256, 4 stages: benchmarks/gemm_misses_gpu.py, 2026-12-02) 74.2 µs against 104.6 before.
CONTRACTION_OUTPUT_STORE = "pointers"


@dataclass(frozen=True)
class GemmTiles:
    """A contraction's tiles and pipeline, as the tile size model proposes them."""

    m: int
    n: int
    k: int
    stages: int
    warps: int


@dataclass(frozen=True)
class GemmPrice:
    seconds: float
    programs: int
    bound: str            # "memory" or "compute"
    shared_bytes: float   # shared-memory traffic of all tiles: the tie-break between equal prices


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def peak_flops(spec: GpuSpec) -> float:
    return (spec.fp16_tensor_tflops or spec.fp32_tflops or 1.0) * 1e12


def compute_seconds(spec: GpuSpec, flops_per_program: float, per_sm: int, stored_bytes: float,
                    peak: float | None = None) -> float:
    """The busiest SM's tensor-core time for its programs, each with its fixed cost, then the stores
    of the accumulators (not hidden under the next tile's loads: measured, 60 MB of fp32 output add
    14 µs to 3000×5000×1000)."""
    per_sm_peak = (peak or peak_flops(spec)) / spec.multiprocessors
    return per_sm * (flops_per_program / per_sm_peak + TILE_SECONDS) + stored_bytes / copy_bytes_per_second(spec)


def copy_bytes_per_second(spec: GpuSpec) -> float:
    return spec.model_copy_bandwidth_gbs * 1e9


def stream_bandwidth(spec: GpuSpec, programs: int, in_flight_per_program: float) -> float:
    """Bytes per second the loads of `programs` reach from DRAM: Little's law over the bytes the
    resident ones keep in flight, at most the copy bandwidth."""
    copy = copy_bytes_per_second(spec)
    if not in_flight_per_program:
        return copy
    return min(copy, min(programs, spec.multiprocessors) * in_flight_per_program / MEMORY_LATENCY_SECONDS)


def program_stream_seconds(spec: GpuSpec, per_sm: int, program_bytes: float, in_flight_per_program: float,
                           resident: int = 1, latency: float = MEMORY_LATENCY_SECONDS) -> float:
    """The busiest SM's time to stream its programs' operand tiles (from L2 or DRAM): each program
    keeps `in_flight_per_program` bytes in flight (Little's law), `resident` of them at once, within
    the SM's share of the L2 bandwidth. One 16×16 program walking 65536 K steps streams 4 MiB at
    about 40 GB/s however idle the GPU is: what makes a long reduction on few programs slow.
    `latency`: what a load waits (MEMORY_LATENCY_SECONDS where tiles are re-read from L2, up to
    STREAM_LATENCY_SECONDS where every byte comes from DRAM once)."""
    if not in_flight_per_program:
        return 0.0
    l2_share = (spec.l2_bandwidth_gbs or 2.5 * spec.model_copy_bandwidth_gbs) * 1e9 / spec.multiprocessors
    bandwidth = min(l2_share, max(1, resident) * in_flight_per_program / latency)
    return per_sm * program_bytes / bandwidth


def shared_bytes_per_step(tiles: GemmTiles, element_bytes: int, nest: DotNest = ONE_GEMM) -> int:
    """Shared-memory traffic of one K step, with the MMA oriented as the lowering writes it (the
    output's rows are its M: BLOCK_M, or BLOCK_N of a product written tl.dot(b, a), DotNest.mma_b_side):
    each distinct operand tile written once at the bytes it is loaded at; a tile cast in registers
    (an fp32 gradient in an fp16 dot) read back, and, as the MMA's B operand, written again at the
    dot's dtype (its A operand is read from registers); each dot reading its B tile once per
    WGMMA_ROWS rows of the MMA and a shared A tile once. This is the tie-break between tiles of one
    price: matmul's backward dB = Aᵀ·dC with an fp32 dC costs 208 KB a step at 256 output rows × 128
    columns and 256 KB at 128 × 256, whichever order its factors are written in; measured on the H200
    (2026-12-02 suite runs) 550.4 µs against 639.4 for the backward's two kernels."""
    mma_a = "b" if nest.mma_b_side == "a" else "a"
    sides = {"a": (tiles.m, nest.a_tiles, nest.a_load_bytes), "b": (tiles.n, nest.b_tiles, nest.b_load_bytes)}
    mma_rows = sides[mma_a][0]
    total = 0
    for side, (rows, count, load_bytes) in sides.items():
        tile = rows * tiles.k
        loaded = load_bytes or element_bytes
        total += count * tile * loaded
        cast = loaded != element_bytes
        if cast:
            total += count * tile * loaded + (count * tile * element_bytes if side != mma_a else 0)
        if side != mma_a:
            total += nest.dots * tile * element_bytes * max(1, mma_rows // WGMMA_ROWS)
        elif not cast:
            total += nest.dots * tile * element_bytes
    return total


def gemm_price(spec: GpuSpec, element_bytes: int, out_bytes: int, extents: dict[str, int], tiles: GemmTiles,
               batch: int = 1, nest: DotNest = ONE_GEMM) -> GemmPrice:
    """The model's time of C[M, N] = A[M, K]·B[K, N] (or of the nest's dots, DotNest) at these
    tiles, `batch` times over (the other spatial loops, program ids too)."""
    m, n, k = extents["M"], extents["N"], extents["K"]
    programs = cdiv(m, tiles.m) * cdiv(n, tiles.n) * batch
    steps = cdiv(k, tiles.k)
    per_sm = cdiv(programs, spec.multiprocessors)
    in_flight = max(1, tiles.stages - 1) * nest.staged_elements(tiles.m, tiles.n, tiles.k) * element_bytes
    operand_bytes = nest.staged_elements(m, n, k) * element_bytes * batch
    stored = nest.outputs * m * n * out_bytes * batch
    program_bytes = nest.staged_elements(tiles.m, tiles.n, tiles.k) * steps * element_bytes
    streamed = program_stream_seconds(spec, per_sm, program_bytes, in_flight,
                                      latency=stream_latency(extents, tiles, nest)) + per_sm * TILE_SECONDS
    memory = max((operand_bytes + stored) / stream_bandwidth(spec, programs, in_flight), streamed)
    compute = compute_seconds(spec, nest.dots * 2.0 * tiles.m * tiles.n * tiles.k * steps, per_sm, stored)
    shared = float(programs * steps * shared_bytes_per_step(tiles, element_bytes, nest))
    bound = "memory" if memory > compute else "compute"
    return GemmPrice(LAUNCH_SECONDS + max(memory, compute), programs, bound, shared)


def stream_latency(extents: dict[str, int], tiles: GemmTiles, nest: DotNest = ONE_GEMM) -> float:
    """What a program's operand loads wait, as the hardware model prices it (hardware_model._stream_latency):
    L2's latency for tiles other programs read too, STREAM_LATENCY_SECONDS for the share of the loaded
    bytes that come from DRAM once. An operand's tile is read by every program along the other output
    axis, so it is read once where that axis is one tile (a decode step's weights: the 16 rows of X
    are one M tile, each N×K tile of W is read by one program)."""
    m_tiles, n_tiles = cdiv(extents["M"], tiles.m), cdiv(extents["N"], tiles.n)
    a, b = nest.a_tiles * tiles.m, nest.b_tiles * tiles.n
    once = (a if n_tiles == 1 else 0) + (b if m_tiles == 1 else 0)
    share = once / (a + b) if a + b else 0.0
    return MEMORY_LATENCY_SECONDS * (1 - share) + STREAM_LATENCY_SECONDS * share


def staged_output_bytes(m: int, n: int, out_bytes: int, divides: bool) -> int:
    """Shared memory the output tile of an m×n contraction tile takes beside its operand stages:
    only the descriptor variant stages it, which runs where the tiles do not divide, and only when
    CONTRACTION_OUTPUT_STORE is "descriptors"."""
    return 0 if divides or CONTRACTION_OUTPUT_STORE == "pointers" else m * n * out_bytes


def persistent_saving(per_sm: int) -> float:
    """What a persistent grid (one program an SM walking its tiles) saves over a program a tile."""
    return max(0, per_sm - 1) * PERSISTENT_SAVING_SECONDS


def persistent_default(spec: GpuSpec, tiles: int) -> int:
    """The default programs per SM of a kernel written persistent (0: a program a tile): 1 where the
    saving is CONFIDENCE of the tiles' fixed costs alone (a lower bound of the kernel's time). With
    PERSISTENT_SAVING_SECONDS under a tenth of TILE_SECONDS it never is: the tuner times both."""
    per_sm = cdiv(tiles, spec.multiprocessors)
    return 1 if persistent_saving(per_sm) > CONFIDENCE * per_sm * TILE_SECONDS else 0
