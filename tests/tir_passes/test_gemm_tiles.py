"""The contraction tile size model: the GEMM price (tir_passes/contracts/gemm_price.py) narrows the
tiles of GEMV-like shapes to fill the GPU, widens those of large 16-bit GEMMs on sm_90, and leaves
square shapes' tiles as wide as they were."""

import os
import sys

from tvm import s_tir, tirx
from tvm.script import tirx as T
import tvm_ffi

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

from matmul import make_matmul  # noqa: E402

from tir_passes.contracts.gemm_price import GemmTiles, gemm_price  # noqa: E402
from tir_passes.contracts.gpu_specs import gpu_spec  # noqa: E402
from tir_passes.contracts.tile_contract import DECISIONS_KEY, kernel_tile, loop_tile  # noqa: E402
from tir_passes.infra.pass_util import top_level_statements  # noqa: E402
from tir_passes.passes.tile_sizes import base_sizes, contraction_tiles  # noqa: E402
from tir_passes.passes import tile_sizes  # noqa: E402
from tir_passes.passes.tiling import tile_function  # noqa: E402

H200, A100 = gpu_spec("H200"), gpu_spec("A100")


def _programs(extents, tiles):
    m, n = (tiles["M"], tiles["N"]) if isinstance(tiles, dict) else (tiles.m, tiles.n)
    return -(-extents["M"] // m) * -(-extents["N"] // n)


def test_gemv_like_shapes_get_narrower_tiles_deeper_steps_and_more_stages():
    for m, n, k in ((16, 4096, 4096), (4096, 16, 4096), (8, 2048, 8192)):   # decode step, its transpose, another
        extents = {"M": m, "N": n, "K": k}
        base = base_sizes(H200, "float16", extents)
        tiles = contraction_tiles(H200, "float16", extents, out_bytes=2)
        assert tiles.m * tiles.n < base["M"] * base["N"], (extents, tiles)
        assert tiles.k >= tile_sizes.FILL_BLOCK_K and tiles.stages in tile_sizes.FILL_STAGE_CHOICES
        # deeper than the first fill rule's 128-deep steps at 4 stages (the decode step's 20.3 µs on the H200)
        in_flight = (tiles.stages - 1) * (tiles.m + tiles.n) * tiles.k
        assert in_flight > 3 * (tiles.m + tiles.n) * tile_sizes.FILL_BLOCK_K
        assert _programs(extents, base) < _programs(extents, tiles) <= H200.multiprocessors
        priced = [gemm_price(H200, 2, 2, extents, t).seconds
                  for t in (tiles, GemmTiles(base["M"], base["N"], base["K"], 3, 4))]
        assert priced[0] < 0.9 * priced[1]


def _measured_decode_variants():
    """The decode step's pointer-kernel variants timed on the H200 (benchmarks/gemm_variants_gpu.py)."""
    import json

    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results",
                        "2026-12-02-h200-gemm-variants.json")
    with open(path) as handle:
        rows = json.load(handle)
    return [r for r in rows if r["case"].startswith("linear_decode") and r["variant"].startswith("pointers")
            and "us" in r and r["config"]["num_warps"] == 4]


def test_the_price_follows_the_decode_steps_measured_tiles():
    """The GEMM price of the decode step 16×4096·4096ᵀ at each measured tile of a wave or less
    (32 programs of 128 columns to 128 of 32) within 15% of its time, and the tile it picks within
    5% of the fastest measured: the bytes a program keeps in flight, over the latency of a stream
    read once (STREAM_LATENCY_SECONDS), bound each program's walk."""
    extents = {"M": 16, "N": 4096, "K": 4096}
    rows = [r for r in _measured_decode_variants() if r["config"]["BLOCK_N"] >= 32]
    assert len(rows) >= 10
    for row in rows:
        c = row["config"]
        price = gemm_price(H200, 2, 2, extents, GemmTiles(16, c["BLOCK_N"], c["BLOCK_K"], c["num_stages"], 4))
        assert 0.85 < price.seconds * 1e6 / row["us"] < 1.15, (c, price.seconds, row["us"])
    tiles = contraction_tiles(H200, "float16", extents, out_bytes=2)
    measured = {(r["config"]["BLOCK_N"], r["config"]["BLOCK_K"], r["config"]["num_stages"]): r["us"] for r in rows}
    assert measured[(tiles.n, tiles.k, tiles.stages)] <= 1.05 * min(measured.values())


def test_a_batch_that_fills_the_gpu_keeps_the_tiles():
    extents = {"M": 16, "N": 4096, "K": 4096}
    tiles = contraction_tiles(H200, "float16", extents, batch=8, out_bytes=2)
    assert (tiles.m, tiles.n, tiles.k) == (16, 128, 64)


def test_square_shapes_are_not_narrowed():
    for size in (2048, 4096, 8192):
        extents = {"M": size, "N": size, "K": size}
        tiles = contraction_tiles(H200, "float16", extents)
        assert min(tiles.m, tiles.n) == 128 and tiles.k == 64 and tiles.stages in (3, 4)
        a100 = contraction_tiles(A100, "float16", extents)
        assert (a100.m, a100.n, a100.k, a100.stages, a100.warps) == (128, 128, 64, 3, 8)


def test_large_16_bit_gemms_get_wide_tiles_on_sm_90_only():
    for extents in ({"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 11008, "K": 4096}):   # tiles divide
        tiles = contraction_tiles(H200, "float16", extents)
        # WIDE_STAGES (4) where the stages fit: DotNest.staged_bytes, as Triton allocates them
        assert (tiles.m, tiles.n, tiles.k, tiles.warps, tiles.stages) == (128, 256, 64, 8, tile_sizes.WIDE_STAGES)
        assert contraction_tiles(A100, "float16", extents).n == 128
        assert contraction_tiles(H200, "float32", extents).n == 64   # fp32 keeps its tiles
    # small shapes, all launch: the base stays (the price must save CONFIDENCE to move it)
    small = contraction_tiles(H200, "float32", {"M": 67, "N": 45, "K": 33})
    assert (small.m, small.n, small.k) == (64, 64, 32)


def test_wide_tiles_that_do_not_divide_need_room_for_the_staged_output_tile(monkeypatch):
    """Tiles that do not divide run the descriptor variant. It stores a plain contraction's output
    through pointers, so 128×256 tiles fit at their stages (the H200's sweep: 77.9 µs against 103 at
    128×128); were the output tile staged for a TMA store, 128×256 into fp32 would not fit beside
    3 stages (its pointer fallback measured 1.8× slower than 128×128), into fp16 it would at 3."""
    from tir_passes.contracts import gemm_price

    extents = {"M": 3000, "N": 5000, "K": 1000}
    tiles = contraction_tiles(H200, "float16", extents, out_bytes=4)
    assert (tiles.m, tiles.n, tiles.stages, tiles.warps) == (128, 256, tile_sizes.WIDE_STAGES, 8)
    monkeypatch.setattr(gemm_price, "CONTRACTION_OUTPUT_STORE", "descriptors")
    into_fp32 = contraction_tiles(H200, "float16", extents, out_bytes=4)
    into_fp16 = contraction_tiles(H200, "float16", extents, out_bytes=2)
    assert (into_fp32.m, into_fp32.n) == (128, 128)
    assert (into_fp16.m, into_fp16.n, into_fp16.warps, into_fp16.stages) == (128, 256, 8, 3)


@T.prim_func(s_tir=True)
def decode_columns_first(A: T.Buffer((16, 4096), "float16"), B: T.Buffer((4096, 4096), "float16"),
                         C: T.Buffer((16, 4096), "float16")):
    # the decode matmul with its spatial loops swapped: the same contraction
    for j, i, k in T.grid(4096, 16, 4096):
        with T.sblock("C"):
            vj, vi, vk = T.axis.remap("SSR", [j, i, k])
            with T.init():
                C[vi, vj] = T.float16(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _plan(func):
    tiled = tile_function(func, H200)
    found = {}
    tvm_ffi.structural_walk(tiled.body, (tirx.For, lambda f: found.__setitem__(f.loop_var.name, loop_tile(f))))
    sizes = {tile.block: tile.size for tile in found.values() if tile is not None and tile.role == "tile"}
    kernel = kernel_tile(top_level_statements(tiled)[0])
    root = tiled.body.block if isinstance(tiled.body, s_tir.SBlockRealize) else None
    decisions = str(root.annotations.get(DECISIONS_KEY, "")) if root is not None else ""
    return sizes, kernel, decisions


def test_the_plan_records_the_filling_tiles_and_says_why_whatever_the_loop_order():
    plain = _plan(make_matmul(16, 4096, 4096, "float16", "float16"))
    swapped = _plan(decode_columns_first)
    for sizes, kernel, decisions in (plain, swapped):
        assert sizes["BLOCK_M"] == 16 and sizes["BLOCK_N"] < 128 and sizes["BLOCK_K"] >= 128
        assert kernel.num_stages in tile_sizes.FILL_STAGE_CHOICES and kernel.num_warps == 4
        assert "fill the GPU" in decisions and "instead of 16x128x64" in decisions
    assert plain[0] == swapped[0]


def test_the_staged_bytes_are_what_triton_allocates_for_cast_operands():
    """DotNest.staged_bytes against Triton's sm_90 TTGIR for matmul at 128×256×64 and 4 stages
    (fp16 operands; the backward's dC fp32, cast to fp16 in registers): the forward 4 × 49,152; dA
    = dC·Bᵀ, dC the MMA's A operand, 3 fp32 tiles in shared memory and 4 of B; dB = Aᵀ·dC, dC the
    MMA's B operand, its 3 fp32 tiles and one fp16 tile after the cast (Triton reported 196,640,
    229,432 and 245,816 bytes: these plus its barriers)."""
    from tir_passes.contracts.gemm_price import DotNest

    assert DotNest().staged_bytes(128, 256, 64, 4, 2) == 196608
    assert DotNest(a_load_bytes=4, mma_b_side="b").staged_bytes(128, 256, 64, 4, 2) == 229376
    assert DotNest(b_load_bytes=4, mma_b_side="b").staged_bytes(256, 128, 64, 4, 2) == 245760
    assert DotNest(a_load_bytes=2, b_load_bytes=2).staged_bytes(128, 256, 64, 3, 2) == 3 * 49152


def test_the_tie_break_orients_the_mma_and_prices_the_cast_operand():
    """shared_bytes_per_step: the MMA's rows are the output's rows whichever tile axis holds them
    (DotNest.mma_b_side), and a cast operand pays its trip through registers (and back, as the
    MMA's B operand). Forward fp16: 128 rows × 256 columns is cheaper; dB = Aᵀ·dC with the fp32 dC
    as the MMA's B operand: 256 rows × 128 columns, in both of the product's factor orders."""
    from tir_passes.contracts.gemm_price import DotNest, shared_bytes_per_step

    def step(m, n, nest):
        return shared_bytes_per_step(GemmTiles(m, n, 64, 3, 8), 2, nest)

    assert step(128, 256, DotNest()) < step(256, 128, DotNest())
    a_first = DotNest(b_load_bytes=4, mma_b_side="b")    # dB[k, n] = Σ A[m, k]·dC[m, n]: M is dB's rows
    dc_first = DotNest(a_load_bytes=4, mma_b_side="a")   # dB[k, n] = Σ dC[m, n]·A[m, k]: M is dB's columns
    assert step(256, 128, a_first) == step(128, 256, dc_first) == 208 * 1024
    assert step(128, 256, a_first) == step(256, 128, dc_first) == 256 * 1024


def test_matmul_backward_tiles_do_not_depend_on_the_factor_order():
    """Both of dB's written forms (CanonicalUpdates's order and differentiate's), with dC rounded in
    the dots, get 256 rows of dB by 128 columns: the order the factors are written in is not a decision (H200, 2026-12-02 suite
    runs: 550.4 µs for the backward's two kernels that way against 639.4 with 256 columns)."""
    from tir_passes import differentiate
    from triton_codegen import compile

    backward = differentiate(make_matmul(4096, 4096, 4096), ["A", "B"])
    for disable in ((), ("CanonicalUpdates",)):   # dC kept fp32 in the dots (not rounded once: RoundOperandsOnce)
        kernel = compile(backward, verify=False, disable=disable + ("RoundOperandsOnce",))
        module = kernel.module(interpret=True)
        config = module.CONFIGS["matmul_backward_kernel1"][0]
        source = kernel.source[kernel.source.index("def matmul_backward_kernel1("):]
        rows = source[source.index("i0 = ((i0_0 * ") + len("i0 = ((i0_0 * "):].split(")")[0]
        assert (config[rows], config["BLOCK_K"]) == (256, 64), (disable, rows, config)
        assert config[{"BLOCK_M": "BLOCK_N", "BLOCK_N": "BLOCK_M"}[rows]] == 128
