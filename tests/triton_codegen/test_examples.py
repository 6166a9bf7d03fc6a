"""Every example compiles, matches TVM's CPU build in the interpreter at shapes that divide the
tiles and shapes that do not, and compiles ahead of time for sm_90 and sm_80."""

import pytest

from helpers import compile_and_check

from argmax import make_argmax
from attention_scores import make_attention_scores
from batch_matmul import make_batch_matmul
from conv2d_nhwc import make_conv2d_nhwc
from cumsum import make_cumsum
from elementwise import make_scale_shift_relu
from layernorm import make_layernorm
from layernorm_moments import make_layernorm_moments
from matmul import make_matmul
from matmul_bias_gelu import make_matmul_bias_gelu
from quantize_int8 import make_quantize_int8
from max_pool2d import make_max_pool2d
from rmsnorm import make_rmsnorm
from softmax import make_softmax
from transpose import make_transpose

CASES = {
    "elementwise": lambda odd: make_scale_shift_relu(67, 45) if odd else make_scale_shift_relu(32, 128, "float16"),
    "softmax": lambda odd: make_softmax(67, 45) if odd else make_softmax(64, 128),
    "softmax_fp16": lambda odd: make_softmax(33, 70, "float16"),
    "layernorm": lambda odd: make_layernorm(67, 45) if odd else make_layernorm(32, 64),
    "rmsnorm_symbolic": lambda odd: make_rmsnorm(45) if odd else make_rmsnorm(64),
    "matmul_fp16": lambda odd: make_matmul(67, 45, 33) if odd else make_matmul(64, 64, 64),
    "matmul_fp32": lambda odd: make_matmul(67, 45, 33, "float32", "float32") if odd else make_matmul(32, 64, 32, "float32", "float32"),
    "matmul_bias_gelu": lambda odd: make_matmul_bias_gelu(67, 45, 33) if odd else make_matmul_bias_gelu(64, 32, 64),
    "batch_matmul": lambda odd: make_batch_matmul(3, 37, 29, 21) if odd else make_batch_matmul(2, 32, 32, 32),
    "attention_scores": lambda odd: make_attention_scores(37, 45, 32) if odd else make_attention_scores(32, 64, 64),
    "transpose": lambda odd: make_transpose(67, 45) if odd else make_transpose(64, 128),
    "conv2d_nhwc": lambda odd: make_conv2d_nhwc(2, 9, 11, 19, 24) if odd else make_conv2d_nhwc(1, 8, 16, 16, 32),
    "max_pool2d": lambda odd: make_max_pool2d(2, 5, 17, 13) if odd else make_max_pool2d(1, 4, 17, 33),
    "layernorm_moments": lambda odd: make_layernorm_moments(67, 45) if odd else make_layernorm_moments(32, 64, "float16"),
    "cumsum": lambda odd: make_cumsum(67, 45) if odd else make_cumsum(32, 128),
    "argmax": lambda odd: make_argmax(67, 45) if odd else make_argmax(32, 128),
    "quantize_int8": lambda odd: make_quantize_int8(67, 45) if odd else make_quantize_int8(32, 128),
}


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("odd", [True, False], ids=["odd_shapes", "divisible_shapes"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_matches_tvm(name, odd):
    compile_and_check(CASES[name](odd))


@pytest.mark.interpreter
@pytest.mark.parametrize("rows", [1, 37, 200])
def test_symbolic_rows_bind_at_launch(rows):
    """One compiled RMSNorm serves every row count; the launcher binds `rows` from the tensor."""
    compile_and_check(make_rmsnorm(45), sizes={"rows": rows}, aot=False)


def test_emitted_source_is_byte_identical_across_compiles():
    from triton_codegen import compile

    first = compile(make_softmax(67, 45), verify=False).source
    second = compile(make_softmax(67, 45), verify=False).source
    assert first == second
    from tir_passes import default_pipeline, pass_names

    assert "0x" in first and f"Passes applied: {', '.join(pass_names(default_pipeline()))}" in first


def test_saved_module_imports_only_torch_and_triton(tmp_path):
    from triton_codegen import compile

    source = compile(make_matmul(67, 45, 33), verify=False).source
    imports = sorted({line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))})
    assert imports == ["math", "numbers", "os", "threading", "torch", "triton", "triton.language"]   # stdlib, torch, triton
    assert 'def run(*args, **kwargs):\n    """run(A, B, C): compute' in source  # by position or name


def test_matmul_uses_tl_dot_with_fp32_accumulator():
    from triton_codegen import compile

    fp16 = compile(make_matmul(67, 45, 33), verify=False).source
    assert "tl.dot(" in fp16 and "tl.full([BLOCK_M, BLOCK_N], 0.0, tl.float32)" in fp16
    fp32 = compile(make_matmul(67, 45, 33, "float32", "float32"), verify=False,
                   float32_matmul_precision="highest").source
    assert 'input_precision="ieee"' in fp32
    tf32 = compile(make_matmul(67, 45, 33, "float32", "float32"), verify=False, allow_tf32=True).source
    assert 'input_precision="tf32"' in tf32
