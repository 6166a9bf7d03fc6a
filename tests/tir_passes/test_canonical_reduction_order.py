"""CanonicalReductionOrder: Before/Expected for each ordering rule, the nests it leaves, and a
reordered float sum that still matches TVM's build of the program as written."""

from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from lowering.kernel_plan import plan_of
from tir_passes.passes.canonical_reduction_order import CanonicalReductionOrder
from triton_codegen import compile


def test_reduction_loops_go_inside_in_the_order_of_the_axes_they_index():
    """`for r2, i, r1` over A[vi, vr1, vr2]: the spatial loop first, then r1, then r2 (A's last axis)."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 3, 5), "float32"), Y: T.Buffer((4,), "float32")):
            for r2, i, r1 in T.grid(5, 4, 3):
                with T.sblock("Y"):
                    vr2, vi, vr1 = T.axis.remap("RSR", [r2, i, r1])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = T.max(Y[vi], A[vi, vr1, vr2])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 3, 5), "float32"), Y: T.Buffer((4,), "float32")):
            for i, r1, r2 in T.grid(4, 3, 5):
                with T.sblock("Y"):
                    vr2, vi, vr1 = T.axis.remap("RSR", [r2, i, r1])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = T.max(Y[vi], A[vi, vr1, vr2])

    assert_rewrites(CanonicalReductionOrder(), Before, Expected)


def test_in_one_index_the_smaller_coefficient_is_inner():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 12), "int32"), Y: T.Buffer((4,), "int32")):
            for i, lo, hi in T.grid(4, 4, 3):
                with T.sblock("Y"):
                    vi, vlo, vhi = T.axis.remap("SRR", [i, lo, hi])
                    with T.init():
                        Y[vi] = 0
                    Y[vi] = Y[vi] + A[vi, vhi * 4 + vlo]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 12), "int32"), Y: T.Buffer((4,), "int32")):
            for i, hi, lo in T.grid(4, 3, 4):
                with T.sblock("Y"):
                    vi, vlo, vhi = T.axis.remap("SRR", [i, lo, hi])
                    with T.init():
                        Y[vi] = 0
                    Y[vi] = Y[vi] + A[vi, vhi * 4 + vlo]

    assert_rewrites(CanonicalReductionOrder(), Before, Expected)


def test_nests_in_canonical_order_or_with_other_loops_are_left():
    @I.ir_module
    class Canonical:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), Y: T.Buffer((4,), "float32")):
            for i, k in T.grid(4, 6):
                with T.sblock("Y"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + A[vi, vk]

    @I.ir_module
    class OffsetLoop:   # a loop not starting at 0: not a nest this pass rebuilds
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), Y: T.Buffer((4,), "float32")):
            for k in range(1, 6):
                for i in range(4):
                    with T.sblock("Y"):
                        vk, vi = T.axis.remap("RS", [k, i])
                        with T.init():
                            Y[vi] = T.float32(0)
                        Y[vi] = Y[vi] + A[vi, vk]

    assert_rewrites(CanonicalReductionOrder(), Canonical, Canonical)
    assert_rewrites(CanonicalReductionOrder(), OffsetLoop, OffsetLoop)


@T.prim_func(s_tir=True)
def window_sum_channels_first(X: T.Buffer((2, 9, 5), "float32"), W: T.Buffer((3, 5, 4), "float32"),
                              Y: T.Buffer((2, 7, 4), "float32")):
    # a 1-D convolution with its reduction loops outermost and in the other order (channels, then taps)
    for rc, rw, n, w, f in T.grid(5, 3, 2, 7, 4):
        with T.sblock("Y"):
            vrc, vrw, vn, vw, vf = T.axis.remap("RRSSS", [rc, rw, n, w, f])
            with T.init():
                Y[vn, vw, vf] = T.float32(0)
            Y[vn, vw, vf] = Y[vn, vw, vf] + X[vn, vw + vrw, vrc] * W[vrw, vrc, vf]


@T.prim_func(s_tir=True)
def window_sum(X: T.Buffer((2, 9, 5), "float32"), W: T.Buffer((3, 5, 4), "float32"), Y: T.Buffer((2, 7, 4), "float32")):
    for n, w, f, rw, rc in T.grid(2, 7, 4, 3, 5):
        with T.sblock("Y"):
            vn, vw, vf, vrw, vrc = T.axis.remap("SSSRR", [n, w, f, rw, rc])
            with T.init():
                Y[vn, vw, vf] = T.float32(0)
            Y[vn, vw, vf] = Y[vn, vw, vf] + X[vn, vw + vrw, vrc] * W[vrw, vrc, vf]


def test_a_reordered_float_sum_matches_tvm_and_compiles_like_the_canonical_order():
    kernel = compile_and_check(window_sum_channels_first, aot=False)
    assert plan_of(kernel) == plan_of(compile(window_sum, verify=False))
