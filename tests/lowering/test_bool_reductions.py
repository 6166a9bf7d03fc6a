"""A max or min of bool values is refused up front by the capability check, at its line, with
what to write instead (it crashed the lowering with a bare ValueError under verify=False)."""

import pytest
from tvm.script import tirx as T

from tir_passes.errors import UnsupportedConstructError
from triton_codegen import compile


@T.prim_func(s_tir=True)
def any_in_row(A: T.Buffer((5, 37), "bool"), C: T.Buffer((5,), "bool")):
    for i, k in T.grid(5, 37):
        with T.sblock("any"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.bool(False)
            C[vi] = T.max(C[vi], A[vi, vk])


@pytest.mark.parametrize("verify", [False, True])
def test_a_bool_max_reduction_is_refused_clearly(verify):
    with pytest.raises(UnsupportedConstructError, match=r"test_bool_reductions.py:\d+: .* max of bool values"):
        compile(any_in_row, verify=verify)
