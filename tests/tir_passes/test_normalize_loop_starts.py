from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.passes.normalize_loop_starts import NormalizeLoopStarts


def test_offset_loop_starts_at_zero():
    """`range(2, 28)` becomes `range(26)`; the offset moves into the block binding."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((30,), "float32")):
            for i in T.serial(2, 28):
                with T.sblock("A"):
                    vi = T.axis.spatial((2, 28), i)
                    A[vi] = A[vi] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((30,), "float32")):
            for i in T.serial(26):
                with T.sblock("A"):
                    vi = T.axis.spatial((2, 28), i + 2)
                    A[vi] = A[vi] * T.float32(2)

    assert_rewrites(NormalizeLoopStarts(), Before, Expected)


def test_zero_based_and_thread_bound_loops_are_left_alone():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((64,), "float32")):
            for t in T.thread_binding(4, 8, thread="threadIdx.x"):
                for i in T.serial(8):
                    with T.sblock("A"):
                        vt, vi = T.axis.remap("SS", [t, i])
                        A[vt * 8 + vi] = A[vt * 8 + vi] + T.float32(1)

    assert_rewrites(NormalizeLoopStarts(), Before, Before)
