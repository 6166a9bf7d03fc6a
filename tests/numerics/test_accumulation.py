"""One accumulation rule (tir_passes/checks/accumulation.py): a reduction into a 16-bit float buffer
accumulates in fp32 in the kernels and in the reference they are checked against (TVM's llvm build
of the PrimFunc rewritten to accumulate such a reduction in fp32), so a long fp16 row sum is
checked under verify=True without a false alarm or a second opinion, and a wrong kernel, TVM's own
16-bit accumulation among them, is still caught."""

import numpy as np
import pytest
from tvm.script import tirx as T

import reference_programs
from tir_passes.checks.accumulation import reduction_targets, widen_accumulators
from tir_passes.checks.numerics import ReferenceRun, compare_arrays
from triton_codegen import compile
from triton_codegen.check import check_kernel


@T.prim_func(s_tir=True)
def bf16_sum_then_scale(A: T.Buffer((3, 900), "bfloat16"), S: T.Buffer((3,), "bfloat16"),
                        Y: T.Buffer((3, 900), "bfloat16")):
    for k, i in T.grid(900, 3):  # the reduction loop outermost, the term on the left: the same sum
        with T.sblock("sum"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                S[vi] = T.bfloat16(0)
            S[vi] = A[vi, vk] * T.bfloat16(0.5) + S[vi]
    for i, j in T.grid(3, 900):
        with T.sblock("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = A[vi, vj] - S[vi]


@T.prim_func(s_tir=True)
def fp16_sum_then_scale(A: T.Buffer((3, 900), "float16"), S: T.Buffer((3,), "float16"),
                        Y: T.Buffer((3, 900), "float16")):
    for k, i in T.grid(900, 3):
        with T.sblock("sum"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                S[vi] = T.float16(0)
            S[vi] = A[vi, vk] * T.float16(0.5) + S[vi]
    for i, j in T.grid(3, 900):
        with T.sblock("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = A[vi, vj] - S[vi]


def _sequential(a: np.ndarray, accumulate: str, out_dtype) -> np.ndarray:
    """Row sums added left to right in `accumulate`, rounded once to `out_dtype`."""
    return np.cumsum(a.astype(accumulate), axis=1, dtype=accumulate)[:, -1].astype(out_dtype)


def test_the_reference_accumulates_a_16_bit_row_sum_in_fp32():
    reference = ReferenceRun.of(reference_programs.fp16_row_sum)
    for data, out in zip(reference.datasets, reference.outputs):
        assert out["S"].dtype == np.float16
        assert out["S"].tolist() == _sequential(data["A"], "float32", np.float16).tolist()
        # 16-bit accumulation, TVM's own build of the TIR as written, is further off than fp16's tolerance
        narrow = _sequential(data["A"], "float16", np.float16)
        assert compare_arrays("S", out["S"], narrow, "float16") is not None


def test_only_reductions_into_16_bit_floats_are_widened():
    assert [b.name for b in reduction_targets(reference_programs.fp16_row_sum)] == ["S"]
    assert [b.name for b in reduction_targets(bf16_sum_then_scale)] == ["S"]
    assert widen_accumulators(reference_programs.divide_assumed)[1] == {}
    wide, widened = widen_accumulators(bf16_sum_then_scale)
    assert widened == {"S": "bfloat16"}
    script = wide.script()
    assert 'S: T.Buffer((3,), "float32")' in script
    assert 'T.Cast("bfloat16", S[vi])' in script  # the consumer reads what the kernel stores


def test_a_consumer_reads_the_sum_rounded_once():
    # (with bfloat16, TVM's legalization drops a round trip through bf16: the consumer reads the
    # fp32 sum, within bf16's tolerance of the rounded one)
    reference = ReferenceRun.of(fp16_sum_then_scale)
    data, out = reference.datasets[0], reference.outputs[0]
    total = (data["A"].astype(np.float32) * np.float32(0.5)).cumsum(axis=1, dtype=np.float32)[:, -1]
    assert out["S"].tolist() == total.astype(np.float16).tolist()
    expected = data["A"] - out["S"][:, None]
    assert out["Y"].tolist() == expected.tolist()


@pytest.mark.interpreter
@pytest.mark.parametrize("func", [reference_programs.fp16_row_sum, bf16_sum_then_scale], ids=["fp16", "bf16"])
def test_a_long_16_bit_sum_verifies_without_a_second_opinion(func):
    kernel = compile(func, verify=True)
    report = kernel.check_report
    assert report.ok and not report.tvm_overruled and report.second_opinion == "", str(report)


@pytest.mark.interpreter
def test_a_wrong_kernel_is_still_caught():
    kernel = compile(reference_programs.fp16_row_sum, verify=False)
    reference = ReferenceRun.of(reference_programs.fp16_row_sum)

    def off_by_a_little(A, S, interpret=True):
        kernel(A, S, interpret=interpret)
        S[1:2] += 4

    off_by_a_little.name = "off_by_a_little"
    report = check_kernel(off_by_a_little, reference)
    assert not report.ok and "S:" in str(report) and not report.tvm_overruled
    narrow = [dict(out, S=_sequential(d["A"], "float16", np.float16))
              for d, out in zip(reference.datasets, reference.outputs)]
    assert reference.mismatches(narrow)  # a kernel accumulating in 16 bits would be refused
