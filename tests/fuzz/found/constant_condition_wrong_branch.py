"""A branch condition that folds to a constant picks the wrong branch: a silent wrong result.

Found by the fuzzer (seeds 1041, 1145, 1160: `T.if_then_else(not (vj == 0), ...)` where vj has
extent 1). The lowering substitutes vj = 0 and emits the folded condition as Python values:

    A_tile = tl.load(A_ptr + ..., mask=tl.where((~(0 == 0)), mask_i, False), other=0.0)
    t = tl.where((~(0 == 0)), A_tile, C_tile)

`~(0 == 0)` is `~True == -2` in Python, which is truthy, so the kernel stores A where TVM stores
C (every element differs). The sm_90 compile accepts it with "tl.where with a non-boolean
condition is deprecated", so a GPU computes the same wrong result. (The issue's "constant
subexpressions are emitted as Python values" class, here as a miscompile.)

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T

# the kernel of a miscompile is part of its detail: a comparison of two literals gives it away


@T.prim_func(s_tir=True)
def constant_condition_wrong_branch(A: T.Buffer((3, 1), "float32"), C: T.Buffer((3, 1), "float32"),
                                    B: T.Buffer((3, 1), "float32")):
    for i, j in T.grid(3, 1):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(not (vj == 0), A[vi, vj], C[vi, vj])  # noqa: SIM201 - the form the fuzzer wrote
