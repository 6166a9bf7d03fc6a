"""16-bit floats computed as TVM's llvm build computes them, and reference data of every dtype.

TVM legalizes bfloat16 arithmetic to float32 and rounds once at the store; it computes float16
natively, rounding after every operation. The kernels must do the same: `max(x + 256, 0) - 256`
keeps x's digits in bfloat16, and `max(x + 1024, 0) - 1024` rounds x to a whole number in float16.
"""

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.s_tir.meta_schedule.testing import te_workload
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes import UnsupportedConstructError
from tir_passes.checks.numerics import ReferenceRun


@T.prim_func(s_tir=True)
def bf16_program(A: T.Buffer((67, 45), "bfloat16"), B: T.Buffer((45,), "bfloat16"), F: T.Buffer((67, 45), "float32"),
                 C: T.Buffer((67, 45), "bfloat16"), D: T.Buffer((67, 45), "bfloat16"), E: T.Buffer((67, 45), "float32"),
                 I: T.Buffer((67, 45), "int32"), S: T.Buffer((67,), "bfloat16")):
    for i, j in T.grid(67, 45):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.exp(A[vi, vj] * B[vj] + A[vi, vj]) / (T.abs(A[vi, vj] - B[vj]) + T.bfloat16(1.5)) \
                - T.max(A[vi, vj], T.bfloat16(0))
            # A in float32; rounded after the addition it would be even (T.max keeps TVM from cancelling)
            D[vi, vj] = T.max(A[vi, vj] + T.bfloat16(256), T.bfloat16(0)) - T.bfloat16(256)
            # BF16ComputeLegalize makes the inner cast a float32 cast: no rounding
            E[vi, vj] = T.Cast("float32", T.Cast("bfloat16", F[vi, vj] * T.float32(3)) * A[vi, vj])
            I[vi, vj] = T.Cast("int32", A[vi, vj] * T.bfloat16(9))
    for i, k in T.grid(67, 45):
        with T.sblock("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.bfloat16(0)
            S[vi] = S[vi] + (A[vi, vk] * B[vk] + T.bfloat16(0.25))


@T.prim_func(s_tir=True)
def fp16_program(A: T.Buffer((67, 45), "float16"), B: T.Buffer((45,), "float16"), C: T.Buffer((67, 45), "float16"),
                 D: T.Buffer((67, 45), "float16"), S: T.Buffer((67,), "float16")):
    for i, j in T.grid(67, 45):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.exp(A[vi, vj] * B[vj] + A[vi, vj]) / (T.abs(A[vi, vj] - B[vj]) + T.float16(1.5)) \
                - T.max(A[vi, vj], T.float16(0))
            # rounded after the addition, as TVM does: A to a whole number
            D[vi, vj] = T.max(A[vi, vj] + T.float16(1024), T.float16(0)) - T.float16(1024)
    for i, k in T.grid(67, 45):
        with T.sblock("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float16(0)
            S[vi] = S[vi] + (A[vi, vk] * B[vk] + T.float16(0.25))


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("func", [bf16_program, fp16_program], ids=lambda f: str(f.attrs["global_symbol"]))
def test_half_precision_matches_tvm(func):
    """An elementwise chain of several ops, a value whose rounding tells the two apart, casts,
    and a row sum (accumulated in float32 here, rounded per step by TVM: within tolerance)."""
    compile_and_check(func)


def test_bf16_reference_data_is_bfloat16():
    reference = ReferenceRun.of(bf16_program)
    dtypes = {name: str(array.dtype) for name, array in reference.inputs.items()}
    assert dtypes["A"] == dtypes["S"] == "bfloat16"
    assert np.isfinite(reference.outputs[0]["S"].astype("float32")).all()


def _depthwise_conv2d():
    """TVM's depthwise conv2d workload ("DEP") at a small size: NHWC input (1, 9, 7, 3) and a
    (1, 3, 3, 3) weight, both with a size-1 leading dimension."""
    return te.create_prim_func(te_workload.depthwise_conv2d_nhwc(1, 9, 7, 3, 3, 1))


def test_parameters_sharing_a_name_are_refused():
    """te.placeholder names both DEP inputs 'placeholder': the reference cannot tell them apart."""
    with pytest.raises(UnsupportedConstructError, match=r"parameters #0 and #1 of the PrimFunc are both named 'placeholder'"):
        ReferenceRun.of(_depthwise_conv2d())


@pytest.mark.interpreter
@pytest.mark.aot
def test_size_one_dimension_parameters_match_tvm():
    # printing and parsing gives the parameters distinct names (placeholder, placeholder_1)
    func = tvm.script.from_source(_depthwise_conv2d().script())
    compile_and_check(func)
