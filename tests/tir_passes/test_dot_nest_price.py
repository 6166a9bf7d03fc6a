"""The price of several tl.dots over one K loop (contracts/gemm_price.DotNest): a tile that several
dots read is staged once, the dots' accumulators together bound the tiles and the warps, and the
hardware model's estimate stages the shared tile once too (the tuner's space keeps the stages
that fit)."""

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.analyses.dot_nest import dot_nest
from tir_passes.analyses.nest import realizes_under
from tir_passes.contracts.gemm_price import DotNest, GemmTiles, accumulators_fit, gemm_price
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.pipeline import run_pipeline
from tir_passes.passes.tile_sizes import base_sizes, contraction_tiles, contraction_warps
from triton_codegen import compile
from triton_codegen.hardware_model import estimate_resources, runnable
from triton_codegen.tile_summary import summarize

from swiglu import make_swiglu

H200, A100 = gpu_spec("H200"), gpu_spec("A100")
SWIGLU = DotNest(dots=2, a_tiles=1, b_tiles=2, outputs=1)   # X shared by the gate and the up projection
LARGE = {"M": 4096, "N": 11008, "K": 4096}


def test_two_dots_of_128x128_are_priced_as_one_128x256_gemm():
    """The same flops, operand bytes, bytes in flight and accumulators: the same seconds."""
    two = gemm_price(H200, 2, 2, LARGE, GemmTiles(128, 128, 64, 3, 8), 1, DotNest(2, 1, 2, 2))
    one = gemm_price(H200, 2, 2, dict(LARGE, N=2 * LARGE["N"]), GemmTiles(128, 256, 64, 3, 8))
    assert two.programs == one.programs and abs(two.seconds - one.seconds) < 1e-12
    # the epilogue's one output tile (SwiGLU's Y) instead of two: cheaper; twice the single GEMM's
    # flops, but one tile's fixed cost (TILE_SECONDS): less than two GEMMs
    single = gemm_price(H200, 2, 2, LARGE, GemmTiles(128, 128, 64, 3, 8))
    assert gemm_price(H200, 2, 2, LARGE, GemmTiles(128, 128, 64, 3, 8), 1, SWIGLU).seconds < two.seconds
    assert 1.5 * single.seconds < two.seconds < 2 * single.seconds


def test_a_shared_operand_tile_is_staged_once():
    """On the A100 (164 KiB of shared memory a block) three stages of X, Wg and Wu tiles of
    128×64 fit; counted per dot (X twice) they would not, and BLOCK_K would halve."""
    assert contraction_tiles(A100, "float16", LARGE, SWIGLU, 1, 2).k == 64
    assert contraction_tiles(A100, "float16", LARGE, DotNest(2, 2, 2, 1), 1, 2).k == 32   # nothing shared


def test_accumulators_of_all_dots_bound_the_tiles_and_the_warps():
    wide = {"M": 8192, "N": 11008, "K": 4096}
    assert (contraction_tiles(H200, "float16", wide).m, contraction_tiles(H200, "float16", wide).n) == (128, 256)
    two = contraction_tiles(H200, "float16", wide, SWIGLU, 1, 2)
    assert (two.m, two.n, two.warps) == (128, 128, 8)      # 2 × 128×256 fp32 would be 256 values a thread
    three = base_sizes(H200, "float16", LARGE, DotNest(3, 1, 3, 3))   # Q, K and V projections of one X
    assert (three["M"], three["N"]) == (128, 64) and accumulators_fit(DotNest(3, 1, 3, 3), 128, 64, 8)
    assert not accumulators_fit(DotNest(3, 1, 3, 3), 128, 128, 8)
    assert contraction_warps({"M": 128, "N": 64}, SWIGLU) == 8 and contraction_warps({"M": 128, "N": 64}) == 4


def test_the_hardware_model_stages_swiglus_shared_tile_once():
    compiled = compile(make_swiglu(512, 1024, 512), verify=False)
    (kernel,) = summarize(compiled.program).values()
    assert [dot["operands"][0] for dot in kernel["dots"]] == [0, 0]   # both dots read the first load site, X
    default = compiled.program.kernels[0]
    config = dict(default.block_sizes, num_warps=default.num_warps, num_stages=4)
    staged = 4 * (config["BLOCK_M"] + 2 * config["BLOCK_N"]) * config["BLOCK_K"] * 2
    assert estimate_resources(kernel, config).shared_bytes == staged
    old_format = dict(kernel, dots=[{k: v for k, v in dot.items() if k != "operands"} for dot in kernel["dots"]])
    assert estimate_resources(old_format, config).shared_bytes == staged + 4 * config["BLOCK_M"] * config["BLOCK_K"] * 2
    # the tuner's space prunes what the estimate says cannot run: 128×128×64 at 4 stages stays
    wide = dict(config, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4)
    assert estimate_resources(kernel, wide).shared_bytes == 196_608   # X counted twice: 262,144 > 232,448
    assert runnable(H200, estimate_resources(kernel, wide), 8) is None
    assert runnable(H200, estimate_resources(old_format, wide), 8) is not None


def test_swiglus_nest_is_two_dots_one_shared_tile_and_one_output():
    """dot_nest reads the nest Tiling sees: the gate's and the up projection's X[vi, vk] bound to the
    same loops are one tile, their G and U stay in the kernel, Y leaves it; in either block order."""
    for gate_first in (True, False):
        module = tvm.IRModule({"main": make_swiglu(256, 384, 512, gate_first=gate_first)})
        shared = run_pipeline(module, stop_after="ShareContractionLoops").module["main"]
        loops = []
        tvm_ffi.structural_walk(shared.body, (tirx.For, loops.append), order="pre")
        m_loop, k_loop = loops[0], next(loop for loop in loops if len(realizes_under(loop.body)) == 2)
        assert dot_nest(m_loop, k_loop) == SWIGLU
