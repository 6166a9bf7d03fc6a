"""The filling tiles of the contraction tile size model (tile_sizes.py): where a contraction's base
tiles are fewer than the SMs (a GEMV-like shape such as a decode step's linear layer), narrower
tiles that fill the GPU, offered at deeper K steps and more stages where they fill half a wave, for
the GEMM price (contracts/gemm_price.py) to choose the bytes a memory-bound walk keeps in flight;
with the shared-memory fit and the warps that every contraction candidate is checked and given by.
Imports nothing of the Tiling pass (tile_sizes.py imports from here)."""

from __future__ import annotations

from tir_passes.analyses.nest import next_power_of_two
from tir_passes.contracts.gemm_price import MAX_DOT_WARPS, ONE_GEMM, DotNest, GemmTiles, accumulators_fit
from tir_passes.contracts.gpu_specs import GpuSpec

FILL_BLOCK_K = 128   # the shallowest K step of a contraction narrowed to fill the GPU (H200 decode probes)
FILL_STAGES = 4      # and its stages: the loads of a memory-bound loop in flight (the same probes)
# the deeper steps and other stage counts offered beside them, for the GEMM price to choose the bytes in
# flight: on the H200 (2026-12-02, benchmarks/gemm_variants_gpu.py) the decode step 16×4096·4096ᵀ ran
# 20.3 µs at 16×32×128 and 4 stages (37 KB in flight a program), 17.2 at 16×32×256, 16.5 at 16×32×512
# and 3 stages (98 KB), 16.7 at 16×32×256 and 6 stages; cuBLAS 19.2, a copy of its bytes 12.9
FILL_DEPTHS = (1, 2, 4)          # K steps of FILL_BLOCK_K times these
FILL_STAGE_CHOICES = (3, 4, 6)
MIN_FILL_STEPS = 4   # K steps a deeper filling tile keeps (split-K's MIN_SPLIT_STEPS)
MMA_BARRIER_BYTES = 64   # the pipeline's mbarriers beside the stages (Triton reported 32 to 56 bytes more)


def fits(spec: GpuSpec, elt: int, sizes: dict[str, int], stages: int, nest: DotNest, extra_bytes: int = 0) -> bool:
    staged = nest.staged_bytes(sizes["M"], sizes["N"], sizes["K"], stages, elt)
    return staged + extra_bytes + MMA_BARRIER_BYTES <= spec.shared_memory_per_block


def candidates_filling(spec: GpuSpec, elt: int, extents: dict[str, int], base: GemmTiles,
                       nest: DotNest = ONE_GEMM, batch: int = 1, block_k: int | None = None) -> list[GemmTiles]:
    """Where the base tiles are fewer than the SMs (a GEMV-like shape such as a decode step's
    linear layer): the wider of the M and N tiles halved, one step at a time, down to tl.dot's
    minimum and while the tiles still fit one wave, each with K steps of FILL_BLOCK_K (or
    `block_k`, a deterministic kernel's pinned K) and FILL_STAGES stages (a memory-bound loop keeps
    more bytes in flight)."""
    def programs(m: int, n: int) -> int:
        return -(-extents["M"] // m) * -(-extents["N"] // n) * batch

    if programs(base.m, base.n) >= spec.multiprocessors:
        return []
    k = block_k or max(base.k, min(FILL_BLOCK_K, next_power_of_two(extents["K"])))
    m, n, found = base.m, base.n, []
    while True:
        axis = "N" if n >= m else "M"
        m2, n2 = (m, n // 2) if axis == "N" else (m // 2, n)
        if min(m2, n2) < spec.limits.dot_min_block or programs(m2, n2) > spec.multiprocessors:
            break
        m, n = m2, n2
        stages, step = FILL_STAGES, k
        while not fits(spec, elt, {"M": m, "N": n, "K": step}, stages, nest) and step > base.k:
            step //= 2
        warps = contraction_warps({"M": m, "N": n}, nest, 4)
        found.append(GemmTiles(m, n, step, stages, warps))
        if 2 * programs(m, n) >= spec.multiprocessors:
            found += _deeper_fills(spec, elt, extents, GemmTiles(m, n, step, stages, warps), nest, block_k is not None)
    if found or k == base.k:
        return found
    if not fits(spec, elt, {"M": base.m, "N": base.n, "K": k}, FILL_STAGES, nest):
        return []
    deeper = GemmTiles(base.m, base.n, k, FILL_STAGES, base.warps)
    if 2 * programs(base.m, base.n) >= spec.multiprocessors:
        return [deeper] + _deeper_fills(spec, elt, extents, deeper, nest, block_k is not None)
    return [deeper]


def _deeper_fills(spec: GpuSpec, elt: int, extents: dict[str, int], tiles: GemmTiles, nest: DotNest,
                  pinned_k: bool) -> list[GemmTiles]:
    """A filling tile at the other K steps (FILL_DEPTHS; not where a deterministic kernel pins K)
    and stages (FILL_STAGE_CHOICES) that fit shared memory and keep MIN_FILL_STEPS steps: the
    bytes in flight a memory-bound walk needs are the GEMM price's to choose. Offered only where the
    tiles fill at least half a wave (the caller): there the GPU-wide bytes in flight bound the walk;
    a few programs walking long reductions are split-K's (SplitReduction, measured 5.7× faster on
    16×128×32768), which these deeper steps would otherwise price out unmeasured."""
    depths = (tiles.k,) if pinned_k else tuple(tiles.k * d for d in FILL_DEPTHS)
    found = []
    for step, stages in ((s, n) for s in depths for n in FILL_STAGE_CHOICES):
        if (step, stages) == (tiles.k, tiles.stages) or step > next_power_of_two(extents["K"]) or \
                cdiv_steps(extents["K"], step) < min(stages, MIN_FILL_STEPS):
            continue
        if fits(spec, elt, {"M": tiles.m, "N": tiles.n, "K": step}, stages, nest):
            found.append(GemmTiles(tiles.m, tiles.n, step, stages, tiles.warps))
    return found


def cdiv_steps(extent: int, step: int) -> int:
    return -(-extent // step)


def contraction_warps(sizes: dict[str, int], nest: DotNest = ONE_GEMM, small: int = 4) -> int:
    """8 warps (two warpgroups) once the nest's accumulators reach a 128×128 tile's (two dots of
    128×64 hold as many as one of 128×128), else `small`; never fewer than its accumulators need."""
    warps = MAX_DOT_WARPS if nest.accumulator_elements(sizes["M"], sizes["N"]) >= 128 * 128 else small
    while warps < MAX_DOT_WARPS and not accumulators_fit(nest, sizes["M"], sizes["N"], warps):
        warps *= 2
    return warps
