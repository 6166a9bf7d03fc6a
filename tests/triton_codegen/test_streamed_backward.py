"""Attention's backward with rows over the register budget: LoopFusion streams each recomputed Q·Kᵀ (and
dO·Vᵀ) tile into the row reductions and row contractions that read it (fusion step "stream"), and Tiling
walks their key loop in tiles, flash attention's walk without the online correction (the statistics are
inputs there). The budget is lowered so that small, odd shapes take the path the H200's long rows take;
the kernels run in the interpreter against torch autograd and compile for sm_90/sm_80."""

import re

import torch

from attention import make_attention
from attention_forms import make_attention_normalize_first
from helpers import AOT_ARCHS
from test_backward_kernels import run_backward, torch_reference
from lowering.rewrites.tile_access import with_tile_accesses
from tir_passes import differentiate
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import SHARE, STREAM, fusion_steps
from tir_passes.contracts.gpu_specs import GPUS
from tir_passes.passes.walk_stages import rows_beside_accumulators, streamed_walk_stages
from tir_passes.pipeline import default_pipeline
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.configs import config_space
from triton_codegen.descriptors import plan_descriptors

SHAPE = (1, 2, 37, 16)
# a row of 37 scores (x tl.dot's 16 rows: 592) is over it; dQ's accumulator row of 16 (x 16) is not, nor are dK's
# and dV's together (32 x 16 = 512: LoopFusion's share step may put them beside one walk)
SMALL_REGISTERS = BackendLimits(register_row_elements=520)


def _compile(func):
    backward = differentiate(func, ["Q", "K", "V"])
    kernel = compile(backward, verify=False, passes=default_pipeline("H200", limits=SMALL_REGISTERS))
    return backward, kernel


def _streams(kernel) -> set[str]:
    """The readers LoopFusion streamed a contraction into (its record on the tiled program)."""
    return {reader for s in fusion_steps(kernel.tir["main"]) if s.action == STREAM and s.taken for reader in s.into}


def _streamed_producers(kernel) -> set[str]:
    return {b for s in fusion_steps(kernel.tir["main"]) if s.action == STREAM and s.taken for b in s.blocks}


def _no_square_scratch(kernel, s: int) -> bool:
    """No S x S intermediate reaches memory (the program's scratch buffers are row vectors)."""
    scratch = [line for line in kernel.tile_ir.splitlines() if line.startswith("  scratch")]
    return not [line for line in scratch if f"{s}, {s}]" in line]


def _shared(kernel) -> list:
    """The share steps LoopFusion took: (the copy dropped, the copy kept)."""
    return [(s.blocks[0], s.into[0]) for s in fusion_steps(kernel.tir["main"]) if s.action == SHARE and s.taken]


def _dq_kernel(kernel):
    """The kernel that writes d_Q from a streamed reader (d_Q's contribution from the scores)."""
    return next(k for k in kernel.program.kernels if any(b.startswith("d_Q") and b in _streams(kernel)
                                                          for b in k.source_blocks))


def _walking_kernels(kernel) -> list:
    """The kernels that walk the key loop with a contraction computed per step."""
    return [k for k in kernel.program.kernels if any(b in _streams(kernel) for b in k.source_blocks)]


def test_streamed_attention_backward_matches_torch_autograd():
    backward, kernel = _compile(make_attention(*SHAPE, dtype="float32"))
    # every reader of the recomputed scores (and of dO·Vᵀ) takes its tiles one step of its reduction at a time
    assert {"d_Q_from_scores", "d_K_from_scores", "d_V_from_weighted_sum"} <= _streams(kernel)
    by_writer = {block: k for k in kernel.program.kernels for block in k.source_blocks}
    # FlashAttention-2's dQ kernel (S = Q·Kᵀ and dP = dO·Vᵀ per key tile, dQ += dS·K) and its dK/dV kernel (one
    # program per key tile, walking the query tiles, the scores transposed): LoopFusion's share step merged dV's
    # nest into dK's, so S is computed once per step for both accumulators
    for reader in ("d_Q_from_scores", "d_K_from_scores"):
        assert sum(b.startswith(("scores", "d_weights_0")) for b in by_writer[reader].source_blocks) == 2
    assert by_writer["d_V_from_weighted_sum"] is by_writer["d_K_from_scores"]
    assert len(_shared(kernel)) == 1
    # the statistics are recomputed in one online walk of the keys (the adjoints read the final row max, so
    # OnlineSoftmax leaves them where they are), with D_i = -Σ_d dO·acc/l² beside it, FlashAttention-2's
    # preprocess; the row max has no adjoint (its gradient is zero: ZeroGradient), so no kernel walks the keys
    # for it. Before: 9 kernels and 15 dots (three walks for the statistics, one for the max's gradient).
    statistics = by_writer["row_max"]
    assert {"row_sum", "weighted_sum", "d_row_sum_from_normalize"} <= set(statistics.source_blocks)
    assert _no_square_scratch(kernel, SHAPE[2])
    # 3 kernels, 9 products of S x S x D (FlashAttention-2's backward has 7: its forward saves the statistics)
    assert len(kernel.program.kernels) == 3 and kernel.tile_ir.count("= dot(") == 9
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(SHAPE, generator=generator) for _ in range(3)]
    out, grad, expected = torch_reference(torch.nn.functional.scaled_dot_product_attention, inputs)
    ours = run_backward(kernel, backward, ["Q", "K", "V"], inputs, grad, {"O": out})
    for param, value in zip("QKV", expected):
        error = ((ours[param] - value).abs().max() / value.abs().max()).item()
        assert error <= 1e-3, f"d{param} differs from torch autograd by {error:.2e}"


def test_streamed_fp16_kernels_are_fp16_dots_and_compile_for_sm90_and_sm80():
    _, kernel = _compile(make_attention(*SHAPE))
    walking = _walking_kernels(kernel)
    dq = _dq_kernel(kernel)
    source = kernel.source
    assert "input_precision" not in source   # every dot of fp16 operands, fp32 accumulation
    names = {k.name for k in walking}
    for tile_kernel in with_tile_accesses(kernel.program).kernels:
        if tile_kernel.name not in names:
            continue
        config = config_space(tile_kernel)[0]
        for arch in AOT_ARCHS:
            compile_ahead_of_time(kernel.module_file(), tile_kernel, config, arch)
        plan = plan_descriptors(tile_kernel)
        if plan is not None:  # the tensor-descriptor variant runs on sm_90 only
            compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=plan)
    assert dq.name in names


def test_a_rewrite_of_the_forward_streams_the_same_readers():
    """Normalize first (O = Σ_j (P/l)·V, its adjoints named after `probs`): the same structure, the dQ
    kernel one pass over the keys with its two streamed tiles, no S x S intermediate in memory."""
    _, kernel = _compile(make_attention_normalize_first(*SHAPE, dtype="float32"))
    dq = _dq_kernel(kernel)
    assert len(set(dq.source_blocks) & _streamed_producers(kernel)) == 2
    assert {"d_Q_from_scores", "d_K_from_scores", "d_V_from_weighted_sum"} <= _streams(kernel)
    assert _no_square_scratch(kernel, SHAPE[2]) and len(kernel.program.kernels) == 4
    assert len(_shared(kernel)) == 1   # dK's and dV's walks share their recomputed probabilities here too


# enough heads that every walk keeps its rows (fewer rows filling the GPU take 3 stages of their own)
MANY_HEADS = (4, 17, 37, 16)


def _stages_by_products(gpu: str) -> dict[int, set]:
    """{tiles recomputed per step: the (warps, stages) of the walking kernels that compute that many}."""
    backward = differentiate(make_attention(*MANY_HEADS), ["Q", "K", "V"])
    kernel = compile(backward, verify=False, passes=default_pipeline(gpu, limits=SMALL_REGISTERS))
    found: dict[int, set] = {}
    for walking in _walking_kernels(kernel):
        products = len(set(walking.source_blocks) & _streamed_producers(kernel))
        found.setdefault(products, set()).add((walking.num_warps, walking.num_stages))
    return found


def test_walks_computing_two_tiles_per_step_pipeline_three_stages_on_sm90():
    """dQ's and dK/dV's walks recompute S and dP per step: 8 warps and 3 stages on sm_90 (walk_stages.py:
    measured on the H200, 255.6 -> 203.6 us for dQ); no walk computes one product (dV's walk is dK's since
    LoopFusion's share step); on sm_80 (not measured) every walk keeps 2."""
    assert _stages_by_products("H200") == {2: {(8, 3)}}
    assert _stages_by_products("A100") == {2: {(8, 2)}}


def test_three_stages_only_where_they_fit_the_shared_memory():
    h200 = GPUS["H200"]
    assert streamed_walk_stages(h200, "float16", 128, 64, 128, 2) == 3   # 208 KiB of 227
    assert streamed_walk_stages(h200, "float16", 128, 64, 256, 2) == 2   # a 256-deep head: 416 KiB
    assert streamed_walk_stages(h200, "float32", 128, 64, 128, 2) == 2
    assert streamed_walk_stages(h200, "float16", 128, 64, None, 2) == 2  # the head's depth unknown
    assert streamed_walk_stages(h200, "float16", 128, 64, 128, 1) == 2   # one product per step: not measured


def test_fp16_dv_dot_reads_do_as_loaded_and_matches_torch_autograd():
    """dV = Σ_i f16(exp(s - m)) · f16(dO / l): FactorOutOfSums moves 1 / l onto the probabilities (computed
    in registers), so dO reaches the dot as loaded (H200: the dV kernel 166.7 -> 144.1 us), and dP = dO·Vᵀ
    keeps no `* 1.0` round trip on dO. Verified at every stage and in the interpreter (compile's checks),
    and against torch autograd in fp32 from the fp16 inputs."""
    backward = differentiate(make_attention(*SHAPE), ["Q", "K", "V"])
    kernel = compile(backward, passes=default_pipeline("H200", limits=SMALL_REGISTERS))
    dots = [line.strip() for line in kernel.source.splitlines() if "tl.dot(" in line]
    dv = [line for line in dots if "acc_d_V" in line]
    assert dv and all(re.search(r", d_O_tile(_\d+)?, acc_d_V", line) for line in dv)
    assert not [line for line in dots if "to(tl.float32).to(tl.float16)" in line]
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(SHAPE, generator=generator).half() for _ in range(3)]
    out, grad, expected = torch_reference(torch.nn.functional.scaled_dot_product_attention,
                                          [x.float() for x in inputs])
    ours = run_backward(kernel, backward, ["Q", "K", "V"], inputs, grad.half(), {"O": out.half()})
    for param, value in zip("QKV", expected):
        error = ((ours[param].float() - value).abs().max() / value.abs().max()).item()
        assert error <= 2e-2, f"d{param} differs from torch autograd by {error:.2e}"


def test_each_walk_loads_each_tile_once_per_step():
    """dQ's walk reads K for S = Q·Kᵀ and for dQ += dS·K, dK/dV's walk reads dO for dP = dO·Vᵀ and for
    dV += P·dO: the same rows and the whole head dimension under two loops. Tiling gives both loops one tile
    axis (a whole tile covers every buffer axis its loop's blocks index), so each is loaded once per step."""
    _, kernel = _compile(make_attention(*SHAPE))
    pointer_kernels = re.split(r"(?=^@triton\.jit)", kernel.source, flags=re.M)
    for walking in _walking_kernels(kernel):
        text = next(part for part in pointer_kernels if re.search(rf"^def {walking.name}\(", part, flags=re.M))
        loads = re.findall(r"tl\.load\((\w+)_ptr \+", text)
        assert loads and len(loads) == len(set(loads)), f"{walking.name} loads {sorted(loads)}"


def test_a_walk_beside_two_heads_of_accumulators_takes_64_rows_at_4_warps():
    """dK's and dV's accumulators beside one walk (256 fp32 columns per row at d128): 64 rows, 4 warps,
    2 stages (walk_stages.rows_beside_accumulators: measured on the H200 and priced by the hardware model);
    dQ's walk (one accumulator of 128 columns) keeps 128 rows at 8 warps and 3 stages."""
    wide = BackendLimits(register_row_elements=4200)   # a row of 300 scores (x 16) is over it, 256 (x 16) not
    backward = differentiate(make_attention(4, 17, 300, 128), ["Q", "K", "V"])   # enough programs to keep 64 rows
    kernel = compile(backward, verify=False, passes=default_pipeline("H200", limits=wide))
    by_writer = {block: k for k in kernel.program.kernels for block in k.source_blocks}
    dk_dv, dq = by_writer["d_K_total"], by_writer["d_Q_total"]
    assert dk_dv is by_writer["d_V_total"]
    assert (dk_dv.num_warps, dk_dv.num_stages) == (4, 2) and "axis j: BLOCK_J=64 over" in kernel.tile_ir
    assert (dq.num_warps, dq.num_stages) == (8, 3)
    h200, a100 = GPUS["H200"], GPUS["A100"]
    assert rows_beside_accumulators(h200, 128, 8, 3, 128) == (128, 8, 3)
    assert rows_beside_accumulators(h200, 128, 8, 3, None) == (128, 8, 3)
    assert rows_beside_accumulators(a100, 128, 8, 2, 256) == (128, 8, 2)   # measured on sm_90 only
