"""Buffer dimensions derived from shape variables (`n + 3`, `m // 4 + k % 3`, `max(m, 8)`): compiled
against TVM, checked at launch with errors that name the parameter, and never evaluated as text."""

import pathlib
import re

import pytest
import torch
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes import LaunchError
from tir_passes.errors import FrontendError, UnsupportedConstructError
from triton_codegen import compile
from triton_codegen.tuning import random_arguments


@T.prim_func(s_tir=True)
def crop(a: T.handle, b: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n + 3, T.max(m, 8)), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi + 3, vj]


@T.prim_func(s_tir=True)
def widen(a: T.handle, b: T.handle, k: T.int32):
    """k appears in no dimension of its own: the scalar parameter binds it."""
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n, m // 4 + k % 3), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(vj < m // 4 + k % 3, A[vi, vj] * T.float32(2), T.float32(-1))


@pytest.fixture(scope="module")
def crop_kernel():
    return compile_and_check(crop, sizes={"n": 7, "m": 5})


@pytest.fixture(scope="module")
def widen_kernel():
    return compile_and_check(widen, sizes={"n": 5, "m": 37, "k": 5})


def test_derived_dimensions_are_data(crop_kernel, widen_kernel):
    assert crop_kernel.program.params[0].shape == (("+", "n", 3), ("max", "m", 8))
    assert widen_kernel.program.params[0].shape == ("n", ("+", ("//", "m", 4), ("%", "k", 3)))


@pytest.mark.interpreter
def test_crop_runs_at_other_sizes(crop_kernel):
    a, b = torch.rand(12, 8), torch.empty(9, 6)
    crop_kernel(a, b)
    torch.testing.assert_close(b, a[3:, :6])


@pytest.mark.interpreter
def test_widen_reads_floordiv_and_floormod_columns(widen_kernel):
    a, b = torch.rand(3, 23 // 4 + 7 % 3), torch.empty(3, 23)
    widen_kernel(a, b, 7)
    expected = torch.full((3, 23), -1.0)
    expected[:, :a.shape[1]] = a * 2
    torch.testing.assert_close(b, expected)


def test_wrong_derived_dimension_names_the_parameter(crop_kernel, widen_kernel):
    with pytest.raises(LaunchError, match=r"parameter A: dimension 0 is 9, expected n \+ 3 = 10"):
        crop_kernel(torch.rand(9, 8), torch.empty(7, 5))
    with pytest.raises(LaunchError, match=r"parameter A: dimension 1 is 8, expected max\(m, 8\) = 9"):
        crop_kernel(torch.rand(10, 8), torch.empty(7, 9))
    with pytest.raises(LaunchError, match=r"parameter A: dimension 1 is 12, expected \(m // 4\) \+ \(k % 3\) = 11"):
        widen_kernel(torch.rand(5, 12), torch.empty(5, 37), 5)


def test_a_zero_divisor_is_a_launch_error():
    @T.prim_func(s_tir=True)
    def split(a: T.handle, b: T.handle, k: T.int32):
        n = T.int32()
        A = T.match_buffer(a, (n // k,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.if_then_else(vi < n // k, A[vi], T.float32(0))

    kernel = compile(split, verify=False)
    with pytest.raises(LaunchError, match=r"parameter A: dimension 0 is n // k, which divides by zero \(n = 6, k = 0\)"):
        kernel(torch.rand(3), torch.empty(6), 0)


def test_a_variable_bound_by_no_parameter_is_refused():
    @T.prim_func(s_tir=True)
    def doubled(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n * 2,), "float32")
        B = T.match_buffer(b, (n * 2,), "float32")
        for i in range(n * 2):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]

    with pytest.raises(UnsupportedConstructError, match=r"parameter A: dimension 0 is n \* 2, but n is neither a whole "
                                                        r"dimension of a buffer parameter nor a scalar parameter"):
        compile(doubled)


def test_an_operation_outside_the_supported_ones_is_refused():
    @T.prim_func(s_tir=True)
    def halved(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (T.truncdiv(n, 2),), "float32")
        for i in range(T.truncdiv(n, 2)):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]

    with pytest.raises(UnsupportedConstructError, match=r"parameter B: dimension 0 is .*only use \+ - \* floordiv floormod "
                                                        r"min max .*found Div"):
        compile(halved)


def test_tuning_arguments_have_the_derived_shapes(widen_kernel):
    params = widen_kernel.module().PARAMS
    a, b, k = random_arguments(params, {"n": 3, "m": 23, "k": 7}, "cpu")
    assert a.shape == (3, 23 // 4 + 7 % 3) and b.shape == (3, 23) and k == 7
    with pytest.raises(FrontendError, match="parameter A: give the size k with --sizes k=N"):
        random_arguments(params, {"n": 3, "m": 23}, "cpu")


def test_no_eval_or_exec_in_the_code_generator_or_its_output(crop_kernel, widen_kernel):
    package = pathlib.Path(__file__).parents[2] / "triton_codegen"
    sources = {path.name: path.read_text() for path in sorted(package.glob("*.py"))}
    sources.update({kernel.name: kernel.source for kernel in (crop_kernel, widen_kernel)})
    calls = re.compile(r"\b(eval|exec)\s*\(")
    assert [name for name, text in sources.items() if calls.search(text)] == []
