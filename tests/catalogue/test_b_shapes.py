"""Catalogue section B: shapes, tiling and indexing (docs/bad-input.md has the table).

Correct results are checked against TVM's llvm build (check_against_tvm) or torch, in Triton's
interpreter, at odd sizes.
"""

import pytest
import torch
from tvm import s_tir, tirx
from tvm.script import tirx as T

from catalogue_programs import row_sum, scale, scale_rows
from tir_passes import LaunchError, UnsupportedConstructError
from tir_passes.passes.bank_conflict_free_tiling import padded_layout_problems
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.analyses.layout_proofs import bijection_problems
from tir_passes.passes.tile_sizes import PIPELINE_STAGES, contraction_sizes
from triton_codegen import check_against_tvm, compile


def _check(func, **options):
    kernel = compile(func, **options)
    report = check_against_tvm(kernel, func)
    assert report.ok, str(report)
    return kernel


@pytest.fixture(scope="module")
def rows_kernel():
    return compile(scale_rows, verify=False)


def test_15_dimension_not_divisible_by_the_tile():
    kernel = _check(scale)
    assert not any(dim.even for dim in kernel.program.kernels[0].dims)  # both axes have a masked tail tile


def test_16_user_tile_that_is_not_a_power_of_two():
    sch = s_tir.Schedule(scale_1d)
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    sch.split(loop, [None, 48])
    kernel = _check(sch.mod["main"])
    assert all(size & (size - 1) == 0 for k in kernel.program.kernels for size in k.block_sizes.values())


@T.prim_func(s_tir=True)
def scale_1d(A: T.Buffer((67,), "float32"), B: T.Buffer((67,), "float32")):
    for i in range(67):
        with T.sblock("B"):
            vi = T.axis.spatial(67, i)
            B[vi] = A[vi] * T.float32(2)


def test_17_tile_larger_than_the_dimension():
    @T.prim_func(s_tir=True)
    def tiny(A: T.Buffer((3,), "float32"), B: T.Buffer((3,), "float32")):
        for i in range(3):
            with T.sblock("B"):
                vi = T.axis.spatial(3, i)
                B[vi] = A[vi] + T.float32(1)

    kernel = _check(tiny)  # canary margins around every tensor: a store past element 3 is reported
    assert [dim.default > 3 for dim in kernel.program.kernels[0].dims] == [True]


@T.prim_func(s_tir=True)
def broadcast(A: T.Buffer((37, 1), "float32"), C: T.Buffer((1, 29), "float32"), X: T.Buffer((37, 29), "float32"),
              B: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, 0] + C[0, vj] + X[vi, vj]


def test_18_size_one_dims_and_stride_zero_inputs_are_read_correctly():
    kernel = _check(broadcast)
    a, c, row = torch.rand(37, 1), torch.rand(1, 29), torch.rand(1, 29)
    x = row.expand(37, 29)  # stride 0 along the rows
    b = torch.empty(37, 29)
    kernel(a, c, x, b)
    torch.testing.assert_close(b, a + c + x)
    with pytest.raises(LaunchError, match="parameter B: output tensor has overlapping elements"):
        kernel(a, c, x, torch.empty(37, 1).expand(37, 29))


def test_19_zero_size_dimension_launches_nothing(rows_kernel, monkeypatch):
    module = rows_kernel.module(True)
    for kernel in rows_kernel.program.kernels:
        monkeypatch.setattr(module, kernel.name, None)  # a launch would fail on None[grid]
    out = torch.empty(0)
    rows_kernel(torch.empty(0), out)
    assert out.shape == (0,)


def test_19_zero_size_buffers_compile_to_a_no_op():
    @T.prim_func(s_tir=True)
    def empty_rows(A: T.Buffer((0, 16), "float32"), B: T.Buffer((0, 16), "float32")):
        for i, j in T.grid(0, 16):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)

    _check(empty_rows)  # was "verification 'bounds' failed after pass HoistAllocations"


def test_20_zero_length_reduction():
    """At run time (K = 0) the output gets the T.init value, as torch.sum gives 0; a constant K = 0
    is refused, because TVM's build would leave the output as it was."""
    out = torch.full((5,), 7.0)
    compile(row_sum, verify=False)(torch.empty(5, 0), out)
    assert out.tolist() == torch.zeros(5, 0).sum(dim=1).tolist()

    @T.prim_func(s_tir=True)
    def sum_nothing(A: T.Buffer((5, 0), "float32"), B: T.Buffer((5,), "float32")):
        for i, k in T.grid(5, 0):
            with T.sblock("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    with pytest.raises(UnsupportedConstructError, match=r"test_b_shapes.py:\d+: block 'B' reduces over an axis of "
                                                        r"length 0; TVM's build leaves its output as it was"):
        compile(sum_nothing)


def test_21_grid_beyond_the_cuda_limit_is_refused(rows_kernel):
    """The launchers use one grid axis (x, up to 2**31 - 1 programs): y and z never overflow."""
    module = rows_kernel.module(True)
    kernel = rows_kernel.program.kernels[0]
    launch = getattr(module, f"_launch_{kernel.name}")
    config = module.CONFIGS[kernel.name][0]
    with pytest.raises(module.LaunchError, match=r"needs \d+ programs, more than CUDA's grid limit of 2147483647"):
        launch({}, {"n": 2**45}, config)


def test_22_contraction_tiles_fall_back_to_fit_shared_memory():
    small = GpuSpec("small", 80, 1, 65536, 40 * 1024, 1.0)
    sizes = contraction_sizes(small, "float16", {"M": 4096, "N": 4096, "K": 4096})
    assert sizes == {"M": 128, "N": 128, "K": 16}  # K halved from 64 until three stages fit
    assert PIPELINE_STAGES * (sizes["M"] + sizes["N"]) * sizes["K"] * 2 <= small.shared_memory_per_block


def test_23_non_injective_layouts_are_caught_by_the_proofs():
    swizzle = tirx.IndexMap.from_func(lambda i, j: (i, tirx.bitwise_xor(j, i) % 4), ndim=2, index_dtype="int32")
    unswizzle = tirx.IndexMap.from_func(lambda i, j: (i, tirx.bitwise_xor(j, i) % 8), ndim=2, index_dtype="int32")
    assert bijection_problems(swizzle, unswizzle, [8, 8], [8, 8])  # j ^ i folded into 4 columns
    assert padded_layout_problems([32, 32], [31, 1], 1056) == ["not proven: inverse(map(x)) == x"]


SYMBOLIC_SIZES = (0, 1, 2, 15, 16, 17, 1023, 1024, 1025, 4099)  # around the planned block of 1024


def test_24_symbolic_size_is_a_runtime_argument(rows_kernel):
    for n in SYMBOLIC_SIZES:
        a, b = torch.randn(n), torch.full((n,), float("nan"))
        rows_kernel(a, b)
        torch.testing.assert_close(b, a * 2 + 1)


def test_25_no_divisibility_assumption_on_symbolic_sizes(rows_kernel):
    source = rows_kernel.source
    assert "multiple_of" not in source and "max_contiguous" not in source and "% 16" not in source
    a, b = torch.randn(17), torch.empty(17)
    rows_kernel(a, b)
    torch.testing.assert_close(b, a * 2 + 1)


def test_26_launcher_refuses_strides_beyond_32_bit_offsets(monkeypatch):
    """A buffer of > 2**31 elements needs the GPU (the H200 test); on the CPU, the launcher's check
    on a static-shape kernel, which uses 32-bit offsets, with a meta tensor that allocates nothing."""
    kernel = compile(scale, verify=False)
    module = kernel.module(True)
    monkeypatch.setattr(module, "_expected_device_type", lambda: "meta")
    huge = torch.empty_strided((67, 45), (2**26, 1), device="meta")
    with pytest.raises(module.LaunchError, match="parameter A: its strides address more than 2\\*\\*31 elements"):
        module.run(huge, torch.empty(67, 45, device="meta"))


def test_27_int32_loops_over_int64_shapes():
    @T.prim_func(s_tir=True)
    def wide(A: T.Buffer((T.int64(37), T.int64(29)), "float32"), B: T.Buffer((T.int64(37), T.int64(29)), "float32")):
        for i, j in T.grid(37, 29):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    _check(wide)


def test_28_extent_zero_is_a_no_op_and_a_negative_extent_is_refused():
    @T.prim_func(s_tir=True)
    def never(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(0):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]

    @T.prim_func(s_tir=True)
    def backwards(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in T.serial(-3):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]

    _check(never)  # B keeps its contents, as in TVM's build
    with pytest.raises(UnsupportedConstructError, match=r"test_b_shapes.py:\d+: loop i has extent -3; a negative "
                                                        r"extent is refused"):
        compile(backwards)
