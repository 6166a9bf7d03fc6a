"""A user's predicate that bounds a symbolic axis by a constant failed the contract check after Tiling.

Found by the fuzzer (seed 71093, elementwise; shrunk by hand). `compile(verify=True)` raised

    VerificationError: verification 'contract' failed after pass Tiling:
    kernel 0: tile loop i0_1 (axis i0): block compute's predicate `i0_0 * 2 + i0_1 < 5` lets
    iterations past `i0_0 * 2 + i0_1 < n` run (the extent the kernel masks at)

Tiling kept both bounds (`i < 5 and i < n`: the kernel masks with each), but the check asked each
conjunct alone to imply `i < n`, which `i < 5` does not while n may be below 5. It now asks the
conjuncts together. Fixed (2026-12-07): a regression test, its kernel checked at n = 3, below the
user's bound (the fuzzer bound n = 19).
"""
from tvm.script import tirx as T

SIZES = {"n": 3, "m": 25}


@T.prim_func(s_tir=True)
def predicate_tighter_than_symbolic_extent(a_handle: T.handle, out_handle: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a_handle, (n, m), "float32")
    Out = T.match_buffer(out_handle, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.sblock("compute"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i < 5)
            Out[vi, vj] = A[vi, vj]
