"""Let bindings (`t: T.let[T.float32] = ...`, which TE and topi emit as `tirx.Bind`) in a block:
later statements read the bound value."""

from tvm.script import tirx as T

from helpers import compile_and_check


@T.prim_func(s_tir=True)
def squared_plus(A: T.Buffer((37, 29), "float32"), B: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            t: T.let[T.float32] = A[vi, vj] * T.float32(2)
            B[vi, vj] = t * t + t


def test_a_let_binding_in_a_spatial_block_matches_tvm():
    kernel = compile_and_check(squared_plus)
    assert kernel.source.count("tl.load(") == 1
