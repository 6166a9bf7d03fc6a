"""CanonicalSplitAxes (tir_passes/passes/canonical_split_axes.py): a loop the program split by hand
(`for ko, ki in T.grid(K // 8, 8)`, reading `A[vi, vko * 8 + vki]`) is one loop again, so the GEMM
gets the canonical plan; a split whose parts are read apart stays."""

import pytest
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from lowering.kernel_plan import plan_of
from tir_passes.passes.canonical_split_axes import CanonicalSplitAxes
from matmul import make_matmul
from triton_codegen import compile


def make_split_matmul(M: int, N: int, K: int, rows: int, depth: int, inner_depth: int = 1):
    """matmul with its rows split by `rows` and its reduction by `depth` (and again by `inner_depth`)."""
    @T.prim_func(s_tir=True)
    def split_matmul(A: T.Buffer((M, K), "float16"), B: T.Buffer((K, N), "float16"), C: T.Buffer((M, N), "float32")):
        for io, ii, j, ko, km, ki in T.grid(M // rows, rows, N, K // depth, depth // inner_depth, inner_depth):
            with T.sblock("C"):
                vio, vii, vj, vko, vkm, vki = T.axis.remap("SSSRRR", [io, ii, j, ko, km, ki])
                with T.init():
                    C[vio * rows + vii, vj] = T.float32(0)
                C[vio * rows + vii, vj] = C[vio * rows + vii, vj] \
                    + T.Cast("float32", A[vio * rows + vii, vko * depth + vkm * inner_depth + vki]) \
                    * T.Cast("float32", B[vko * depth + vkm * inner_depth + vki, vj])

    return split_matmul


@pytest.mark.parametrize("rows, depth, inner_depth", [(1, 8, 1), (32, 1, 1), (32, 64, 4)])
def test_a_matmul_split_by_hand_gets_the_canonical_plan(rows, depth, inner_depth):
    split = plan_of(compile(make_split_matmul(640, 384, 512, rows, depth, inner_depth), verify=False))
    assert split == plan_of(compile(make_matmul(640, 384, 512), verify=False))


@pytest.mark.interpreter
def test_a_matmul_split_by_hand_matches_tvm():
    compile_and_check(make_split_matmul(66, 45, 32, 3, 8, 2))


def test_the_joined_loop_takes_the_common_prefix():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 24), "float32"), Y: T.Buffer((4,), "float32")):
            for i, ko, ki in T.grid(4, 3, 8):
                with T.sblock("Y"):
                    vi, vko, vki = T.axis.remap("SRR", [i, ko, ki])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + T.if_then_else(vko * 8 + vki < 20, X[vi, vko * 8 + vki], T.float32(0))

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 24), "float32"), Y: T.Buffer((4,), "float32")):
            for i, k in T.grid(4, 24):
                with T.sblock("Y"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    T.reads(X[vi, vk])
                    T.writes(Y[vi])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + T.if_then_else(vk < 20, X[vi, vk], T.float32(0))

    assert_rewrites(CanonicalSplitAxes(), Before, Expected)


def test_a_split_whose_parts_are_read_apart_stays():
    @I.ir_module
    class Apart:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 24), "float32"), W: T.Buffer((8,), "float32"), Y: T.Buffer((4,), "float32")):
            for i, ko, ki in T.grid(4, 3, 8):
                with T.sblock("Y"):
                    vi, vko, vki = T.axis.remap("SRR", [i, ko, ki])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + X[vi, vko * 8 + vki] * W[vki]

    assert_rewrites(CanonicalSplitAxes(), Apart, Apart)


def test_a_unit_loop_beside_another_is_no_split():
    """`for b, h in T.grid(1, 2)`: vb // 2 and vh % 2 simplify away over [0, 2) whatever the block reads,
    but b is a batch of one, not the outer half of h (attention at batch 1 lost its online form)."""
    @I.ir_module
    class Unit:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((1, 2, 8), "float32"), Y: T.Buffer((1, 2), "float32")):
            for b, h, j in T.grid(1, 2, 8):
                with T.sblock("Y"):
                    vb, vh, vj = T.axis.remap("SSR", [b, h, j])
                    with T.init():
                        Y[vb, vh] = T.float32(0)
                    Y[vb, vh] = Y[vb, vh] + X[vb, vh, vj]

    assert_rewrites(CanonicalSplitAxes(), Unit, Unit)


def test_loops_that_bind_computed_variables_stay():
    """A loop variable inside another binding (vk2 = ko * 8 + ki): joining would leave it dangling."""
    @I.ir_module
    class Computed:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 24), "float32"), Y: T.Buffer((4,), "float32")):
            for i, ko, ki in T.grid(4, 3, 8):
                with T.sblock("Y"):
                    vi = T.axis.spatial(4, i)
                    vk = T.axis.reduce(24, ko * 8 + ki)
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + X[vi, vk]

    assert_rewrites(CanonicalSplitAxes(), Computed, Computed)
