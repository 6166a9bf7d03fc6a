"""The launcher checks every argument before anything launches, naming the parameter."""

import pytest
import torch

from tir_passes import LaunchError
from triton_codegen import compile

from rmsnorm import make_rmsnorm
from transpose import make_transpose


@pytest.fixture(scope="module")
def transpose():
    return compile(make_transpose(16, 24), verify=False)


@pytest.fixture(scope="module")
def rmsnorm():
    return compile(make_rmsnorm(8), verify=False)


def test_wrong_device(transpose):
    with pytest.raises(LaunchError, match="parameter A: tensor is on meta"):
        transpose(torch.empty(16, 24, device="meta"), torch.empty(24, 16))


def test_wrong_dtype(transpose):
    with pytest.raises(LaunchError, match="parameter B: expected dtype float32, got float64"):
        transpose(torch.rand(16, 24), torch.empty(24, 16, dtype=torch.float64))


def test_wrong_shape(transpose):
    with pytest.raises(LaunchError, match="parameter A: dimension 1 is 25, expected 24"):
        transpose(torch.rand(16, 25), torch.empty(24, 16))


def test_wrong_rank_and_count(transpose):
    with pytest.raises(LaunchError, match="parameter A: expected 2 dimensions"):
        transpose(torch.rand(16 * 24), torch.empty(24, 16))
    with pytest.raises(LaunchError, match="expected 2 arguments"):
        transpose(torch.rand(16, 24))


def test_not_a_tensor(transpose):
    with pytest.raises(LaunchError, match="parameter A: expected a torch.Tensor, got list"):
        transpose([[0.0]], torch.empty(24, 16))


def test_inconsistent_symbolic_sizes(rmsnorm):
    x, w, y = torch.rand(37, 8), torch.rand(8), torch.empty(36, 8)
    with pytest.raises(LaunchError, match=r"parameter Y: dimension 0 is 36, but rows = 37 from X.shape\[0\]"):
        rmsnorm(x, w, y)


def test_output_aliasing_an_input(transpose):
    storage = torch.rand(16 * 24 * 2)
    a = storage[: 16 * 24].view(16, 24)
    b = storage[100 : 100 + 24 * 16].view(24, 16)
    with pytest.raises(LaunchError, match="parameter B: output aliases parameter A"):
        transpose(a, b)


def test_expanded_output_is_rejected(transpose):
    with pytest.raises(LaunchError, match="parameter B: output tensor has overlapping elements"):
        transpose(torch.rand(16, 24), torch.empty(1, 16).expand(24, 16))


def test_non_contiguous_input_works(transpose):
    """Strides are kernel arguments: a transposed view is read correctly."""
    base = torch.rand(24, 16)
    a = base.t()
    assert not a.is_contiguous()
    b = torch.empty(24, 16)
    transpose(a, b)
    torch.testing.assert_close(b, a.t())


def test_non_contiguous_output_works(transpose):
    a = torch.rand(16, 24)
    holder = torch.zeros(16, 24)
    b = holder.t()  # a (24, 16) view with strides (1, 24)
    transpose(a, b)
    torch.testing.assert_close(b, a.t())


def test_scalar_parameter_must_be_a_number():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def scale(a: T.handle, b: T.handle, n: T.int32):
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float32(2)

    kernel = compile(scale, verify=False)
    with pytest.raises(LaunchError, match="parameter n: expected a Python number"):
        kernel(torch.rand(5), torch.empty(5), torch.tensor(5))
    with pytest.raises(LaunchError, match="parameter n = 6, but A.shape\\[0\\] = 5"):
        kernel(torch.rand(5), torch.empty(5), 6)
    a, b = torch.rand(5), torch.empty(5)
    kernel(a, b, 5)
    torch.testing.assert_close(b, a * 2)
