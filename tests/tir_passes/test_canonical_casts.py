"""CanonicalCasts: Before/Expected for the casts that change no value, the rounding casts it keeps,
and a contraction whose operands are written as a round trip compiling to the plain kernel."""

from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from plan_invariance.rewrites import operand_cast_round_trip, parse, script_of
from tir_passes.passes.canonical_casts import CanonicalCasts
from triton_codegen import compile

from linear import make_linear


def test_a_round_trip_and_an_identity_cast_are_dropped():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 6), "float16"), S: T.Buffer((4, 6), "float32"), Y: T.Buffer((4, 6), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.Cast("float32", T.Cast("float16", T.Cast("float32", X[vi, vj]))) + \
                        T.Cast("float32", S[vi, vj])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 6), "float16"), S: T.Buffer((4, 6), "float32"), Y: T.Buffer((4, 6), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.Cast("float32", X[vi, vj]) + S[vi, vj]

    assert_rewrites(CanonicalCasts(), Before, Expected)


def test_rounding_casts_stay():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(S: T.Buffer((4, 6), "float32"), Y: T.Buffer((4, 6), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = T.Cast("float32", T.Cast("float16", S[vi, vj]))

    assert_rewrites(CanonicalCasts(), Before, Before)


def test_operands_written_as_a_round_trip_are_the_loaded_tiles_of_the_dot():
    linear = make_linear(37, 45, 53)
    rewritten = parse(operand_cast_round_trip(script_of(linear)))
    dots = [[line.strip() for line in compile(func, verify=False).source.splitlines() if "tl.dot(" in line]
            for func in (linear, rewritten)]
    assert dots[0] == dots[1] and ".to(" not in "".join(dots[1])
