"""Plan invariance on a CI budget: every family on the cheapest program it applies to (with the
numerics), every example under one rewrite family (rotating), the attention forms against the
examples' plan, int8 quantization and LayerNorm with its statistics as outputs in one kernel, and
the reduction-order families leaving order-dependent blocks alone. The full check:
`python -m tests.plan_invariance`."""

import re

import pytest
from tvm.script import tirx as T

from conv2d_nhwc import make_conv2d_nhwc
from plan_invariance.check import attention_forms, budget_cases, check_form, check_program, example_programs, plan
from plan_invariance.rewrites import REWRITES, parse, rewrites, script_of

EXAMPLES = example_programs()
FORMS = attention_forms()
# the budget's pool for the numerics: the examples, and the attention forms at a small size
SMALL = {f"{name} (1x1x20x16)": func for name, func, _ in attention_forms(shape=(1, 1, 20, 16))}
POOL = {**EXAMPLES, **SMALL}
# the families only a convolution has (its padding, its three reduction loops), at a small size
POOL["conv2d_nhwc (1x5x6x16x16)"] = make_conv2d_nhwc(1, 5, 6, 16, 16)
BY_FAMILY, _ = budget_cases(POOL)
_, BY_PROGRAM = budget_cases(EXAMPLES)


@T.prim_func(s_tir=True)
def lower_triangle(X: T.Buffer((19, 19), "float32"), Y: T.Buffer((19, 19), "float32")):
    for i, j in T.grid(19, 19):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] * T.if_then_else(vj > vi, T.float32(0), T.float32(1))


POOL["lower_triangle"] = lower_triangle
BY_FAMILY["if_then_else_as_select"] = "lower_triangle"


@pytest.mark.parametrize("family", sorted(BY_FAMILY))
def test_family_keeps_the_plan_and_the_result(family):
    """Each family on the cheapest example it applies to: the same plan, and TVM's result."""
    name = BY_FAMILY[family]
    outcome = check_program(name, POOL[name], [family], numerics=True)
    assert outcome.checked and not outcome.findings, "\n".join(str(f) for f in outcome.findings)


def test_every_family_applies_to_some_program():
    assert set(BY_FAMILY) == set(REWRITES)


@pytest.mark.parametrize("name", sorted(BY_PROGRAM))
def test_example_keeps_its_plan_under_a_rewrite(name):
    outcome = check_program(name, EXAMPLES[name], [BY_PROGRAM[name]], numerics=False)
    assert outcome.checked and not outcome.findings, "\n".join(str(f) for f in outcome.findings)


@pytest.mark.parametrize("form", range(len(FORMS)), ids=[f[0] for f in FORMS])
def test_attention_form_plans_like_the_examples_form(form):
    name, func, reference = FORMS[form]
    outcome = check_form(name, func, reference, numerics=False)
    assert not outcome.findings, "\n".join(str(f) for f in outcome.findings)


def test_causal_attention_written_inline_keeps_the_tile_window():
    for name, func, _ in FORMS[:3]:
        assert any(kernel.windows for kernel in plan(func).kernels), f"{name}: the causal window is lost"


def test_int8_row_quantization_is_one_kernel():
    """absmax is read by the scale's and the quantized values' nests: merged, one kernel."""
    quantize = EXAMPLES["quantize_int8"]
    assert len(plan(quantize).kernels) == 1


def _layernorm_with_statistics(M: int, N: int):
    @T.prim_func(s_tir=True)
    def layernorm_stats(X: T.Buffer((M, N), "float32"), Y: T.Buffer((M, N), "float32"),
                        Mean: T.Buffer((M,), "float32"), Rstd: T.Buffer((M,), "float32")):
        mean = T.sblock_alloc_buffer((M,), "float32")
        var = T.sblock_alloc_buffer((M,), "float32")
        for i, j in T.grid(M, N):
            with T.sblock("mean"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    mean[vi] = T.float32(0)
                mean[vi] = mean[vi] + X[vi, vj] * T.float32(1.0 / N)
        for i, j in T.grid(M, N):
            with T.sblock("var"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    var[vi] = T.float32(0)
                var[vi] = var[vi] + (X[vi, vj] - mean[vi]) * (X[vi, vj] - mean[vi]) * T.float32(1.0 / N)
        for i in range(M):
            with T.sblock("mean_out"):
                vi = T.axis.remap("S", [i])
                Mean[vi] = mean[vi]
        for i in range(M):
            with T.sblock("rstd_out"):
                vi = T.axis.remap("S", [i])
                Rstd[vi] = T.rsqrt(var[vi] + T.float32(1e-5))
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = (X[vi, vj] - mean[vi]) * T.rsqrt(var[vi] + T.float32(1e-5))

    return layernorm_stats


def test_layernorm_statistics_read_by_separate_nests_stay_in_one_kernel():
    func = _layernorm_with_statistics(21, 64)
    assert len(plan(func).kernels) == 1
    outcome = check_program("layernorm_stats", func, ["rename"], numerics=True)
    assert not outcome.findings, "\n".join(str(f) for f in outcome.findings)


def test_rewrites_change_the_text():
    """Each family that applies yields a different program (a no-op rewrite would prove nothing)."""
    func = EXAMPLES["causal_attention"]
    found = dict(rewrites(func))
    assert {"rename", "mirrored_comparisons", "negated_comparisons", "large_negative_mask"} <= set(found)
    for family, rewritten in found.items():
        assert rewritten.script() != func.script(), family


def _two_axis_reductions():
    """An arg-max and a sum over the last two axes of one (5, 6, 7) input (TVM's topi)."""
    from tvm import te, topi

    A = te.placeholder((5, 6, 7), "float32", name="A")
    argmax = te.create_prim_func([A, topi.argmax(A, axis=(1, 2))])
    total = te.create_prim_func([A, topi.sum(A, axis=(1, 2))])
    return argmax, total


def test_reduction_order_families_reorder_only_commutative_self_updates():
    """An arg-max's reduction loops keep their order (its ties follow it); a sum's are reversed.
    Moving all reduction loops outside the spatial ones keeps each element's order: both."""
    argmax, total = (script_of(func) for func in _two_axis_reductions())
    assert REWRITES["reduction_loops_reversed"](argmax) is None
    assert "for k1, k2, ax0 in" in REWRITES["reduction_loops_first"](argmax)
    assert "for ax0, k2, k1 in" in REWRITES["reduction_loops_reversed"](total)


def test_update_and_cast_families_keep_the_update_parseable():
    """The update and cast families on a padded fp16 convolution: each yields a program whose
    update is the rewritten one (the parse succeeds, the text changes as the family says)."""
    conv = EXAMPLES["conv2d_nhwc"]
    found = {family: rewritten.script() for family, rewritten in rewrites(
        conv, ["update_commuted", "factors_commuted", "cast_inside_selection", "operand_cast_as_stage"])}
    assert set(found) == {"update_commuted", "factors_commuted", "cast_inside_selection", "operand_cast_as_stage"}
    assert found["update_commuted"].rstrip().endswith("+ Y[vn, vh, vw, vf]")
    assert '* T.Cast("float32", T.if_then_else(' in found["factors_commuted"]
    assert 'T.if_then_else(' in found["cast_inside_selection"] and 'T.Cast("float32", T.if_then_else(' \
        not in found["cast_inside_selection"]
    staged = dict(rewrites(EXAMPLES["linear_fp16"], ["operand_cast_as_stage"]))["operand_cast_as_stage"].script()
    assert 'T.sblock("X_f32")' in staged and 'T.sblock("W_f32")' in staged and "X_f32[vi, vk] * W_f32[vj, vk]" in staged



def test_the_plan_places_tile_axes_by_the_output_index_they_drive():
    """128 rows by 64 columns is another plan than 64 rows by 128 columns: each tile axis carries the
    (parameter, index) positions of the stores it drives, whatever the loops are called or the
    order they are written in; the reduction axis drives none."""
    from matmul import make_matmul

    kernel, = plan(make_matmul(67, 45, 33)).kernels
    stored = sorted(axis.stored for axis in kernel.tile_axes)
    assert stored == [(), ((2, 0),), ((2, 1),)], kernel.describe()
    reversed_loops = rewrites(make_matmul(67, 45, 33), ["spatial_loops_reversed"])[0][1]
    assert plan(reversed_loops) == plan(make_matmul(67, 45, 33))
    # a user loop named as the passes name theirs (softmax's j as ax0): the same plan, every axis placed
    softmax = EXAMPLES["softmax"]
    renamed = parse(re.sub(r"\bj\b", "ax0", script_of(softmax)))
    assert plan(renamed) == plan(softmax) and all(axis.stored for axis in plan(softmax).kernels[0].tile_axes)
