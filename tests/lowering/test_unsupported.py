"""Constructs with no Triton form fail at compile time with the named error and the line."""

import pytest
from tvm.script import tirx as T

from tir_passes import UnsupportedConstructError
from triton_codegen import compile


def test_data_dependent_while_loop():
    @T.prim_func(s_tir=True)
    def countdown(A: T.Buffer((16,), "int32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                while A[vi] > 0:
                    A[vi] = A[vi] - 1

    with pytest.raises(UnsupportedConstructError, match=r"test_unsupported.py:\d+: a data-dependent while loop"):
        compile(countdown)


def test_extern_call_without_triton_mapping():
    @T.prim_func(s_tir=True)
    def external(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.call_extern("float32", "my_fn", A[vi])

    with pytest.raises(UnsupportedConstructError, match=r"test_unsupported.py:\d+: T.call_extern calls 'my_fn', a "
                       r"function from outside the program.*supported calls: ceil, .*tanh, trunc"):
        compile(external, verify=False)


def test_unsupported_dtype():
    @T.prim_func(s_tir=True)
    def fp8(A: T.Buffer((16,), "float8_e4m3fn"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.Cast("float32", A[vi])

    with pytest.raises(UnsupportedConstructError, match=r"test_unsupported.py:\d+: buffer A has dtype float8_e4m3fn"):
        compile(fp8)


def test_plain_tirx_function_is_rejected():
    @T.prim_func
    def loops_only(A: T.Buffer((16,), "float32")):
        for i in range(16):
            A[i] = A[i] + T.float32(1)

    with pytest.raises(UnsupportedConstructError, match="not S-TIR"):
        compile(loops_only)


def _refused_before_any_pass(monkeypatch, func, pattern: str) -> None:
    """The capability check refuses `func` with `pattern` before the pipeline runs a pass."""
    import sys

    def no_pipeline(*args, **kwargs):
        pytest.fail("a pass ran: the refusal came late")

    monkeypatch.setattr(sys.modules["triton_codegen.driver"], "run_pipeline", no_pipeline)
    with pytest.raises(UnsupportedConstructError, match=pattern):
        compile(func)


def test_an_if_around_loops_is_refused_before_any_pass(monkeypatch):
    """The check reads the lowering's statement tables: `if` is a block-body statement only."""
    @T.prim_func(s_tir=True)
    def guarded(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), n: T.int32):
        if n > 0:
            for i in range(16):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i)
                    B[vi] = A[vi]

    _refused_before_any_pass(monkeypatch, guarded, r"test_unsupported.py:\d+: statement IfThenElse .* has no Triton "
                             r"mapping around blocks .*supported there: for loops of known extent, T.sblock blocks")


def test_an_if_inside_a_block_compiles():
    @T.prim_func(s_tir=True)
    def clipped(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                if A[vi] > 0.0:
                    B[vi] = A[vi]
                else:
                    B[vi] = 0.0

    assert compile(clipped, verify=False).program.kernels


def test_a_block_nested_in_a_block_body_is_refused_before_any_pass(monkeypatch):
    @T.prim_func(s_tir=True)
    def nested(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        for i in range(4):
            with T.sblock("outer"):
                vi = T.axis.spatial(4, i)
                for j in range(4):
                    with T.sblock("inner"):
                        vj = T.axis.spatial(4, j)
                        B[vi, vj] = A[vi, vj]

    _refused_before_any_pass(monkeypatch, nested, r"block 'inner' is nested in another block's body")
