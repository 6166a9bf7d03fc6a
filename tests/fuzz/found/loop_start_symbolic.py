"""A loop that starts above 0 and ends at a symbolic bound fails the bounds check.

Found by the fuzzer (seed 17 of the generator with loop starts). `compile(verify=True)` raises

    VerificationError: verification 'bounds' failed after pass HoistAllocations:
    line 14: block 'B': binding v = i - 2 is not proven inside the variable's domain (below n)
    under the loop ranges and the block predicate

`i` runs over [2, n + 2), so `i - 2` is in [0, n). With a constant bound (`range(2, 11)`, domain
9) the same program is proven, and with verify=False the kernel is correct. Probably the cause
of reversed_symbolic_index.py too: linear facts over a symbolic size are not proven.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T

SIZES = {"n": 9}


@T.prim_func(s_tir=True)
def loop_start_symbolic(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(2, n + 2):
        with T.sblock("B"):
            v = T.axis.spatial(n, i - 2)
            B[v] = A[v] * T.float32(2)
