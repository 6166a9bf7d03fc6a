"""The launcher checks every argument before anything launches, naming the parameter."""

import pytest
import torch

from tvm.script import tirx as T

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
    with pytest.raises(LaunchError, match="parameter A: tensor is on meta, but kernels run on cpu"):
        transpose(torch.empty(16, 24, device="meta"), torch.empty(24, 16, device="meta"))


def test_arguments_on_different_devices(transpose):
    with pytest.raises(LaunchError, match="arguments on different devices: A on meta, B on cpu"):
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
    with pytest.raises(LaunchError, match=r"run\(A, B\) is missing B"):
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


def test_scalars_are_declared_and_cast_to_their_dtype():
    """int64 and int8 scalars compute in their dtype (the interpreter would infer int32 from a
    Python int), against TVM and ahead of time for sm_90/sm_80 with the annotated signature."""
    from tvm.script import tirx as T

    from helpers import compile_and_check

    @T.prim_func(s_tir=True)
    def offsets(A: T.Buffer((37,), "int64"), B: T.Buffer((37,), "int8"), s: T.int64, t: T.int8, u: T.float64):
        for i in range(37):
            with T.sblock("B"):
                vi = T.axis.spatial(37, i)
                B[vi] = T.Cast("int8", A[vi] + s * s) + t * t + T.Cast("int8", u)

    kernel = compile_and_check(offsets)
    source = kernel.source
    assert "s: tl.int64, t: tl.int8, u: tl.float64" in source
    assert "s = tl.cast(tl.cast(s, tl.uint64), tl.int64)" in source and "t = tl.cast(t, tl.int8)" in source
    a, b = torch.arange(37, dtype=torch.int64), torch.empty(37, dtype=torch.int8)
    kernel(a, b, 2**31 + 1, 12, 2.0)  # 12 * 12 wraps in int8 as in TVM: 144 -> -112
    expected = ((a + (2**31 + 1) ** 2) % 256).to(torch.uint8).to(torch.int8) + torch.tensor(-112, dtype=torch.int8) + 2
    assert torch.equal(b, expected)


def test_checked_arguments_are_remembered_by_their_metadata_only(transpose, monkeypatch):
    """A second call with arguments of the same metadata skips the checks (they read nothing
    else); a call with other metadata, or one that failed, is checked in full."""
    module = transpose.module(True)
    checked = []
    original = module._check_all
    monkeypatch.setattr(module, "_check_all", lambda params, args: checked.append(1) or original(params, args))
    module._CHECKED.clear()
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    transpose(a, b)
    transpose(a, b)
    assert len(checked) == 1 and torch.equal(b, a.t())
    with pytest.raises(LaunchError, match="output tensor requires grad"):
        transpose(a, torch.empty(24, 16, requires_grad=True))   # other metadata: checked, and refused
    with pytest.raises(LaunchError, match="output tensor requires grad"):
        transpose(a, torch.empty(24, 16, requires_grad=True))   # a failure is never remembered
    assert len(checked) == 3
    assert all(isinstance(meta, tuple) for key in module._CHECKED for meta in key[2:])   # no tensor kept alive


def test_a_remembered_zero_keeps_its_sign():
    """-0.0 == 0.0, but a kernel dividing by it tells them apart: the cache keys the sign too."""
    @T.prim_func(s_tir=True)
    def reciprocal(A: T.Buffer((8,), "float32"), x: T.float32, B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("b"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] / x

    kernel = compile(reciprocal, verify=False)
    a, b = torch.ones(8), torch.empty(8)
    kernel(a, 0.0, b)
    assert b[0].item() == float("inf")
    kernel(a, -0.0, b)
    assert b[0].item() == float("-inf")
