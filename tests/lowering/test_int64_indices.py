"""Axes counted in int64 (catalogue #26/#27): loops over int64 extents index in 64 bits, so a
buffer of more than 2**31 elements is addressed right (benchmarks/large_tensors.py runs the big
ones on a GPU); small int64 programs still match TVM."""

from tvm.script import tirx as T

from helpers import compile_and_check
from triton_codegen import compile

BIG = 2**31 + 4096


@T.prim_func(s_tir=True)
def int64_rows(A: T.Buffer((T.int64(67), T.int64(45)), "float32"), B: T.Buffer((T.int64(67),), "float32")):
    for i, k in T.grid(T.int64(67), T.int64(45)):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk] * T.float32(2)


@T.prim_func(s_tir=True)
def huge(X: T.Buffer((T.int64(BIG),), "float16"), Y: T.Buffer((T.int64(BIG),), "float16")):
    for i in T.serial(T.int64(BIG)):
        with T.sblock("Y"):
            vi = T.axis.spatial(T.int64(BIG), i)
            Y[vi] = X[vi] * T.float16(2)


def test_int64_extents_match_tvm():
    compile_and_check(int64_rows)


def test_an_axis_past_int32_is_indexed_in_64_bits():
    """The tile's start (program id times block size) would wrap in int32 past 2**31."""
    kernel = compile(huge, verify=False)
    assert "tl.cast(i_0, tl.int64) * BLOCK_I" in kernel.source
    assert set(kernel.program.kernels[0].int64_buffers) == {"X", "Y"}
