"""float32_matmul_precision: PyTorch's names, its default, the manifest, and the kernel check's tolerance."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from examples.matmul import make_matmul
from lowering.matmul_precision import DotTolerance, dot_tolerance
from tir_passes.errors import FrontendError
from triton_codegen import compile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fp32_matmul():
    return make_matmul(37, 45, 53, "float32", "float32")


@pytest.mark.parametrize("precision, text", [("highest", 'input_precision="ieee"'),
                                             ("high", 'input_precision="tf32"'),
                                             ("medium", ".to(tl.bfloat16)")])
def test_each_setting_is_the_dot_pytorch_means(precision, text):
    kernel = compile(_fp32_matmul(), verify=False, float32_matmul_precision=precision)
    assert text in kernel.source and kernel.manifest()["float32_matmul_precision"] == precision


def test_medium_rounds_operands_to_bf16_and_is_checked_at_bf16_tolerance():
    """The interpreter really rounds the operands, so the kernel differs from TVM's IEEE build by
    bf16's rounding: the check compares fp32 outputs at bf16's tolerance, and passes."""
    kernel = compile(_fp32_matmul(), float32_matmul_precision="medium")
    assert kernel.check_report.ok and not kernel.check_report.skipped
    assert dot_tolerance(kernel.program) == DotTolerance("bfloat16", math.sqrt(53))
    high = compile(_fp32_matmul(), verify=False, float32_matmul_precision="high").program
    assert dot_tolerance(high) == DotTolerance("float16", math.sqrt(53))
    assert dot_tolerance(compile(_fp32_matmul(), verify=False, float32_matmul_precision="highest").program) is None


def test_default_is_pytorchs_setting_at_compile_time():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        kernel = compile(_fp32_matmul(), verify=False)
    finally:
        torch.set_float32_matmul_precision(before)
    assert kernel.program.float32_matmul_precision == "high" and 'input_precision="tf32"' in kernel.source


def test_16_bit_operands_are_exact_whatever_the_setting():
    source = compile(make_matmul(37, 45, 53), verify=False, float32_matmul_precision="medium").source
    assert "tl.dot(" in source and "input_precision" not in source and "tl.bfloat16)" not in source


def test_allow_tf32_is_the_old_spelling_of_high():
    assert compile(_fp32_matmul(), verify=False, allow_tf32=True).program.float32_matmul_precision == "high"
    with pytest.raises(FrontendError, match="allow_tf32 is an old spelling"):
        compile(_fp32_matmul(), verify=False, allow_tf32=True, float32_matmul_precision="highest")
    with pytest.raises(FrontendError, match="choose one of highest, high, medium"):
        compile(_fp32_matmul(), verify=False, float32_matmul_precision="tf32")


def test_cli_flag_reaches_the_manifest(tmp_path):
    target = os.path.join(ROOT, "examples", "matmul.py") + ":matmul_fp32"
    done = subprocess.run([sys.executable, "-m", "triton_codegen.cli", "compile", target, "-o", str(tmp_path),
                           "--no-verify", "--float32-matmul-precision", "high"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    [entry] = json.loads((tmp_path / "manifest.json").read_text())["modules"].values()
    assert entry["float32_matmul_precision"] == "high"
