"""Catalogue section D: launch-time arguments (docs/bad-input.md has the table).

The launcher (triton_codegen/runtime_support.py, copied into every module) checks every argument
before anything launches and names the parameter. Device checks run on the CPU with CPU and meta
tensors, and with the module's mode switched to "compiled" (no tensor reaches a kernel then).
"""

import pytest
import torch

from catalogue_programs import add_scalar, scale, scale_rows, transpose
from tir_passes import LaunchError
from triton_codegen import compile


@pytest.fixture(scope="module")
def scale_kernel():
    return compile(scale, verify=False)


@pytest.fixture(scope="module")
def rows_kernel():
    return compile(scale_rows, verify=False)


@pytest.fixture(scope="module")
def scalar_kernel():
    return compile(add_scalar, verify=False)


def _compiled_mode(monkeypatch, kernel, cuda: bool):
    """The module as a GPU process without TRITON_INTERPRET would see it; returns the module."""
    module = kernel.module(True)
    monkeypatch.setattr(module, "_INTERPRETED", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    return module


def test_38_cpu_tensor_given_to_a_cuda_kernel(scale_kernel, monkeypatch):
    module = _compiled_mode(monkeypatch, scale_kernel, cuda=True)
    with pytest.raises(module.LaunchError, match="parameter A: tensor is on cpu, but kernels run on cuda"):
        module.run(torch.rand(67, 45), torch.empty(67, 45))


def test_39_arguments_on_different_devices_are_named(scale_kernel):
    with pytest.raises(LaunchError, match="arguments on different devices: A on cpu, B on meta"):
        scale_kernel(torch.rand(67, 45), torch.empty(67, 45, device="meta"))


def test_40_wrong_dtype(scale_kernel):
    with pytest.raises(LaunchError, match="parameter A: expected dtype float32, got float64"):
        scale_kernel(torch.rand(67, 45, dtype=torch.float64), torch.empty(67, 45))


def test_41_wrong_shape_and_inconsistent_symbolic_sizes(scale_kernel, rows_kernel):
    with pytest.raises(LaunchError, match="parameter B: dimension 1 is 44, expected 45"):
        scale_kernel(torch.rand(67, 45), torch.empty(67, 44))
    with pytest.raises(LaunchError, match=r"parameter B: dimension 0 is 127, but n = 128 from A.shape\[0\]"):
        rows_kernel(torch.rand(128), torch.empty(127))


def test_42_non_contiguous_non_square_views_are_correct(scale_kernel):
    a = torch.randn(45, 67).t()  # a (67, 45) view with strides (1, 67)
    holder = torch.zeros(90, 67)
    b = holder[::2].t()  # a (67, 45) view with strides (1, 134)
    scale_kernel(a, b)
    torch.testing.assert_close(b, a * 2)
    assert holder[1::2].abs().sum() == 0  # the rows between were not touched


def test_43_storage_offset_and_misaligned_fp16_views_are_correct():
    kernel = compile(transpose, verify=False)
    base = torch.randn(37 * 29 + 1, dtype=torch.float16)
    a = base[1:].view(37, 29)  # 2 bytes past an aligned start
    out = torch.empty(29 * 37 + 1, dtype=torch.float16)
    b = out[1:].view(29, 37)
    kernel(a, b)
    torch.testing.assert_close(b, a.t() + 1)


def test_44_output_aliasing_an_input_is_refused(scale_kernel):
    storage = torch.rand(2 * 67 * 45)
    with pytest.raises(LaunchError, match="parameter B: output aliases parameter A"):
        scale_kernel(storage[: 67 * 45].view(67, 45), storage[100: 100 + 67 * 45].view(67, 45))


def test_45_output_too_small_or_stride_zero(scale_kernel):
    """torch has no read-only tensors (a read-only numpy array becomes a writable tensor), so the
    third case of the class cannot arise."""
    with pytest.raises(LaunchError, match="parameter B: dimension 0 is 66, expected 67"):
        scale_kernel(torch.rand(67, 45), torch.empty(66, 45))
    with pytest.raises(LaunchError, match="parameter B: output tensor has overlapping elements"):
        scale_kernel(torch.rand(67, 45), torch.empty(1, 45).expand(67, 45))


def test_46_outputs_that_require_grad_are_refused_inputs_are_read(scale_kernel):
    b = torch.zeros(67, 45, requires_grad=True)
    with pytest.raises(LaunchError, match=r"parameter B: output tensor requires grad; kernels write outputs in place "
                                          r"outside autograd.*B.detach\(\)"):
        scale_kernel(torch.rand(67, 45), b)
    assert b.abs().sum() == 0  # refused before any write
    a, out = torch.rand(67, 45, requires_grad=True), torch.empty(67, 45)
    scale_kernel(a, out)
    torch.testing.assert_close(out, a.detach() * 2)


def test_47_scalars_are_range_checked_never_truncated(scalar_kernel):
    a, b = torch.arange(37, dtype=torch.int64), torch.empty(37, dtype=torch.int64)
    scalar_kernel(a, b, 2**31 + 5, 5)  # above 2**31 - 1 into an int64 parameter: passed whole
    assert torch.equal(b, a + (2**31 + 5) ** 2 + 5)
    scalar_kernel(a, b, 100_000, 5)  # a small int64 value still computes in int64: 10**10 does not wrap
    assert torch.equal(b, a + 10**10 + 5)
    with pytest.raises(LaunchError, match=r"parameter t \(int32\) got 1099511627779, outside the range of int32"):
        scalar_kernel(a, b, 1, 2**40 + 3)
    with pytest.raises(LaunchError, match=r"parameter t \(int32\) got 2.5; expected an int"):
        scalar_kernel(a, b, 1, 2.5)


def test_47_float_scalars_take_ints_bool_scalars_take_bools():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def gate(A: T.Buffer((37,), "float32"), B: T.Buffer((37,), "float32"), x: T.float32, on: T.bool):
        for i in range(37):
            with T.sblock("B"):
                vi = T.axis.spatial(37, i)
                B[vi] = T.Select(on, A[vi] * x, A[vi])

    kernel = compile(gate, verify=False)
    a, b = torch.rand(37), torch.empty(37)
    kernel(a, b, 3, True)
    torch.testing.assert_close(b, a * 3)
    with pytest.raises(LaunchError, match=r"parameter on \(bool\) got 1; expected a bool"):
        kernel(a, b, 3, 1)
    with pytest.raises(LaunchError, match=r"parameter x \(float32\) got 1e\+300, beyond the largest finite float32"):
        kernel(a, b, 1e300, True)


def test_48_missing_extra_and_keyword_arguments(scale_kernel):
    a, b = torch.rand(67, 45), torch.empty(67, 45)
    with pytest.raises(LaunchError, match=r"run\(A, B\) is missing B"):
        scale_kernel(a)
    with pytest.raises(LaunchError, match=r"run\(A, B\) takes 2 arguments, got 3"):
        scale_kernel(a, b, b)
    with pytest.raises(LaunchError, match=r"run\(A, B\) has no parameter 'C'"):
        scale_kernel(a, C=b)
    with pytest.raises(LaunchError, match=r"run\(A, B\) got two values for parameter 'A'"):
        scale_kernel(a, A=a)
    scale_kernel(B=b, A=a)  # by name, in any order
    torch.testing.assert_close(b, a * 2)
    a16, b16 = torch.empty(37, 29, dtype=torch.float16), torch.empty(29, 37, dtype=torch.float16)
    with pytest.raises(LaunchError, match="parameter A: dimension 0 is 29, expected 37"):
        compile(transpose, verify=False)(b16, a16)  # reordered


def test_49_no_gpu_and_no_interpreter(scale_kernel, monkeypatch):
    module = _compiled_mode(monkeypatch, scale_kernel, cuda=False)
    with pytest.raises(module.LaunchError, match="no CUDA device: set TRITON_INTERPRET=1"):
        module.run(torch.rand(67, 45), torch.empty(67, 45))
