"""A NaN in attention's inputs reaches the rows that read it without a NaN check on the running
maximum (an online shift's maximum is never observable: reductions.nan_unobservable); a plain
row maximum that is observable propagates NaN (one tl.reduce whose combine is max.NaN)."""

import math

import pytest
import torch

from triton_codegen import compile

from attention import make_attention
from softmax import make_softmax


NAN_CHECK = "_tir_nan_max("   # the row maximum through the helper: on the GPU tl.reduce with max.NaN


def _pointer_kernel(source: str, name: str) -> str:
    return next(k for k in source.split("@triton.jit")[1:] if k.lstrip().startswith(f"def {name}("))


@pytest.mark.interpreter
@pytest.mark.parametrize("causal", [False, True])
def test_a_nan_key_poisons_exactly_the_rows_that_see_it(causal):
    kernel = compile(make_attention(1, 2, 37, 16, causal=causal), verify=False)
    body = _pointer_kernel(kernel.source, "attention_kernel0")
    assert "tl.max(" in body and NAN_CHECK not in body
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 37, 16, generator=generator).half() for _ in range(3))
    k[0, 1, 20, 3] = float("nan")
    out = torch.full_like(q, 0.5)
    kernel(q, k, v, out, interpret=True)
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(16)
    if causal:
        scores = scores.masked_fill(~torch.ones(37, 37, dtype=torch.bool).tril(), float("-inf"))
    expected = torch.softmax(scores, dim=-1) @ v.double()
    assert torch.equal(out.isnan(), expected.isnan())          # head 1, rows that see key 20 (all, or 20..36)
    assert expected.isnan().any() and not expected[0, 0].isnan().any()
    finite = ~expected.isnan()
    assert torch.allclose(out.double()[finite], expected[finite], atol=2e-3)


@pytest.mark.interpreter
def test_an_observable_row_maximum_propagates_nan():
    kernel = compile(make_softmax(37, 48, "float16"), verify=False)
    body = _pointer_kernel(kernel.source, "softmax_kernel0")
    assert NAN_CHECK in body and "tl.max(" not in body and '"nan"' not in body   # one reduction, no second one
    x = torch.randn(37, 48, generator=torch.Generator().manual_seed(1)).half()
    x[5, 7] = float("nan")
    out = torch.empty_like(x)
    kernel(x, out, interpret=True)
    assert out[5].isnan().all() and not out[torch.arange(37) != 5].isnan().any()


@pytest.mark.interpreter
def test_a_leading_run_of_masked_keys_gives_no_nan():
    # the running maximum stays at its -FLT_MAX start through the masked run: exp2(s·log2e - m·log2e)
    # overflowed both products to -inf, and -inf - -inf made the whole row NaN
    kernel = compile(make_softmax(3, 20000), verify=False)
    x = torch.randn(3, 20000, generator=torch.Generator().manual_seed(2))
    x[1, :9000] = float("-inf")
    x[2, :9000] = torch.finfo(torch.float32).min
    out = torch.empty_like(x)
    kernel(x, out, interpret=True)
    torch.testing.assert_close(out.double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-9)


def test_attention_keeps_its_fused_exponential():
    # its scale folds to 1/sqrt(d) · log2(e) < 1: s·c' - m·c' cannot overflow, one FMA an element
    body = _pointer_kernel(compile(make_attention(1, 2, 37, 16), verify=False).source, "attention_kernel0")
    assert "tl.exp2(" in body and "tl.exp(" not in body
