"""An int32 max reduction over a hand-split reduction loop (with its `T.where` tail) and a
second reduction axis gives wrong values: a silent wrong result.

Found by the fuzzer (seed 4058230223, verify=False): every element differs, e.g. -4 where TVM
gives 15. Not yet shrunk: the split, the `v1 % 5` index and the second reduction axis v2 are
the suspects. Cause: the predicate on the serial reduction loops masked the loads (reading 0)
but not the fold, and the result's store was masked by it after the loops. Fixed in
lowering/rules/reductions.py: conditions on a reduction's loops guard each term, not the store.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def split_reduction_max(I0: T.Buffer((4, 5, 9), "int32"), I1: T.Buffer((7, 10), "uint8"), Out0: T.Buffer((7,), "int32")):
    for i0, i1o, i1i, i2 in T.grid(7, 2, 8, 9):
        with T.sblock("reduce"):
            v0 = T.axis.spatial(7, i0)
            v1 = T.axis.reduce(11, i1o * 8 + i1i)
            v2 = T.axis.reduce(9, i2)
            T.where(i1o * 8 + i1i < 11)
            with T.init():
                Out0[v0] = T.min_value("int32")
            Out0[v0] = T.max(Out0[v0], T.max(I0[v0 % 4, v1 % 5, v2], T.Cast("int32", I1[v0, v2 + 1])))
