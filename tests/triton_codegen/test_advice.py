"""kernel.advice: typed records of what costs speed, derived from the decisions made."""

import dataclasses
import os
import subprocess
import sys

from tvm.script import tirx as T

from examples.matmul import make_matmul
from examples.softmax import make_softmax
from tir_passes.contracts.gpu_specs import gpu_spec
from triton_codegen import compile
from triton_codegen.advice import (FP32_IEEE_DOT, GLOBAL_ROUND_TRIP, NOT_A_DOT, REGISTER_SPILL, Advice,
                                   program_advice)
from swiglu import make_swiglu  # examples/ is on the path (conftest.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kinds(kernel) -> list[str]:
    return [a.kind for a in kernel.advice]


def _two_projections():
    """SwiGLU as users write it: two contraction blocks over X, then the elementwise gate."""
    return make_swiglu(37, 45, 53)


def test_a_contraction_that_is_not_a_dot():
    assert NOT_A_DOT not in _kinds(compile(_two_projections(), verify=False))
    kernel = compile(_two_projections(), verify=False, disable=("ShareContractionLoops",))
    advice = [a for a in kernel.advice if a.kind == NOT_A_DOT]
    assert len(advice) == 1 and "serial-reduction" in advice[0].cost and isinstance(advice[0], Advice)


def test_an_fp32_ieee_dot_and_what_to_choose_instead():
    matmul = make_matmul(37, 45, 53, "float32", "float32")
    advice = compile(matmul, verify=False, float32_matmul_precision="highest").advice
    assert [a.kind for a in advice] == [FP32_IEEE_DOT] and "float32_matmul_precision='high'" in advice[0].instead
    assert FP32_IEEE_DOT not in _kinds(compile(matmul, verify=False, float32_matmul_precision="high"))
    fp16 = compile(make_matmul(37, 45, 53), verify=False, float32_matmul_precision="highest")
    assert FP32_IEEE_DOT not in _kinds(fp16)


def test_a_kernel_split_through_global_memory():
    """The epilogue reads a neighbouring row's sum, so LoopFusion keeps S in memory between kernels."""

    @T.prim_func(s_tir=True)
    def neighbours(A: T.Buffer((37, 45), "float32"), C: T.Buffer((36,), "float32")):
        S = T.sblock_alloc_buffer((37,), "float32")
        for i, k in T.grid(37, 45):
            with T.sblock("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + A[vi, vk]
        for i in range(36):
            with T.sblock("C"):
                vi = T.axis.spatial(36, i)
                C[vi] = S[vi] + S[vi + 1]

    kernel = compile(neighbours, verify=False)
    advice = [a for a in kernel.advice if a.kind == GLOBAL_ROUND_TRIP]
    assert len(kernel.program.kernels) == 2 and len(advice) == 1
    assert advice[0].subject == "buffer S" and "148 bytes" in advice[0].cost


def test_a_whole_row_in_registers_that_spills():
    """softmax's row of 8192 is one whole tile; at one warp it is 256 values per thread."""
    kernel = compile(make_softmax(3, 8192), verify=False)
    assert REGISTER_SPILL not in _kinds(kernel)
    one_warp = dataclasses.replace(kernel.program, kernels=tuple(dataclasses.replace(k, num_warps=1)
                                                                 for k in kernel.program.kernels))
    advice = [a for a in program_advice(one_warp, kernel.tir["main"], gpu_spec("H200")) if a.kind == REGISTER_SPILL]
    assert len(advice) == 1 and "8192 elements" in advice[0].cost


def test_cli_compile_prints_the_advice(tmp_path):
    target = os.path.join(ROOT, "examples", "matmul.py") + ":matmul_fp32"
    done = subprocess.run([sys.executable, "-m", "triton_codegen.cli", "compile", target, "-o", str(tmp_path),
                           "--no-verify", "--float32-matmul-precision", "highest"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    assert "advice: matmul_fp32_kernel0: block C: a tl.dot of fp32 operands in IEEE fp32" in done.stdout
