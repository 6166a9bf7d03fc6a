"""The shape-reduced copy is checked only where it takes the full-size program's decisions
(tir_passes/checks/decision_plan.py): a softmax whose full rows stream online is checked at a copy
whose rows stream online too, and the report says so; a copy that cannot decide alike is named."""

from softmax import make_softmax
from tir_passes.checks.decision_plan import DecisionPlan, KernelPlan, decision_plan
from tir_passes.checks.shape_reduction import (ELEMENTS_OF_A_LARGER_COPY, _elements_with, is_order_preserving,
                                               larger_mappings)
from triton_codegen import compile


def test_a_long_softmax_is_checked_at_sizes_where_it_streams_online():
    kernel = compile(make_softmax(20, 20000))
    numerics = kernel.pipeline.numerics
    full, checked = decision_plan(kernel.tir["main"]), decision_plan(numerics.final_module["main"])
    assert full.kernels[0].online and checked == full
    assert numerics.copy.sizes[20000] > 16384   # longer than one tile, as the full rows are
    where = kernel.check_report.where
    assert "decides as the full-size program does" in where and "the smallest copy did not" in where
    assert "online streaming" in where


def test_a_small_softmax_copy_needs_no_escalation():
    kernel = compile(make_softmax(700, 600))   # rows fit one tile at both sizes
    assert kernel.pipeline.numerics.describe().endswith("it decides as the full-size program does")


def test_plan_differences_name_what_differs():
    full = DecisionPlan((KernelPlan(("m", "s"), ("m: shift", "s: rescale"), (), (), 0),))
    copy = DecisionPlan((KernelPlan(("m", "s"), (), (), (), 0),))
    [difference] = full.differences(copy)
    assert "online streaming (m: shift, s: rescale) at full size, () in the copy" in difference
    assert full.differences(full) == []
    assert "2 kernel(s)" in DecisionPlan(full.kernels * 2).differences(copy)[0]


def test_larger_copies_keep_the_order_of_sizes_and_the_size_limit():
    func = make_softmax(300, 20000)
    mappings = larger_mappings(func)
    assert mappings and all(is_order_preserving(m) for m in mappings)
    assert all(_elements_with(func, m) <= ELEMENTS_OF_A_LARGER_COPY for m in mappings)
    assert {300: 108, 20000: 16416} in mappings
