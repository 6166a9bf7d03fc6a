"""The bounds check proves accesses under the conditions they execute in, reports data-dependent
indices as guarded, uses `T.assume` facts, and still catches real out-of-bounds accesses."""

import tvm
from tvm import tirx
from tvm.script import tirx as T

from tir_passes.checks import bounds
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.analyses.path_conditions import cases
from tir_passes.passes.tiling import tile_function


def _problems(func) -> list[str]:
    return bounds.check_bounds(tvm.IRModule({"main": func}))


@T.prim_func(s_tir=True)
def scan(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("scan"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


@T.prim_func(s_tir=True)
def scan_wrong_guard(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("scan"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 1, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


@T.prim_func(s_tir=True)
def embedding(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("embed"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = table[ids[vi], vj]


@T.prim_func(s_tir=True)
def embedding_assumed(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"),
                      Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("embed"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.assume(0 <= ids[vi] and ids[vi] < 53)
            Out[vi, vj] = table[ids[vi], vj]


def test_scan_guard_proves_the_previous_element_in_bounds():
    """Under `not (vj == 0)` the else branch reads Y[vi, vj - 1] with vj >= 1."""
    assert _problems(scan) == []


def test_wrong_scan_guard_is_caught():
    """With `vj == 1` as the guard, the else branch runs at vj = 0 and reads Y[vi, -1]."""
    problems = _problems(scan_wrong_guard)
    assert len(problems) == 1
    assert "Y[vi, vj - 1]" in problems[0] and "dimension 1" in problems[0]


def test_shifted_read_is_still_caught():
    @T.prim_func(s_tir=True)
    def shifted(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi + 1]

    report = bounds.func_bounds_report(shifted)
    assert [p.access for p in report.problems] == ["A[vi + 1]"]
    assert report.guarded == ()


def test_if_statement_with_disjunction_splits_into_cases():
    """`not (vj == 0 or vj == 28)` is `vj != 0 and vj != 28`: both neighbours are in bounds."""
    @T.prim_func(s_tir=True)
    def stencil(X: T.Buffer((29,), "float32"), Y: T.Buffer((29,), "float32")):
        for j in range(29):
            with T.sblock("Y"):
                vj = T.axis.spatial(29, j)
                if vj == 0 or vj == 28:
                    Y[vj] = X[vj]
                else:
                    Y[vj] = X[vj - 1] + X[vj + 1]

    assert _problems(stencil) == []


def test_one_sided_disjunction_is_not_enough():
    """Only `vj != 0` is known in the else branch: X[vj + 1] still reads X[29] at vj = 28."""
    @T.prim_func(s_tir=True)
    def stencil(X: T.Buffer((29,), "float32"), Y: T.Buffer((29,), "float32")):
        for j in range(29):
            with T.sblock("Y"):
                vj = T.axis.spatial(29, j)
                if vj == 0:
                    Y[vj] = X[vj]
                else:
                    Y[vj] = X[vj - 1] + X[vj + 1]

    problems = _problems(stencil)
    assert len(problems) == 1 and "X[vj + 1]" in problems[0]


def test_block_predicate_on_loop_variables_guards_the_body():
    @T.prim_func(s_tir=True)
    def shift(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                T.where(i >= 1)
                B[vi] = A[vi - 1]

    assert _problems(shift) == []


def test_select_loads_must_be_in_bounds_unconditionally():
    """T.Select evaluates both values whatever its condition, unlike T.if_then_else."""
    @T.prim_func(s_tir=True)
    def shift(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = T.Select(vi > 0, A[vi - 1], T.float32(0))

    problems = _problems(shift)
    assert len(problems) == 1 and "A[vi - 1]" in problems[0]


def test_data_dependent_index_is_guarded_not_a_problem():
    report = bounds.func_bounds_report(embedding)
    assert report.problems == ()
    assert [(g.access, g.dimension, g.index) for g in report.guarded] == [("table[ids[vi], vj]", 0, "ids[vi]")]
    guarded = bounds.guarded_accesses(tvm.IRModule({"main": embedding}))
    assert len(guarded) == 1 and "guarded at run time" in guarded[0]


def test_assumed_range_proves_the_gather():
    report = bounds.func_bounds_report(embedding_assumed)
    assert report.problems == () and report.guarded == ()
    assert "table[ids[vi], vj]" in report.proven


def test_assumption_survives_tiling():
    """After Tiling the block has a tail predicate; the fact holds under it and still applies."""
    tiled = tile_function(embedding_assumed, gpu_spec("H200"))
    report = bounds.func_bounds_report(tiled)
    assert report.problems == () and report.guarded == ()


def test_assumption_that_does_not_cover_the_table_leaves_the_gather_guarded():
    @T.prim_func(s_tir=True)
    def loose(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 45), "float32")):
        for i, j in T.grid(37, 45):
            with T.sblock("embed"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.assume(0 <= ids[vi] and ids[vi] < 54)
                Out[vi, vj] = table[ids[vi], vj]

    assert len(bounds.func_bounds_report(loose).guarded) == 1


def test_assumption_under_an_if_is_not_used_elsewhere():
    """A fact stated only when vi < 10 says nothing about the other rows."""
    @T.prim_func(s_tir=True)
    def partial(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 45), "float32")):
        for i, j in T.grid(37, 45):
            with T.sblock("embed"):
                vi, vj = T.axis.remap("SS", [i, j])
                if vi < 10:
                    T.assume(0 <= ids[vi] and ids[vi] < 53)
                Out[vi, vj] = table[ids[vi], vj]

    assert len(bounds.func_bounds_report(partial).guarded) == 1


def test_cases_negate_integer_comparisons_and_split_disjunctions():
    a, b = tirx.Var("a", "int32"), tirx.Var("b", "int32")
    assert [[str(c) for c in case] for case in cases([tirx.Not(a == b)])] == [["a < b"], ["a > b"]]
    assert [[str(c) for c in case] for case in cases([tirx.Not(tirx.And(a < b, b <= 3))])] == [["a >= b"], ["b > 3"]]


def test_float_comparisons_are_not_negated():
    """`not (x < y)` is not `x >= y` when x is NaN."""
    x, y = tirx.Var("x", "float32"), tirx.Var("y", "float32")
    [[condition]] = cases([tirx.Not(x < y)])
    assert isinstance(condition, tirx.Not)
