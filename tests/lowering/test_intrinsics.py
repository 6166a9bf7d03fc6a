"""Every TIR intrinsic the lowering accepts has exactly one emitter rule, and each family of
intrinsics computes what TVM's llvm build computes: in the interpreter, and compiled ahead of time
for sm_90 and sm_80."""

import ast

import pytest
import tvm
from tvm.script import tirx as T

from helpers import AOT_ARCHS, compile_and_check
from lowering.rules import exprs
from lowering.ops import BINARY_INTRINSICS, BINARY_OPS, UNARY_INTRINSICS, UNARY_OPS
from lowering.tile_ir import Binary, Const, Reg, TileKernel, Unary
from tir_passes import UnsupportedConstructError
from triton_codegen import check_against_tvm, compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.configs import config_space
from triton_codegen.emit_kernel import BINARY_RULES, UNARY_RULES, KernelPrinter
from triton_codegen.source import Source


# --- the op table and the emitter agree ----------------------------------------------------
def test_every_unary_op_has_one_emitter_rule_and_no_rule_is_dead():
    assert sorted(set(UNARY_OPS) - set(UNARY_RULES)) == [], "unary tile ops without an emitter rule"
    assert sorted(set(UNARY_RULES) - set(UNARY_OPS)) == [], "emitter rules for no unary tile op"


def test_every_binary_op_has_one_emitter_rule_and_no_rule_is_dead():
    assert sorted(set(BINARY_OPS) - set(BINARY_RULES)) == [], "binary tile ops without an emitter rule"
    assert sorted(set(BINARY_RULES) - set(BINARY_OPS)) == [], "emitter rules for no binary tile op"


def test_the_lowering_produces_only_tile_ops():
    produced = set(exprs.TIR_BINARY_OPS.values()) | set(BINARY_INTRINSICS.values()) | {"fmod", "//", "%", "/"}
    assert produced <= set(BINARY_OPS)
    assert set(UNARY_INTRINSICS.values()) | {"not", "bitnot", "floor"} <= set(UNARY_OPS)


def test_every_mapped_intrinsic_is_a_tvm_op():
    """The intrinsic names are TVM's (tirx.exp, prim.ceil, ...), so no mapping is dead by a typo."""
    registered = {str(name).split(".")[-1] for name in tvm.ir.Op.list_op_names()
                  if str(name).startswith(("tirx.", "prim.")) and str(name).count(".") == 1}
    assert sorted(set(UNARY_INTRINSICS) - registered) == []
    assert sorted(set(BINARY_INTRINSICS) - registered) == []


def _printer() -> KernelPrinter:
    kernel = TileKernel("k", (), (), (), (), (), None, 4, 2, ())
    return KernelPrinter(kernel, Source())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_every_float_rule_renders_python(dtype):
    """Each rule formats completely (no `{field}` left) into Python, for operands in every float width."""
    x, y = Reg("x", dtype, ()), Reg("y", dtype, ())
    bool_ops, int_ops = {"not", "and", "or"}, {"bitnot", "//", "%", "floordiv", "floormod", "cdiv", "&", "|", "^", "<<", ">>"}
    for op in sorted(set(UNARY_OPS) - bool_ops - int_ops):
        text = _printer().render_own(Unary(op, x, dtype, ()))
        ast.parse(text, mode="eval")
        assert "{" not in text
    for op in sorted(set(BINARY_OPS) - bool_ops - int_ops):
        for b in (y, Const(-2.0, dtype)):
            text = _printer().render_own(Binary(op, x, b, dtype, ()))
            ast.parse(text, mode="eval")
            assert "{" not in text


# --- unsupported intrinsics: a named error with the line -----------------------------------
def test_intrinsic_without_mapping_names_op_and_line():
    @T.prim_func(s_tir=True)
    def hyperbolic(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.sinh(A[vi])

    with pytest.raises(UnsupportedConstructError, match=r"test_intrinsics.py:\d+: the call .*sinh.* has no Triton mapping"):
        compile(hyperbolic, verify=False)


def test_float_intrinsic_of_an_integer_is_refused():
    @T.prim_func(s_tir=True)
    def int_exp(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.exp(A[vi])

    with pytest.raises(UnsupportedConstructError, match=r"test_intrinsics.py:\d+: .*applies exp to a int32 value"):
        compile(int_exp, verify=False)


# --- one program per family, against TVM's llvm build ---------------------------------------
@T.prim_func(s_tir=True)
def float_unary(A: T.Buffer((37, 29), "float32"), G: T.Buffer((37, 29), "float64"), O: T.Buffer((16, 37, 29), "float32"),
                P: T.Buffer((6, 37, 29), "float64")):
    for i, j in T.grid(37, 29):
        with T.sblock("O"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[0, vi, vj] = T.exp(A[vi, vj])
            O[1, vi, vj] = T.exp2(A[vi, vj])
            O[2, vi, vj] = T.exp10(A[vi, vj])
            O[3, vi, vj] = T.log(T.fabs(A[vi, vj]) + T.float32(0.01))
            O[4, vi, vj] = T.log2(T.fabs(A[vi, vj]) + T.float32(0.01))
            O[5, vi, vj] = T.log10(T.fabs(A[vi, vj]) + T.float32(0.01))
            O[6, vi, vj] = T.log1p(A[vi, vj] * T.float32(1e-6)) * T.float32(1e6)  # small x keeps its digits
            O[7, vi, vj] = T.sqrt(T.fabs(A[vi, vj]))
            O[8, vi, vj] = T.rsqrt(T.fabs(A[vi, vj]) + T.float32(0.01))
            O[9, vi, vj] = T.sin(A[vi, vj] * T.float32(3))
            O[10, vi, vj] = T.cos(A[vi, vj] * T.float32(3))
            O[11, vi, vj] = T.tan(A[vi, vj])
            O[12, vi, vj] = T.tanh(A[vi, vj] * T.float32(2))
            O[13, vi, vj] = T.sigmoid(A[vi, vj] * T.float32(2))
            O[14, vi, vj] = T.erf(A[vi, vj])
            O[15, vi, vj] = T.abs(A[vi, vj])
            P[0, vi, vj] = T.exp(G[vi, vj])
            P[1, vi, vj] = T.log1p(G[vi, vj] * T.float64(1e-9)) * T.float64(1e9)
            P[2, vi, vj] = T.erf(G[vi, vj])
            P[3, vi, vj] = T.tanh(G[vi, vj])
            P[4, vi, vj] = T.sigmoid(G[vi, vj])
            P[5, vi, vj] = T.pow(T.fabs(G[vi, vj]) + T.float64(0.1), G[vi, vj]) + T.sqrt(T.fabs(G[vi, vj]))


@T.prim_func(s_tir=True)
def rounding_with_ties(I: T.Buffer((203,), "int32"), A: T.Buffer((203,), "float32"), F: T.Buffer((203,), "float64"),
                       O: T.Buffer((8, 203), "float32"), D: T.Buffer((2, 203), "float64"), C: T.Buffer((203,), "int32")):
    # I holds -8..8, so I / 2 hits every tie from -4 to 4
    for i in range(203):
        with T.sblock("O"):
            vi = T.axis.spatial(203, i)
            O[0, vi] = T.round(T.Cast("float32", I[vi]) * T.float32(0.5))
            O[1, vi] = T.nearbyint(T.Cast("float32", I[vi]) * T.float32(0.5))
            O[2, vi] = T.trunc(T.Cast("float32", I[vi]) * T.float32(0.5))
            O[3, vi] = T.floor(T.Cast("float32", I[vi]) * T.float32(0.5))
            O[4, vi] = T.ceil(T.Cast("float32", I[vi]) * T.float32(0.5))
            O[5, vi] = T.round(A[vi] * T.float32(3))
            O[6, vi] = T.trunc(A[vi] * T.float32(3))
            O[7, vi] = T.round(A[vi] * T.float32(3e7))
            D[0, vi] = T.round(T.Cast("float64", I[vi]) * T.float64(0.5))
            D[1, vi] = T.round(F[vi] * T.float64(3))
            C[vi] = T.Cast("int32", A[vi] * T.float32(3))


@T.prim_func(s_tir=True)
def int_bit_ops(A: T.Buffer((203,), "int32"), B: T.Buffer((203,), "int32"), U: T.Buffer((203,), "uint32"),
                V: T.Buffer((203,), "uint32"), O: T.Buffer((10, 203), "int32"), P: T.Buffer((5, 203), "uint32")):
    # A and B hold -8..8: negative values shift arithmetically; shift counts are masked to 0..7
    for i in range(203):
        with T.sblock("O"):
            vi = T.axis.spatial(203, i)
            O[0, vi] = T.bitwise_and(A[vi], B[vi])
            O[1, vi] = T.bitwise_or(A[vi], B[vi])
            O[2, vi] = T.bitwise_xor(A[vi], B[vi])
            O[3, vi] = T.bitwise_not(A[vi])
            O[4, vi] = T.shift_left(A[vi], T.bitwise_and(B[vi], 7))
            O[5, vi] = T.shift_right(A[vi], T.bitwise_and(B[vi], 7))
            O[6, vi] = T.abs(A[vi])
            O[7, vi] = T.min(A[vi], B[vi]) * 100 + T.max(A[vi], B[vi])
            O[8, vi] = T.shift_right(A[vi] * 1000003, 3) ^ T.shift_left(B[vi], 28)
            O[9, vi] = T.truncdiv(A[vi], 3) * 10 + T.truncmod(A[vi], 3)
            P[0, vi] = T.shift_right(U[vi] * T.uint32(300000000), T.bitwise_and(V[vi], T.uint32(7)))
            P[1, vi] = T.shift_left(U[vi], T.uint32(28))
            P[2, vi] = T.bitwise_not(U[vi])
            P[3, vi] = T.bitwise_xor(U[vi], V[vi]) | T.bitwise_and(U[vi], T.uint32(5))
            P[4, vi] = T.min(U[vi], V[vi]) * T.uint32(16) + T.max(U[vi], V[vi])


@T.prim_func(s_tir=True)
def pow_and_remainders(A: T.Buffer((37, 29), "float32"), B: T.Buffer((37, 29), "float32"), E: T.Buffer((37, 29), "int32"),
                       O: T.Buffer((5, 37, 29), "float32")):
    # E holds -8..8: negative bases with integral exponents (zero included) keep C's pow signs
    for i, j in T.grid(37, 29):
        with T.sblock("O"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[0, vi, vj] = T.pow(T.fabs(A[vi, vj]) + T.float32(0.1), B[vi, vj])
            O[1, vi, vj] = T.pow(A[vi, vj], T.Cast("float32", E[vi, vj]))
            O[2, vi, vj] = T.pow(A[vi, vj], B[vi, vj])
            O[3, vi, vj] = T.truncmod(A[vi, vj] * T.float32(10), B[vi, vj])
            O[4, vi, vj] = T.copysign(A[vi, vj], B[vi, vj]) + T.copysign(T.float32(2), A[vi, vj])


@T.prim_func(s_tir=True)
def nan_and_inf(A: T.Buffer((203,), "float32"), N: T.Buffer((203,), "bool"), I: T.Buffer((203,), "bool"),
                F: T.Buffer((203,), "bool"), O: T.Buffer((203,), "float32"), M: T.Buffer((4, 203), "float32")):
    # log of a negative is NaN, exp(100 * x) overflows for x > 0.89: all three kinds appear
    for i in range(203):
        with T.sblock("O"):
            vi = T.axis.spatial(203, i)
            N[vi] = T.isnan(T.log(A[vi]) + T.exp(A[vi] * T.float32(100)))
            I[vi] = T.isinf(T.log(A[vi]) + T.exp(A[vi] * T.float32(100)))
            F[vi] = T.isfinite(T.log(A[vi]) + T.exp(A[vi] * T.float32(100)))
            O[vi] = T.Select(T.likely(T.isfinite(T.log(A[vi]) + T.exp(A[vi] * T.float32(100)))), A[vi], T.float32(-1))
            # min and max propagate NaN as torch's do (TVM's are selects; the reference is rewritten to match)
            M[0, vi] = T.min(T.log(A[vi]), A[vi])
            M[1, vi] = T.min(A[vi], T.log(A[vi]))
            M[2, vi] = T.max(T.log(A[vi]), A[vi])
            M[3, vi] = T.max(A[vi], T.log(A[vi]))


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("func", [float_unary, rounding_with_ties, int_bit_ops, pow_and_remainders, nan_and_inf],
                         ids=lambda f: str(f.attrs["global_symbol"]))
def test_intrinsic_family_matches_tvm(func):
    compile_and_check(func)


@T.prim_func(s_tir=True)
def fmod_call(A: T.Buffer((37, 29), "float32"), B: T.Buffer((37, 29), "float32"), O: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("O"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[vi, vj] = T.fmod(A[vi, vj] * T.float32(10), B[vi, vj])


@T.prim_func(s_tir=True)
def fmod_as_truncmod(A: T.Buffer((37, 29), "float32"), B: T.Buffer((37, 29), "float32"), O: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("O"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[vi, vj] = T.truncmod(A[vi, vj] * T.float32(10), B[vi, vj])


@pytest.mark.interpreter
@pytest.mark.aot
def test_fmod_call_is_c_fmod():
    """TVM's llvm build has no rule for T.fmod, so the kernel is checked against its float
    truncmod (both are C's fmod)."""
    kernel = compile(fmod_call, verify=False)
    report = check_against_tvm(kernel, fmod_as_truncmod)
    assert report.ok, str(report)
    for tile_kernel in kernel.program.kernels:
        for arch in AOT_ARCHS:
            compile_ahead_of_time(kernel.module_file(), tile_kernel, config_space(tile_kernel)[0], arch)


def test_a_half_scalar_keeps_its_dtype_in_minimum_and_where():
    # Triton 3.6 makes a Python float a float32 tensor in tl.minimum/maximum/where (found/half_constant_in_minimum.py)
    import os

    from tests.fuzz.runner import load_program
    from triton_codegen import compile as compile_program

    found = os.path.join(os.path.dirname(__file__), "..", "fuzz", "found", "half_constant_in_minimum.py")
    source = compile_program(load_program(found), verify=False).source
    assert "tl.minimum(A0_tile, tl.full([], 0.0, tl.float16)" in source
