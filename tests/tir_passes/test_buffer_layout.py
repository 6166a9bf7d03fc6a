import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from tir_passes.buffer_layout import BufferLayout, permutation_is_bijective


@I.ir_module
class TransposedIntermediate:
    """X is written and read as X[vj, vi] under loops (i, j): every access strides by a row."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64, 32, 8), "float32"), Y: T.Buffer((64, 32), "float32"), Z: T.Buffer((64, 32), "float32")):
        X = T.sblock_alloc_buffer((32, 64), "float32")
        for i, j, k in T.grid(64, 32, 8):
            with T.sblock("X"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    X[vj, vi] = T.float32(0)
                X[vj, vi] = X[vj, vi] + A[vi, vj, vk]
        for i, j in T.grid(64, 32):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vj, vi] * T.float32(2)
        for i, j in T.grid(64, 32):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = X[vj, vi] + T.float32(1)


def test_intermediate_walked_along_its_first_axis_is_transposed():
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((64, 32, 8), "float32"), Y: T.Buffer((64, 32), "float32"), Z: T.Buffer((64, 32), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"layout.decisions": ["X: axes permuted to (1, 0): 4 of 4 accesses walk axis 0 in their "
                                                    "innermost loop, which is now unit-stride (bijection proven)"]})
                X = T.sblock_alloc_buffer((64, 32))
                for i, j, k in T.grid(64, 32, 8):
                    with T.sblock("X"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            X[vi, vj] = T.float32(0)
                        X[vi, vj] = X[vi, vj] + A[vi, vj, vk]
                for i, j in T.grid(64, 32):
                    with T.sblock("Y"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        Y[vi, vj] = X[vi, vj] * T.float32(2)
                for i, j in T.grid(64, 32):
                    with T.sblock("Z"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        Z[vi, vj] = X[vi, vj] + T.float32(1)

    assert_rewrites(BufferLayout(), TransposedIntermediate, Expected)


def test_contiguous_intermediate_is_kept_with_the_reason():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((16, 8), "float32"), Y: T.Buffer((16, 8), "float32"), Z: T.Buffer((16, 8), "float32")):
            X = T.sblock_alloc_buffer((16, 8), "float32")
            for i, j in T.grid(16, 8):
                with T.sblock("X"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    X[vi, vj] = A[vi, vj]
            for i, j in T.grid(16, 8):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = X[vi, vj]
            for i, j in T.grid(16, 8):
                with T.sblock("Z"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Z[vi, vj] = X[vi, vj]

    after = BufferLayout()(Before)["main"]
    assert [str(d) for d in after.body.block.annotations["layout.decisions"]] == [
        "X: kept (its accesses already walk the last axis: 3 of 3)"]
    tvm.ir.assert_structural_equal(after.body.block.body, Before["main"].body.block.body)


def test_function_without_shared_intermediates_is_left_alone():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 16), "float32")):
            for i, j in T.grid(16, 8):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vj, vi] = A[vi, vj]

    assert BufferLayout()(Before)["main"].same_as(Before["main"])


@pytest.mark.parametrize("permutation, shape", [([1, 0], [3, 5]), ([0, 2, 1], [2, 3, 4]), ([2, 0, 1], [64, 64, 2])])
def test_permutations_are_proven_bijections(permutation, shape):
    assert permutation_is_bijective(permutation, shape)


@pytest.mark.interpreter
def test_transposed_intermediate_compiles_and_matches():
    kernel = compile_and_check(TransposedIntermediate["main"].with_attr("global_symbol", "transposed_intermediate"), aot=False)
    assert "layout.decisions" in kernel.tir.script()
