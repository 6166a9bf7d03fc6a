"""A second opinion (tir_passes/checks/interpret.py): where TVM's build of the input and the kernel
disagree, an independent evaluation of the TIR (exact integers, float64) decides. TVM's wrong
floordiv/floormod by a negative divisor is TVM's; the correct kernel is accepted. A kernel that is
wrong stays refused. (An fp16 row sum no longer needs it: the reference accumulates 16-bit
reductions in fp32, tests/numerics/test_accumulation.py.)"""

import numpy as np
import pytest

import programs
import reference_programs
from tir_passes.checks.interpret import evaluate
from tir_passes.checks.numerics import ReferenceRun
from triton_codegen import compile
from triton_codegen.check import check_kernel, second_opinion


@pytest.mark.parametrize("name", ["column_sum", "fp16_sum_of_squares", "int_row_sum", "leaky_triangle",
                                  "max_over_two_axes", "modular_gather", "strided_window", "two_outputs_offset_loop"])
def test_the_evaluation_agrees_with_tvm_where_tvm_is_right(name):
    reference = ReferenceRun.of(getattr(programs, name))
    scalars = {p.name: reference.scalars[p.name] for p in reference.concrete.params if p.name in reference.scalars}
    evaluated = [evaluate(reference.concrete, data, scalars) for data in reference.datasets]
    assert reference.mismatches(evaluated) == []


def test_floor_division_by_a_negative_divisor_is_exact():
    reference = ReferenceRun.of(reference_programs.floordiv_by_negative)
    a = reference.inputs["A"].astype(np.int64)
    [out] = [evaluate(reference.concrete, reference.inputs, {})["C"]]
    assert out.tolist() == ((a % 2) // -2 + a % -3).tolist()   # Python's // and % floor


@pytest.mark.interpreter
def test_a_correct_kernel_is_accepted_where_tvm_is_wrong():
    kernel = compile(reference_programs.floordiv_by_negative)
    report = kernel.check_report
    assert report.ok and report.tvm_overruled, str(report)
    assert "TVM's llvm build of the input is wrong here" in report.second_opinion
    assert "independent evaluation" in str(report)


@pytest.mark.interpreter
def test_a_wrong_kernel_stays_refused_with_the_verdict():
    kernel = compile(reference_programs.divide_assumed)
    reference = ReferenceRun.of(reference_programs.divide_assumed)
    wrong = [dict(out, C=out["C"] + 1) for out in reference.outputs]
    problems, verdict = second_opinion(reference, wrong, reference.mismatches(wrong))
    assert problems and "agrees with TVM's build" in verdict
    assert check_kernel(kernel, reference).tvm_overruled is False
