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
