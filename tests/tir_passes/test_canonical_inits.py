"""CanonicalInits and FactorOutOfSums on sums into parameters: a GEMM whose accumulator starts from a
fill nest of its own, from what C holds on entry, or whose scale sits inside the sum into C, compiles to
the tl.dot plan of the form with T.init (it was a scalar loop over K, or an fp32 CUDA-core dot)."""

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from lowering.kernel_plan import plan_of
from tir_passes.passes.canonical_inits import CanonicalInits
from triton_codegen import compile


def make_gemm(M: int, N: int, K: int, start: str = "init", scale: float = 1.0):
    """C = start + scale · A·B, the start written as T.init (`init`: 0, `init_bias`: bias[j]), a fill
    nest before the sum (`fill`: 0, `fill_bias`: bias[j]) or what C holds (`incoming`); the scale
    inside the sum's term."""
    init_value = {"init": "zero", "init_bias": "bias"}.get(start)
    fill_value = {"fill": "zero", "fill_bias": "bias"}.get(start)

    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((M, K), "float16"), B: T.Buffer((K, N), "float16"), bias: T.Buffer((N,), "float32"),
             C: T.Buffer((M, N), "float32")):
        if fill_value is not None:
            for i, j in T.grid(M, N):
                with T.sblock("fill"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.float32(0) if fill_value == "zero" else bias[vj]
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                if init_value is not None:
                    with T.init():
                        C[vi, vj] = T.float32(0) if init_value == "zero" else bias[vj]
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj]) * T.float32(scale)

    return gemm


def _plan(func):
    return plan_of(compile(func, verify=False))


@pytest.mark.parametrize("start, written_as", [("fill", "init"), ("fill_bias", "init_bias")])
def test_a_fill_nest_before_the_sum_is_its_init(start, written_as):
    assert _plan(make_gemm(640, 384, 256, start)) == _plan(make_gemm(640, 384, 256, written_as))


def test_a_sum_into_what_the_output_holds_is_a_dot_and_an_epilogue():
    plan = _plan(make_gemm(640, 384, 256, "incoming"))
    assert plan == _plan(make_gemm(640, 384, 256, "init"))   # the old value joins in the epilogue: same tiles and dot
    kernel = compile(make_gemm(640, 384, 256, "incoming"), verify=False)
    assert "tl.dot(" in kernel.source and "C_combine" in kernel.source


def test_a_scale_inside_a_sum_into_the_output_leaves_it():
    scaled = compile(make_gemm(640, 384, 256, "init", scale=0.3), verify=False)
    assert plan_of(scaled) == _plan(make_gemm(640, 384, 256, "init"))
    assert 'input_precision="ieee"' not in scaled.source   # the fp16 tiles reach the tensor cores


@pytest.mark.interpreter
@pytest.mark.parametrize("start, scale", [("fill", 1.0), ("fill_bias", 0.3), ("incoming", 1.0), ("incoming", 0.3)])
def test_the_rewritten_sums_match_tvm(start, scale):
    compile_and_check(make_gemm(67, 45, 33, start, scale))


def make_running_max(rows: int, cols: int, start: str):
    """M[i] = max over j of X[i, j], from what M holds (`incoming`) or from a fill nest of -inf (`fill`)."""
    @T.prim_func(s_tir=True)
    def running_max(X: T.Buffer((rows, cols), "float32"), M: T.Buffer((rows,), "float32")):
        if start == "fill":
            for i in range(rows):
                with T.sblock("fill"):
                    vi = T.axis.spatial(rows, i)
                    M[vi] = T.float32(float("-inf"))
        for i, j in T.grid(rows, cols):
            with T.sblock("M"):
                vi, vj = T.axis.remap("SR", [i, j])
                M[vi] = T.max(M[vi], X[vi, vj])

    return running_max


@pytest.mark.interpreter
@pytest.mark.parametrize("start", ["fill", "incoming"])
def test_a_max_from_a_fill_or_from_the_incoming_value_matches_tvm(start):
    kernel = compile_and_check(make_running_max(37, 70, start))
    assert len(kernel.program.kernels) == 1


def test_the_fill_moves_into_the_update_at_its_element():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 6), "float32"), Y: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("fill"):
                    vi = T.axis.spatial(4, i)
                    Y[vi] = T.float32(1)
            for a, b in T.grid(4, 6):
                with T.sblock("Y"):
                    va, vb = T.axis.remap("SR", [a, b])
                    Y[va] = Y[va] + X[va, vb]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 6), "float32"), Y: T.Buffer((4,), "float32")):
            for a, b in T.grid(4, 6):
                with T.sblock("Y"):
                    va, vb = T.axis.remap("SR", [a, b])
                    T.reads(X[va, vb])
                    T.writes(Y[va])
                    with T.init():
                        Y[va] = T.float32(1)
                    Y[va] = Y[va] + X[va, vb]

    assert_rewrites(CanonicalInits(), Before, Expected)


def test_a_sum_into_an_intermediate_nothing_wrote_stays():
    @I.ir_module
    class Unwritten:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 6), "float32"), Z: T.Buffer((4,), "float32")):
            Y = T.alloc_buffer((4,), "float32")
            for a, b in T.grid(4, 6):
                with T.sblock("Y"):
                    va, vb = T.axis.remap("SR", [a, b])
                    Y[va] = Y[va] + X[va, vb]
            for a in range(4):
                with T.sblock("Z"):
                    va = T.axis.spatial(4, a)
                    Z[va] = Y[va]

    assert_rewrites(CanonicalInits(), Unwritten, Unwritten)


def _kept(module):
    assert_rewrites(CanonicalInits(), module, module)


def _partial_fill(diagonal: bool):
    """Y = Y_in + Σ_b X after a fill of part of Y: its diagonal, or its first rows under a T.where."""
    @T.prim_func(s_tir=True)
    def partial_fill(X: T.Buffer((4, 4, 6), "float32"), Y: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.sblock("fill"):
                vi, vj = T.axis.remap("SS", [i, j])
                if not diagonal:
                    T.where(i < 2)
                Y[vi, vi if diagonal else vj] = T.float32(0)
        for a, c, b in T.grid(4, 4, 6):
            with T.sblock("Y"):
                va, vc, vb = T.axis.remap("SSR", [a, c, b])
                Y[va, vc] = Y[va, vc] + X[va, vc, vb]

    return partial_fill


@pytest.mark.interpreter
@pytest.mark.parametrize("diagonal", [True, False])
def test_a_partial_fill_is_no_init(diagonal):
    """The fill stays a nest of its own (what it left unfilled keeps Y's incoming values); the sum is
    taken apart from Y and added to it after."""
    compile_and_check(_partial_fill(diagonal), aot=False)
    rewritten = CanonicalInits()(tvm.IRModule({"main": _partial_fill(diagonal)}))["main"].script()
    assert 'T.sblock("fill")' in rewritten and 'T.sblock("Y_combine")' in rewritten


def test_an_update_under_a_predicate_or_of_no_steps_stays():
    @I.ir_module
    class Predicated:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((8, 6), "float32"), Y: T.Buffer((8,), "float32")):
            for a, b in T.grid(8, 6):
                with T.sblock("Y"):
                    va, vb = T.axis.remap("SR", [a, b])
                    T.where(a < 4)
                    Y[va] = Y[va] + X[va, vb]

    @I.ir_module
    class Symbolic:
        @T.prim_func(s_tir=True)
        def main(x: T.handle, Y: T.Buffer((8,), "float32")):
            n = T.int32()
            X = T.match_buffer(x, (8, n), "float32")
            for i in range(8):
                with T.sblock("fill"):
                    vi = T.axis.spatial(8, i)
                    Y[vi] = T.float32(1)
            for a, b in T.grid(8, n):
                with T.sblock("Y"):
                    va, vb = T.axis.remap("SR", [a, b])
                    Y[va] = Y[va] + X[va, vb]

    _kept(Predicated)
    _kept(Symbolic)   # at n = 0 the fill's ones must stay: a T.init would never run


@pytest.mark.interpreter
def test_an_integer_max_from_the_incoming_value_matches_tvm():
    @T.prim_func(s_tir=True)
    def int_max(X: T.Buffer((13, 21), "int32"), M: T.Buffer((13,), "int32")):
        for i, j in T.grid(13, 21):
            with T.sblock("M"):
                vi, vj = T.axis.remap("SR", [i, j])
                M[vi] = T.max(M[vi], X[vi, vj])

    assert "M_max" in compile_and_check(int_max, aot=False).source
