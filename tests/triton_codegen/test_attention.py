"""Attention written stage by stage in TVMScript compiles to one flash-attention kernel: the
scores and the weighted sum are two tl.dots in one loop over key tiles, with a running maximum
(OnlineSoftmax), for causal and non-causal masks and 16-bit inputs."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.contracts.online_contract import DECISIONS_KEY
from tir_passes.infra.pass_util import root_block

from attention import make_attention
from matmul import make_matmul

ATTENTION = {
    "fp16_odd": lambda: make_attention(1, 2, 37, 16),
    "fp16_causal_two_tiles": lambda: make_attention(2, 1, 45, 32, causal=True),
    "bf16_causal": lambda: make_attention(1, 1, 37, 16, causal=True, dtype="bfloat16"),
    "fp32_weights": lambda: make_attention(1, 1, 29, 16, weights_dtype="float32"),
}


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_is_one_kernel_with_two_dots(name):
    kernel = compile_and_check(ATTENTION[name]())
    assert len(kernel.program.kernels) == 1
    [pointer_kernel] = [k for k in kernel.source.split("@triton.jit")[1:] if k.lstrip().startswith("def attention_kernel0(")]
    loops = pointer_kernel.count("for j_0 in range(")   # causal: the unmasked tiles, then the diagonal ones
    assert loops == (2 if "causal" in name else 1)
    assert pointer_kernel.count("tl.dot(") == 2 * loops   # the _tma variant (sm_90) has the same
    decisions = root_block(kernel.tir["main"]).annotations[DECISIONS_KEY]
    assert any("online with" in str(d) for d in decisions)


@pytest.mark.interpreter
def test_bfloat16_matmul_in_the_interpreter():
    """Triton's interpreter computes tl.dot of bfloat16 tiles from their raw bits; the generated
    module widens them to float32 there (and only there)."""
    kernel = compile_and_check(make_matmul(37, 29, 21, "bfloat16", "float32"), aot=False)
    assert "_dot_operand(" in kernel.source


S, D = 70, 16


@T.prim_func(s_tir=True)
def masked_scores_times_values(Q: T.Buffer((S, D), "float16"), K: T.Buffer((S, D), "float16"),
                               V: T.Buffer((S, D), "float16"), O: T.Buffer((S, D), "float32")):
    scores = T.sblock_alloc_buffer((S, S), "float32")
    for i, j, d in T.grid(S, S, D):
        with T.sblock("scores"):
            vi, vj, vd = T.axis.remap("SSR", [i, j, d])
            with T.init():
                scores[vi, vj] = T.float32(0)
            scores[vi, vj] = scores[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
    for i, d, j in T.grid(S, D, S):
        with T.sblock("pv"):
            vi, vd, vj = T.axis.remap("SSR", [i, d, j])
            with T.init():
                O[vi, vd] = T.float32(0)
            O[vi, vd] = O[vi, vd] + T.if_then_else(vj <= vi, scores[vi, vj], T.float32(0)) * T.Cast("float32", V[vj, vd])


@pytest.mark.interpreter
def test_a_zero_padded_operand_in_registers_is_zeroed():
    """The masked scores, fused and held in registers, are a tl.dot operand: the padding condition
    `j <= i` that nest.contraction_operands strips must zero them (the review found it dropped: a
    wrong kernel that only the kernel check caught)."""
    kernel = compile_and_check(masked_scores_times_values, aot=False)
    assert kernel.source.count("tl.dot(") >= 2
