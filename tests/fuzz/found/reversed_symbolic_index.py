"""A reversed index over a symbolic size fails the bounds check, which blames HoistAllocations.

Found by the fuzzer (seeds 1054, 1056). `compile(verify=True)` raises

    VerificationError: verification 'bounds' failed after pass HoistAllocations:
    line 11: block 'B': A[n - 1 - v]: index n - 1 - v of dimension 0 is not proven within [0, n)

`0 <= v < n` gives `0 <= n - 1 - v < n` directly; the same access with a constant size (`30 - v`
over 31 elements) is proven. HoistAllocations changed nothing: the input itself is what the
check cannot prove, and the error names a pass. With verify=False the kernel is correct.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T

SIZES = {"n": 9}


@T.prim_func(s_tir=True)
def reversed_symbolic_index(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = A[n - 1 - v]
