"""A reduction over an axis the body does not read is summed once instead of once per
iteration: a silent wrong result.

Found by the fuzzer (seed 4058230462, verify=False). `Out0[v0, v2]` starts at 1 and adds
`A0[64 - v0, v2 % 3, v3, 0]` for each of the two values of v1, which the body never reads:
TVM gives 1 + 2a, the kernel gave 1 + a (every element differed). Fixed: the lowering lays
the term along every tile axis that walks the reduction before it folds (lowering/rules/reductions.py).
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def unused_reduction_axis(A0: T.Buffer((65, 1, 1, 1), "float32"), Out0: T.Buffer((65, 1), "float32")):
    for i0, i1, i2, i3 in T.grid(65, 2, 1, 1):
        with T.sblock("reduce"):
            v0, v1, v2, v3 = T.axis.remap("SRSR", [i0, i1, i2, i3])  # noqa: RUF059 - v1 unread is the bug
            with T.init():
                Out0[v0, v2] = T.float32(1.0)
            Out0[v0, v2] = Out0[v0, v2] + A0[65 - 1 - v0, v2 % 3, v3, 0]
