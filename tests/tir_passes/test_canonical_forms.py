"""The canonical-form passes at the front of the pipeline (tir_passes/passes/): Before/Expected for
each rewrite, and the programs each one must leave alone."""

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.passes.canonical_constants import CanonicalConstants, exact_reciprocal
from tir_passes.passes.canonical_loop_order import CanonicalLoopOrder
from tir_passes.passes.canonical_masks import CanonicalMasks
from tir_passes.passes.factor_out_of_sums import FactorOutOfSums
from tir_passes.passes.inline_elementwise import InlineElementwise


# --- CanonicalLoopOrder --------------------------------------------------------------------------------
def test_spatial_loops_follow_the_output_axes():
    """`for j, i` writing Y[vi, vj] becomes `for i, j`; the reduction loop keeps its slot."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6, 5), "float32"), Y: T.Buffer((4, 6), "float32")):
            for j, k, i in T.grid(6, 5, 4):
                with T.sblock("Y"):
                    vj, vk, vi = T.axis.remap("SRS", [j, k, i])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vj, vk]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6, 5), "float32"), Y: T.Buffer((4, 6), "float32")):
            for i, k, j in T.grid(4, 5, 6):
                with T.sblock("Y"):
                    vj, vk, vi = T.axis.remap("SRS", [j, k, i])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vj, vk]

    assert_rewrites(CanonicalLoopOrder(), Before, Expected)


def test_nest_whose_output_is_not_its_spatial_variables_is_left():
    """A transposed store with a computed index (`Y[vi + 1, ...]`) has no axis order to follow."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), Y: T.Buffer((5, 6), "float32")):
            for j, i in T.grid(6, 4):
                with T.sblock("Y"):
                    vj, vi = T.axis.remap("SS", [j, i])
                    Y[vi + 1, vj] = A[vi, vj]

    assert_rewrites(CanonicalLoopOrder(), Before, Before)


# --- InlineElementwise ---------------------------------------------------------------------------------
def test_masked_scores_block_is_inlined_into_the_max():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 8), "float32"), M: T.Buffer((8,), "float32")):
            masked = T.sblock_alloc_buffer((8, 8), "float32")
            for i, j in T.grid(8, 8):
                with T.sblock("masked"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    masked[vi, vj] = T.if_then_else(vj <= vi, S[vi, vj], T.float32(float("-inf")))
            for i, j in T.grid(8, 8):
                with T.sblock("max"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32(float("-inf"))
                    M[vi] = T.max(M[vi], masked[vi, vj])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 8), "float32"), M: T.Buffer((8,), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"fusion.decisions": [{"action": "inline", "blocks": ["masked"], "buffers": ["masked"],
                                                     "bytes_saved": 512, "reason": "elementwise producer",
                                                     "taken": True}]})
                for i, j in T.grid(8, 8):
                    with T.sblock("max"):
                        vi, vj = T.axis.remap("SR", [i, j])
                        T.reads(S[vi, vj])
                        T.writes(M[vi])
                        with T.init():
                            M[vi] = T.float32(float("-inf"))
                        M[vi] = T.max(M[vi], T.if_then_else(vj <= vi, S[vi, vj], T.float32(float("-inf"))))

    assert_rewrites(InlineElementwise(), Before, Expected)


# --- CanonicalConstants --------------------------------------------------------------------------------
def test_division_by_a_power_of_two_is_a_product():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("Y"):
                    vi = T.axis.remap("S", [i])
                    Y[vi] = A[vi] / T.float32(4) + A[vi] / T.float32(3)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("Y"):
                    vi = T.axis.remap("S", [i])
                    Y[vi] = A[vi] * T.float32(0.25) + A[vi] / T.float32(3)

    assert_rewrites(CanonicalConstants(), Before, Expected)


def test_exact_reciprocals_only():
    assert exact_reciprocal(8.0, "float32") == 0.125
    assert exact_reciprocal(-0.5, "float32") == -2.0
    assert exact_reciprocal(3.0, "float32") is None
    assert exact_reciprocal(2.0 ** 20, "float16") is None   # 2^-20 is below float16's normal range
    assert exact_reciprocal(0.0, "float32") is None


# --- CanonicalMasks ------------------------------------------------------------------------------------
def _mask_module(masked_value: str, negated: bool):
    """max and exp-sum of a causal row, the mask written `vj > vi` or `T.Not(vj <= vi)`."""
    value = {"big": T.float32(-1.0e30), "inf": T.float32(float("-inf"))}[masked_value]

    @T.prim_func(s_tir=True)
    def main(S: T.Buffer((8, 8), "float32"), M: T.Buffer((8,), "float32"), L: T.Buffer((8,), "float32")):
        for i, j in T.grid(8, 8):
            with T.sblock("max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    M[vi] = T.float32(float("-inf"))
                M[vi] = T.max(M[vi], T.Select(T.Not(vj <= vi) if negated else vj > vi, value, S[vi, vj]))
        for i, j in T.grid(8, 8):
            with T.sblock("sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    L[vi] = T.float32(0)
                L[vi] = L[vi] + T.exp(T.if_then_else(T.Not(vj <= vi) if negated else vj > vi, value, S[vi, vj])
                                      - M[vi])

    return tvm.IRModule({"main": main})


def test_negated_mask_and_large_negative_value_become_select_of_minus_inf():
    """`T.Not(vj <= vi)` is `vj > vi`; -1e30 masked into a max and an exp is -inf (row i keeps j = 0);
    the if_then_else whose branch loads S[vi, vj] stays (S is read only under it)."""

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 8), "float32"), M: T.Buffer((8,), "float32"), L: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 8):
                with T.sblock("max"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32(float("-inf"))
                    M[vi] = T.max(M[vi], T.Select(vj > vi, T.float32(float("-inf")), S[vi, vj]))
            for i, j in T.grid(8, 8):
                with T.sblock("sum"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        L[vi] = T.float32(0)
                    L[vi] = L[vi] + T.exp(T.if_then_else(vj > vi, T.float32(float("-inf")), S[vi, vj]) - M[vi])

    after = CanonicalMasks()(_mask_module("big", negated=True))
    tvm.ir.assert_structural_equal(after["main"].body, Expected["main"].body)


def test_large_negative_kept_where_a_row_may_be_all_masked():
    """`vj >= 0` masks every element of the row: -1e30 there is not -inf (the row's max is -1e30)."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 8), "float32"), M: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 8):
                with T.sblock("max"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32(float("-inf"))
                    M[vi] = T.max(M[vi], T.Select(vj + vi >= 0, T.float32(-1.0e30), S[vi, vj]))

    assert_rewrites(CanonicalMasks(), Before, Before)


def test_large_negative_kept_outside_a_max_or_an_exp():
    """A masked -1e30 that is multiplied (not a max's operand, not an exponent) keeps its value."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((8, 8), "float32"), Y: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 8):
                with T.sblock("sum"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        Y[vi] = T.float32(0)
                    Y[vi] = Y[vi] + T.Select(vj > vi, T.float32(-1.0e30), S[vi, vj]) * T.float32(0)

    assert_rewrites(CanonicalMasks(), Before, Before)


def test_if_then_else_over_the_old_value_is_a_select():
    """An arg-max's update reads only values evaluated anyway: if_then_else is Select."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 8), "float32"), V: T.Buffer((4,), "float32"), I: T.Buffer((4,), "int32")):
            for i, k in T.grid(4, 8):
                with T.sblock("argmax"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        V[vi] = T.min_value("float32")
                        I[vi] = -1
                    I[vi] = T.if_then_else(V[vi] >= A[vi, vk], I[vi], vk)
                    V[vi] = T.if_then_else(V[vi] >= A[vi, vk], V[vi], A[vi, vk])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 8), "float32"), V: T.Buffer((4,), "float32"), I: T.Buffer((4,), "int32")):
            for i, k in T.grid(4, 8):
                with T.sblock("argmax"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        V[vi] = T.min_value("float32")
                        I[vi] = -1
                    I[vi] = T.Select(V[vi] >= A[vi, vk], I[vi], vk)
                    V[vi] = T.Select(V[vi] >= A[vi, vk], V[vi], A[vi, vk])

    assert_rewrites(CanonicalMasks(), Before, Expected)


def test_guarded_load_stays_if_then_else():
    """A branch that reads memory only the condition guards (padding) keeps its if_then_else."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y: T.Buffer((10,), "float32")):
            for i in range(10):
                with T.sblock("Y"):
                    vi = T.axis.remap("S", [i])
                    Y[vi] = T.if_then_else(1 <= vi and vi < 9, A[vi - 1], T.float32(0))

    assert_rewrites(CanonicalMasks(), Before, Before)


# --- FactorOutOfSums -----------------------------------------------------------------------------------
def test_normalized_weights_are_divided_after_the_sum():
    """`acc = Σ_j Cast(e / l) * V` (P inlined) becomes `acc = Σ_j Cast(e) * V`, readers read acc / l."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(E: T.Buffer((4, 8), "float32"), Lsum: T.Buffer((4,), "float32"), V: T.Buffer((8, 2), "float16"),
                 O: T.Buffer((4, 2), "float32")):
            acc = T.sblock_alloc_buffer((4, 2), "float32")
            for i, d, j in T.grid(4, 2, 8):
                with T.sblock("pv"):
                    vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                    with T.init():
                        acc[vi, vd] = T.float32(0)
                    acc[vi, vd] = acc[vi, vd] + T.Cast("float32", T.Cast("float16", E[vi, vj] / Lsum[vi])) \
                        * T.Cast("float32", V[vj, vd])
            for i, d in T.grid(4, 2):
                with T.sblock("out"):
                    vi, vd = T.axis.remap("SS", [i, d])
                    O[vi, vd] = acc[vi, vd]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(E: T.Buffer((4, 8), "float32"), Lsum: T.Buffer((4,), "float32"), V: T.Buffer((8, 2), "float16"),
                 O: T.Buffer((4, 2), "float32")):
            acc = T.sblock_alloc_buffer((4, 2), "float32")
            for i, d, j in T.grid(4, 2, 8):
                with T.sblock("pv"):
                    vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                    T.reads(E[vi, vj], V[vj, vd])
                    T.writes(acc[vi, vd])
                    with T.init():
                        acc[vi, vd] = T.float32(0)
                    acc[vi, vd] = acc[vi, vd] + T.Cast("float32", T.Cast("float16", E[vi, vj])) \
                        * T.Cast("float32", V[vj, vd])
            for i, d in T.grid(4, 2):
                with T.sblock("out"):
                    vi, vd = T.axis.remap("SS", [i, d])
                    T.reads(acc[vi, vd], Lsum[vi])
                    T.writes(O[vi, vd])
                    O[vi, vd] = acc[vi, vd] / Lsum[vi]

    assert_rewrites(FactorOutOfSums(), Before, Expected)


def test_scale_inside_a_contraction_scales_its_readers():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(Q: T.Buffer((4, 8), "float16"), K: T.Buffer((4, 8), "float16"), Y: T.Buffer((4, 4), "float32")):
            S = T.sblock_alloc_buffer((4, 4), "float32")
            for i, j, d in T.grid(4, 4, 8):
                with T.sblock("S"):
                    vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                    with T.init():
                        S[vi, vj] = T.float32(0)
                    S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd]) \
                        * T.float32(0.125)
            for i, j in T.grid(4, 4):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.exp(S[vi, vj])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(Q: T.Buffer((4, 8), "float16"), K: T.Buffer((4, 8), "float16"), Y: T.Buffer((4, 4), "float32")):
            S = T.sblock_alloc_buffer((4, 4), "float32")
            for i, j, d in T.grid(4, 4, 8):
                with T.sblock("S"):
                    vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                    with T.init():
                        S[vi, vj] = T.float32(0)
                    S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
            for i, j in T.grid(4, 4):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.exp(S[vi, vj] * T.float32(0.125))

    assert_rewrites(FactorOutOfSums(), Before, Expected)


def test_row_value_factor_leaves_the_sum_so_it_waits_for_nothing():
    """`d[i] = Σ_j dy · x · f(v[i]) · w` (a norm backward's d_var: f of the row's variance) becomes
    `d[i] = Σ_j dy · x · w`, and its readers read `d[i] · f(v[i])`: the sum no longer waits for v."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), DY: T.Buffer((4, 8), "float32"), W: T.Buffer((8,), "float32"),
                 O: T.Buffer((4,), "float32")):
            v = T.sblock_alloc_buffer((4,), "float32")
            d = T.sblock_alloc_buffer((4,), "float32")
            for i, k in T.grid(4, 8):
                with T.sblock("v"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        v[vi] = T.float32(0)
                    v[vi] = v[vi] + X[vi, vk] * X[vi, vk]
            for i, j in T.grid(4, 8):
                with T.sblock("d"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        d[vi] = T.float32(0)
                    d[vi] = d[vi] + DY[vi, vj] * (X[vi, vj] * T.rsqrt(v[vi] + T.float32(1))) * W[vj]
            for i in range(4):
                with T.sblock("out"):
                    vi = T.axis.remap("S", [i])
                    O[vi] = d[vi] + v[vi]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), DY: T.Buffer((4, 8), "float32"), W: T.Buffer((8,), "float32"),
                 O: T.Buffer((4,), "float32")):
            v = T.sblock_alloc_buffer((4,), "float32")
            d = T.sblock_alloc_buffer((4,), "float32")
            for i, k in T.grid(4, 8):
                with T.sblock("v"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        v[vi] = T.float32(0)
                    v[vi] = v[vi] + X[vi, vk] * X[vi, vk]
            for i, j in T.grid(4, 8):
                with T.sblock("d"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    T.reads(DY[vi, vj], X[vi, vj], W[vj])
                    T.writes(d[vi])
                    with T.init():
                        d[vi] = T.float32(0)
                    d[vi] = d[vi] + DY[vi, vj] * X[vi, vj] * W[vj]
            for i in range(4):
                with T.sblock("out"):
                    vi = T.axis.remap("S", [i])
                    T.reads(d[vi], v[vi])
                    T.writes(O[vi])
                    O[vi] = d[vi] * T.rsqrt(v[vi] + T.float32(1)) + v[vi]

    assert_rewrites(FactorOutOfSums(), Before, Expected)


def test_row_value_factor_stays_where_its_buffer_is_written_after_the_sum():
    """f(v[i]) cannot move to the sum's readers when a later nest writes v: they would read another v."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((4,), "float32"), O: T.Buffer((4,), "float32")):
            d = T.sblock_alloc_buffer((4,), "float32")
            for i, j in T.grid(4, 8):
                with T.sblock("d"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        d[vi] = T.float32(0)
                    d[vi] = d[vi] + X[vi, vj] * T.exp(V[vi])
            for i in range(4):
                with T.sblock("v"):
                    vi = T.axis.remap("S", [i])
                    V[vi] = d[vi]
            for i in range(4):
                with T.sblock("out"):
                    vi = T.axis.remap("S", [i])
                    O[vi] = d[vi]

    assert_rewrites(FactorOutOfSums(), Before, Before)


def test_divisor_that_varies_with_the_reduction_stays():
    """`Σ_j e / L[j]` cannot be divided afterwards: L varies along j."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(E: T.Buffer((4, 8), "float32"), Lj: T.Buffer((8,), "float32"), O: T.Buffer((4,), "float32")):
            acc = T.sblock_alloc_buffer((4,), "float32")
            for i, j in T.grid(4, 8):
                with T.sblock("sum"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        acc[vi] = T.float32(0)
                    acc[vi] = acc[vi] + E[vi, vj] / Lj[vj]
            for i in range(4):
                with T.sblock("out"):
                    vi = T.axis.remap("S", [i])
                    O[vi] = acc[vi]

    assert_rewrites(FactorOutOfSums(), Before, Before)
