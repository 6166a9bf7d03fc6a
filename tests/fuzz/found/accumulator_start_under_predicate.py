"""A reduction without T.init whose block has a predicate on its reduction variables read its
output's starting value under that predicate, outside the loop that defines its variables.

Found by the GPU fuzz campaign of 2026-12-02 (seeds 7301 and 7691, scale 2): `Out0[v1] = Out0[v1] +
A0[v2]` with `T.where(i0o * 4 + i0i < 5)` over a split reduction loop. The accumulator opens with
what Out0 holds (no T.init), loaded before the reduction loops, but its mask carried the predicate
on `i0o`, `i0i`: Triton's compile for sm_90 failed with `NameError('i0o is not defined')`. The
predicate decides which terms are folded, not where the output is read: the starting value is now
loaded without the conditions on the reduction loops, as the result is stored without them.

Fixed (2026-12-02): this file is a regression test.
"""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def accumulator_start_under_predicate(A0: T.Buffer((7,), "float32"), Out0: T.Buffer((75,), "float32")):
    for i0o, i0i, i1, i2 in T.grid(2, 4, 75, 7):
        with T.sblock("reduce"):
            v0 = T.axis.reduce(5, i0o * 4 + i0i)
            v1 = T.axis.spatial(75, i1)
            v2 = T.axis.reduce(7, i2)
            T.where(i0o * 4 + i0i < 5)
            Out0[v1] = Out0[v1] + A0[v2]
