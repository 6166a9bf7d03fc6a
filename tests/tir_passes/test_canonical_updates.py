"""CanonicalUpdates: Before/Expected for self-updates written with the old value on the right and
for a contraction's factors in the other order, the updates it leaves; normalize-first attention
written `acc = P · V + acc` keeping its flash plan, and a large GEMM written `B · A` its tiles."""

from tvm.script import ir as I
from tvm.script import tirx as T

from attention_forms import make_attention_normalize_first
from helpers import assert_rewrites
from matmul import make_matmul
from plan_invariance.check import plan
from plan_invariance.rewrites import factors_commuted, parse, script_of, update_commuted
from tir_passes.passes.canonical_updates import CanonicalUpdates


def test_the_stored_element_moves_to_the_left_of_a_sum_a_product_and_a_max():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), S: T.Buffer((4,), "float32"), P: T.Buffer((4,), "float32"),
                 M: T.Buffer((4,), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("S"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = A[vi, vj] * T.float32(2) + S[vi]
            for i, j in T.grid(4, 6):
                with T.sblock("P"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        P[vi] = T.float32(1)
                    P[vi] = A[vi, vj] * P[vi]
            for i, j in T.grid(4, 6):
                with T.sblock("M"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32("-inf")
                    M[vi] = T.max(A[vi, vj], M[vi])

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), S: T.Buffer((4,), "float32"), P: T.Buffer((4,), "float32"),
                 M: T.Buffer((4,), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("S"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = S[vi] + A[vi, vj] * T.float32(2)
            for i, j in T.grid(4, 6):
                with T.sblock("P"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        P[vi] = T.float32(1)
                    P[vi] = P[vi] * A[vi, vj]
            for i, j in T.grid(4, 6):
                with T.sblock("M"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32("-inf")
                    M[vi] = T.max(M[vi], A[vi, vj])

    assert_rewrites(CanonicalUpdates(), Before, Expected)


def test_a_contractions_factors_follow_the_output_axes():
    """C[i, j] += B[k, j] * A[i, k]: A's own variable i indexes C's first axis, so A comes first."""
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 5), "float16"), B: T.Buffer((5, 6), "float16"), C: T.Buffer((4, 6), "float32")):
            for i, j, k in T.grid(4, 6, 5):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = T.Cast("float32", B[vk, vj]) * T.Cast("float32", A[vi, vk]) + C[vi, vj]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 5), "float16"), B: T.Buffer((5, 6), "float16"), C: T.Buffer((4, 6), "float32")):
            for i, j, k in T.grid(4, 6, 5):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(B[vk, vj], A[vi, vk])   # the regions as they were
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])

    assert_rewrites(CanonicalUpdates(), Before, Expected)


def test_a_large_gemm_written_b_times_a_keeps_its_tiles():
    """8192×1024×4096 fp16: the wide tile stays on the axis it has in the A · B spelling."""
    func = make_matmul(8192, 1024, 4096, "float16")
    assert plan(parse(factors_commuted(script_of(func)))) == plan(func)


def test_other_updates_stay():
    """A subtraction (not commutative), another element on the right, the old value already first,
    a product with a scale (the scale has no spatial variable of its own)."""
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((4, 6), "float32"), S: T.Buffer((4,), "float32"), D: T.Buffer((5,), "float32")):
            for i, j in T.grid(4, 6):
                with T.sblock("S"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = A[vi, vj] - S[vi]
            for i in range(4):
                with T.sblock("D"):
                    vi = T.axis.remap("S", [i])
                    D[vi + 1] = A[vi, 0] + D[vi]
            for i, j in T.grid(4, 6):
                with T.sblock("S2"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = S[vi] + A[vi, vj]
            for i, j in T.grid(4, 6):
                with T.sblock("S3"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        S[vi] = T.float32(0)
                    S[vi] = S[vi] + T.float32(2) * A[vi, vj]

    assert_rewrites(CanonicalUpdates(), Before, Before)


def test_normalize_first_attention_with_the_accumulator_on_the_right_keeps_the_flash_plan():
    func = make_attention_normalize_first(1, 2, 21, 16)
    commuted = parse(update_commuted(script_of(func)))
    assert "+ acc[" in commuted.script()
    assert plan(commuted) == plan(func)
    assert any(kernel.restarts for kernel in plan(func).kernels)   # the online (flash) form
