import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.passes.hoist_allocations import HoistAllocations


def test_alloc_buffer_statement_becomes_root_allocation():
    """T.alloc_buffer at the top of the function moves into the root block's allocations."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            C = T.alloc_buffer((8,), "float32")
            for i in range(8):
                with T.sblock("C"):
                    vi = T.axis.spatial(8, i)
                    C[vi] = A[vi] * T.float32(2)
            for i in range(8):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = C[vi] + T.float32(1)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            C = T.sblock_alloc_buffer((8,), "float32")
            for i in range(8):
                with T.sblock("C"):
                    vi = T.axis.spatial(8, i)
                    C[vi] = A[vi] * T.float32(2)
            for i in range(8):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = C[vi] + T.float32(1)

    assert_rewrites(HoistAllocations(), Before, Expected)


def test_root_allocations_are_left_alone():
    """A function that already uses T.sblock_alloc_buffer comes back unchanged (same object)."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            C = T.sblock_alloc_buffer((8,), "float32")
            for i in range(8):
                with T.sblock("C"):
                    vi = T.axis.spatial(8, i)
                    C[vi] = A[vi]
            for i in range(8):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = C[vi]

    after = HoistAllocations()(Before)
    tvm.ir.assert_structural_equal(after, Before)
    assert after["main"].same_as(Before["main"])
