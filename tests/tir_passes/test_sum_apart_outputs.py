"""FactorOutOfSums on a sum written straight into a parameter: attention whose weights are divided by the
row sum inside the weighted sum into the output O (no intermediate accumulator) sums apart into an
intermediate, the division leaves for the copy into O, and the flash form follows (one kernel, two dots)."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from triton_codegen import compile


def make_divided_into_output(S: int, D: int):
    @T.prim_func(s_tir=True)
    def divided_into_output(Q: T.Buffer((S, D), "float16"), K: T.Buffer((S, D), "float16"),
                            V: T.Buffer((S, D), "float16"), O: T.Buffer((S, D), "float32")):
        scores = T.sblock_alloc_buffer((S, S), "float32")
        row_max = T.sblock_alloc_buffer((S,), "float32")
        row_sum = T.sblock_alloc_buffer((S,), "float32")
        for i, j, d in T.grid(S, S, D):
            with T.sblock("scores"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    scores[vi, vj] = T.float32(0)
                scores[vi, vj] = scores[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
        for i, j in T.grid(S, S):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.float32(float("-inf"))
                row_max[vi] = T.max(row_max[vi], scores[vi, vj])
        for i, j in T.grid(S, S):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + T.exp(scores[vi, vj] - row_max[vi])
        for i, d, j in T.grid(S, D, S):
            with T.sblock("O"):
                vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                with T.init():
                    O[vi, vd] = T.float32(0)
                O[vi, vd] = O[vi, vd] + T.exp(scores[vi, vj] - row_max[vi]) / row_sum[vi] \
                    * T.Cast("float32", V[vj, vd])

    return divided_into_output


def test_a_division_inside_a_sum_into_the_output_leaves_it():
    kernel = compile(make_divided_into_output(256, 64), verify=False)
    assert len(kernel.program.kernels) == 1, [k.source_blocks for k in kernel.program.kernels]
    [pointer_kernel] = [k for k in kernel.source.split("@triton.jit")[1:]
                        if k.lstrip().startswith("def divided_into_output_kernel0(")]
    assert pointer_kernel.count("tl.dot(") == 2
    assert pointer_kernel.count("for j_0 in range(") == 1   # one walk over the keys: the online (flash) form


@pytest.mark.interpreter
def test_a_division_inside_a_sum_into_the_output_matches_tvm():
    compile_and_check(make_divided_into_output(37, 16), aot=False)
