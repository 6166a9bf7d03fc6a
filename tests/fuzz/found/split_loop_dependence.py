"""A hand-split loop whose factor does not divide the extent is reported as carrying a dependence.

Found by the fuzzer (seeds 5, 1101: `v = T.axis.spatial(7, io * 3 + ii)` with `T.where(io * 3 + ii < 7)`).
Besides the tail-predicate complaint of split_loop_tail_predicate.py, the contract check says

    kernel 0: tile loop io_1: loop io_1 carries a dependence through B: B: B[v] and B: B[v] may
    touch the same element in different iterations

but `io * 3 + ii` with `ii < 3` is injective: no two iterations write one element. The
dependence analysis does not use the bound of `ii` (or the predicate), so a plain elementwise
block is called loop-carried. With verify=False the kernel is correct.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def split_loop_dependence(A: T.Buffer((7,), "float32"), B: T.Buffer((7,), "float32")):
    for io, ii in T.grid(3, 3):
        with T.sblock("B"):
            v = T.axis.spatial(7, io * 3 + ii)
            T.where(io * 3 + ii < 7)
            B[v] = A[v] * T.float32(2)
