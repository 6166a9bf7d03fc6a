"""exp((a - b) * c) is printed as exp2(a * c' - b * c'), c' = c · log2(e), where c' <= 1: the
attention exponentials, one fused multiply-add per element; a larger c' (softmax's plain shift,
c' = log2(e)) overflows operands near the float32 limit, so it and other exponentials stay tl.exp."""

import math

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check

from attention import make_attention
from softmax import make_softmax


def _kernel_text(kernel) -> str:
    """The first kernel's pointer variant."""
    return next(k for k in kernel.source.split("@triton.jit\n")[1:] if k.startswith("def ") and "_kernel0(" in k[:80])


@pytest.mark.interpreter
def test_attention_exponentials_fold_the_scale_into_exp2():
    kernel = compile_and_check(make_attention(1, 2, 37, 16), aot=False)   # test_attention compiles it for sm_90
    text = _kernel_text(kernel)
    folded = repr(1 / math.sqrt(16) * 1.4426950408889634)
    assert f"* {folded} - " in text and "tl.exp(" not in text


@pytest.mark.interpreter
def test_a_shift_whose_factor_exceeds_one_stays_exp():
    # -FLT_MAX · log2(e) is -inf: test_online_nan.py's leading masked run
    text = _kernel_text(compile_and_check(make_softmax(37, 48, "float16"), aot=False))
    assert "* 1.4426950408889634 - " not in text and "tl.exp(" in text


@T.prim_func(s_tir=True)
def plain_exp(X: T.Buffer((37, 48), "float32"), Y: T.Buffer((37, 48), "float32")):
    for i, j in T.grid(37, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.exp(X[vi, vj] * T.float32(2.0))


@pytest.mark.interpreter
def test_an_exponential_of_no_difference_stays_exp():
    kernel = compile_and_check(plain_exp, aot=False)
    text = _kernel_text(kernel)
    assert "tl.exp(" in text and "tl.exp2(" not in text
