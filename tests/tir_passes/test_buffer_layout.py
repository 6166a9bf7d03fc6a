import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from tir_passes.passes import buffer_layout
from tir_passes.contracts.layout_record import layout_decisions
from tir_passes.passes.buffer_layout import BufferLayout, permutation_map


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
                T.sblock_attr({"layout.decisions": [{
                    "buffer": "X", "permutation": [1, 0], "old_shape": [32, 64],
                    "reason": "4 of 4 accesses walk axis 0 in their innermost loop, which is now "
                    "unit-stride (proven: the new shape is the permutation of the old, the map is a bijection between "
                    "the index spaces (in range both ways, inverse(map(x)) == x, map(inverse(y)) == y), and all 5 "
                    "rewritten accesses index the map of their old indices)"}]})
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
    assert [d.text for d in layout_decisions(after)] == [
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


def _index_map(fn, ndim):
    return tvm.tirx.IndexMap.from_func(fn, ndim=ndim, index_dtype="int32")


@I.ir_module
class SquareIntermediate:
    """TransposedIntermediate with a square X: applying the wrong map keeps the shape."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16, 16), "float32"), Y: T.Buffer((16, 16), "float32"), Z: T.Buffer((16, 16), "float32")):
        X = T.sblock_alloc_buffer((16, 16), "float32")
        for i, j in T.grid(16, 16):
            with T.sblock("X"):
                vi, vj = T.axis.remap("SS", [i, j])
                X[vj, vi] = A[vi, vj]
        for i, j in T.grid(16, 16):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vj, vi] * T.float32(2)
        for i, j in T.grid(16, 16):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = X[vj, vi] + T.float32(1)


def _decisions(mod):
    return [d.text for d in layout_decisions(mod["main"])]


def test_a_rewrite_other_than_the_proven_map_is_not_applied(monkeypatch):
    """A mutant that lays the buffer out by the identity instead of the transpose: the shape still
    matches (square), but no access is the map of its old indices, so the pass keeps the layout."""
    real = buffer_layout._transformed
    monkeypatch.setattr(buffer_layout, "_transformed", lambda func, name, index_map: real(func, name, permutation_map([0, 1])))
    after = BufferLayout()(SquareIntermediate)
    [decision] = _decisions(after)
    assert decision == ("X: kept (the permuted layout was not proven: "
                        "block X: X[vj, vi] was rewritten to X[vj, vi], not X[vi, vj]; "
                        "block Y: X[vj, vi] was rewritten to X[vj, vi], not X[vi, vj]; "
                        "block Z: X[vj, vi] was rewritten to X[vj, vi], not X[vi, vj])")
    tvm.ir.assert_structural_equal(after["main"].body.block.body, SquareIntermediate["main"].body.block.body)


def test_a_rewrite_that_does_not_permute_the_shape_is_not_applied(monkeypatch):
    real = buffer_layout._transformed
    monkeypatch.setattr(buffer_layout, "_transformed", lambda func, name, index_map: real(func, name, permutation_map([0, 1])))
    [decision] = _decisions(BufferLayout()(TransposedIntermediate))
    assert decision.startswith("X: kept (the permuted layout was not proven: the new shape (32, 64) is not the "
                               "permutation (1, 0) of (32, 64)")


def test_a_map_tvm_cannot_invert_is_not_applied(monkeypatch):
    """The pass proves the map it applies: a non-bijective map in place of the permutation is refused."""
    monkeypatch.setattr(buffer_layout, "permutation_map", lambda permutation: _index_map(lambda i, j: (j, i % 8), 2))
    [decision] = _decisions(BufferLayout()(SquareIntermediate))
    assert decision.startswith("X: kept (the permuted layout was not proven: the new shape (16, 8) is not the "
                               "permutation (1, 0) of (16, 16); TVM cannot invert the map: ")


@pytest.mark.interpreter
def test_transposed_intermediate_compiles_and_matches():
    kernel = compile_and_check(TransposedIntermediate["main"].with_attr("global_symbol", "transposed_intermediate"), aot=False)
    assert "layout.decisions" in kernel.tir.script()
