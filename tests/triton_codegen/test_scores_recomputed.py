"""softmax(Q·Kᵀ) with the probabilities written is one kernel at any row length: OnlineSoftmax
streams the scores for the row statistics, LoopFusion recomputes them for the normalize pass
(tir_passes/analyses/recompute.py) instead of a round trip through memory, and both walks are tl.dots."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.infra.pass_util import root_block
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.analyses.recompute import worth_recomputing
from tir_passes.passes.tile_sizes import rows_filling_the_gpu
from triton_codegen import compile

from attention_scores import make_attention_scores


def _decisions(kernel, key: str) -> list[str]:
    return [str(d) for d in root_block(kernel.tir["main"]).annotations[key]]


def _fusion(kernel) -> list[str]:
    return [step.text for step in fusion_steps(kernel.tir["main"])]


@pytest.mark.interpreter
@pytest.mark.aot
def test_long_score_rows_are_one_kernel_with_recomputed_scores():
    kernel = compile_and_check(make_attention_scores(37, 601, 16))   # rows over the register budget, odd sizes
    assert len(kernel.program.kernels) == 1
    [pointer_kernel] = [k for k in kernel.source.split("@triton.jit")[1:] if k.lstrip().startswith("def attention_scores_kernel0(")]
    assert pointer_kernel.count("tl.dot(") == 2 and pointer_kernel.count("for j_0") == 2
    fusion = _fusion(kernel)
    assert any(d.startswith("recompute scores for the later readers of S (scores_2)") for d in fusion)
    assert any("online with row_sum" in d and "do not fit in registers" in d for d in _decisions(kernel, "online.decisions"))


@pytest.mark.interpreter
def test_short_score_rows_stay_in_registers():
    """Rows that fit keep the three passes over registers: no online form, no recompute."""
    kernel = compile_and_check(make_attention_scores(37, 45, 32), aot=False)
    assert len(kernel.program.kernels) == 1
    assert not any(d.startswith("recompute") for d in _fusion(kernel))
    assert kernel.source.count("for j_0") == 0


def test_recomputing_pays_only_for_short_contractions():
    deep = make_attention_scores(37, 601, 4096)   # 8192 flops per 8-byte round trip (H200: 232 flops a byte)
    shallow = make_attention_scores(37, 601, 64)
    for func, pays in ((shallow, True), (deep, False)):
        block = func.body.block.body.seq[0].body.body.body.block
        assert block.name_hint == "scores"
        assert (worth_recomputing(block, block.writes[0].source, gpu_spec("H200")) is not None) == pays


def test_rows_per_program_fill_one_wave():
    h200 = gpu_spec("H200")
    assert h200.multiprocessors == 132
    assert rows_filling_the_gpu(128, 4096, 1, h200) == 32      # 128 programs on 132 multiprocessors
    assert rows_filling_the_gpu(128, 4096, 128, h200) == 128   # attention b4h32: 4096 programs already
    assert rows_filling_the_gpu(128, 37, 1, h200) == 16        # never below tl.dot's minimum


S, N, K = 32, 1024, 16


@T.prim_func(s_tir=True)
def scores_then_keys_overwritten(A: T.Buffer((S, K), "float16"), B: T.Buffer((N, K), "float16"),
                                 O: T.Buffer((S, N), "float32")):
    X = T.sblock_alloc_buffer((S, N), "float32")
    mx = T.sblock_alloc_buffer((S,), "float32")
    for i, j, k in T.grid(S, N, K):
        with T.sblock("scores"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                X[vi, vj] = T.float32(0)
            X[vi, vj] = X[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])
    for i, j in T.grid(S, N):
        with T.sblock("row_max"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                mx[vi] = T.float32(float("-inf"))
            mx[vi] = T.max(mx[vi], X[vi, vj])
    for j, k in T.grid(N, K):
        with T.sblock("clobber"):
            vj, vk = T.axis.remap("SS", [j, k])
            B[vj, vk] = T.float16(0)
    for i, j in T.grid(S, N):
        with T.sblock("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[vi, vj] = X[vi, vj] - mx[vi]


@pytest.mark.interpreter
def test_scores_are_not_recomputed_after_their_inputs_change():
    """A nest between the scores' readers overwrites the keys: a copy would read the new ones
    (found in review), so the scores go through memory, and the kernels match TVM."""
    kernel = compile(scores_then_keys_overwritten)   # every check, the kernel against TVM included
    assert kernel.check_report.ok
    assert any(d.startswith("not recomputed: scores: clobber writes B") for d in _fusion(kernel))
