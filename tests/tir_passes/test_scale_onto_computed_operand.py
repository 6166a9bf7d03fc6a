"""FactorOutOfSums's second step (scale_onto_computed_operand.py): a scale that varies along a
contraction's reduction moves from its loaded operand onto the operand computed in registers;
Before/Expected, the programs it leaves alone, and a divisor leaving a sum without a `* 1.0` behind."""

from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.passes.factor_out_of_sums import FactorOutOfSums


def test_a_scale_along_the_reduction_moves_onto_the_computed_operand():
    """dV = Σ_i f16(exp(s)) · f16(dO / l[i]) (attention's dV, rows j) becomes Σ_i f16(exp(s) / l[i]) · dO."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 4), "float32"), L: T.Buffer((8,), "float32"), X: T.Buffer((8, 2), "float16"),
                 Y: T.Buffer((4, 2), "float32")):
            for j, d, i in T.grid(4, 2, 8):
                with T.sblock("dv"):
                    vj, vd, vi = T.axis.remap("SSR", [j, d, i])
                    with T.init():
                        Y[vj, vd] = T.float32(0)
                    Y[vj, vd] = Y[vj, vd] + T.Cast("float32", T.Cast("float16", T.exp(S[vi, vj]))) \
                        * T.Cast("float32", T.Cast("float16", T.Cast("float32", X[vi, vd]) * (T.float32(1) / L[vi])))

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 4), "float32"), L: T.Buffer((8,), "float32"), X: T.Buffer((8, 2), "float16"),
                 Y: T.Buffer((4, 2), "float32")):
            for j, d, i in T.grid(4, 2, 8):
                with T.sblock("dv"):
                    vj, vd, vi = T.axis.remap("SSR", [j, d, i])
                    T.reads(S[vi, vj], X[vi, vd], L[vi])   # the block's regions as they were: the same buffers
                    T.writes(Y[vj, vd])
                    with T.init():
                        Y[vj, vd] = T.float32(0)
                    Y[vj, vd] = Y[vj, vd] + T.Cast("float32", T.Cast("float16", T.exp(S[vi, vj])
                                                                      * (T.float32(1) / L[vi]))) \
                        * T.Cast("float32", X[vi, vd])

    assert_rewrites(FactorOutOfSums(), Before, Expected)


def test_a_scale_stays_where_both_operands_are_loads_or_the_computed_one_lacks_its_axis():
    """Both operands loaded: moving the scale would only compute the other one. A scale along d (the
    loaded operand's own axis) would give the computed operand an axis it does not have."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 4), "float32"), P: T.Buffer((8, 4), "float16"), L: T.Buffer((8,), "float32"),
                 W: T.Buffer((8, 2), "float32"), X: T.Buffer((8, 2), "float16"), Y: T.Buffer((4, 2), "float32"),
                 Z: T.Buffer((4, 2), "float32")):
            for j, d, i in T.grid(4, 2, 8):
                with T.sblock("loaded"):
                    vj, vd, vi = T.axis.remap("SSR", [j, d, i])
                    with T.init():
                        Y[vj, vd] = T.float32(0)
                    Y[vj, vd] = Y[vj, vd] + T.Cast("float32", P[vi, vj]) \
                        * T.Cast("float32", T.Cast("float16", T.Cast("float32", X[vi, vd]) * (T.float32(1) / L[vi])))
            for j, d, i in T.grid(4, 2, 8):
                with T.sblock("other_axis"):
                    vj, vd, vi = T.axis.remap("SSR", [j, d, i])
                    with T.init():
                        Z[vj, vd] = T.float32(0)
                    Z[vj, vd] = Z[vj, vd] + T.Cast("float32", T.Cast("float16", T.exp(S[vi, vj]))) \
                        * T.Cast("float32", T.Cast("float16", T.Cast("float32", X[vi, vd]) * W[vi, vd]))

    assert_rewrites(FactorOutOfSums(), Before, Before)


def test_a_reciprocal_leaving_the_sum_leaves_no_unit_factor_and_no_round_trip():
    """dP = Σ_d f16(dO · (1 / l[i])) · V (1 / l leaves: d does not vary it): the operand left is dO as
    loaded, not `f16(f32(dO) * 1.0)` (a computed operand, and a cast pair that changes nothing)."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 2), "float16"), L: T.Buffer((4,), "float32"), V: T.Buffer((8, 2), "float16"),
                 O: T.Buffer((4, 8), "float32")):
            acc = T.sblock_alloc_buffer((4, 8), "float32")
            for i, j, d in T.grid(4, 8, 2):
                with T.sblock("dp"):
                    vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                    with T.init():
                        acc[vi, vj] = T.float32(0)
                    acc[vi, vj] = acc[vi, vj] + T.Cast("float32", T.Cast("float16", T.Cast("float32", X[vi, vd])
                                                                          * (T.float32(1) / L[vi]))) \
                        * T.Cast("float32", V[vj, vd])
            for i, j in T.grid(4, 8):
                with T.sblock("out"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    O[vi, vj] = acc[vi, vj]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 2), "float16"), L: T.Buffer((4,), "float32"), V: T.Buffer((8, 2), "float16"),
                 O: T.Buffer((4, 8), "float32")):
            acc = T.sblock_alloc_buffer((4, 8), "float32")
            for i, j, d in T.grid(4, 8, 2):
                with T.sblock("dp"):
                    vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                    T.reads(X[vi, vd], V[vj, vd])
                    T.writes(acc[vi, vj])
                    with T.init():
                        acc[vi, vj] = T.float32(0)
                    acc[vi, vj] = acc[vi, vj] + T.Cast("float32", X[vi, vd]) * T.Cast("float32", V[vj, vd])
            for i, j in T.grid(4, 8):
                with T.sblock("out"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(acc[vi, vj], L[vi])
                    T.writes(O[vi, vj])
                    O[vi, vj] = acc[vi, vj] / L[vi]

    assert_rewrites(FactorOutOfSums(), Before, Expected)
