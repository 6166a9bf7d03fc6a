"""examples/attention_causal.py (a benchmark-suite case): the masked scores, -inf above the
diagonal, compile to kernels that match TVM's CPU build in the interpreter at odd sizes, and
compile ahead of time for sm_90 and sm_80 (with their tensor-descriptor variants for sm_90)."""

import pytest

from helpers import compile_and_check

from attention_causal import make_causal_attention


@pytest.mark.interpreter
@pytest.mark.aot
def test_causal_attention_matches_tvm():
    compile_and_check(make_causal_attention(1, 2, 37, 16))
