"""A loop split by hand, with its tail predicate, fails the contract check after Tiling.

Found by the fuzzer (seed 32 and about one program in ten: every nest with a `T.where` split).
`compile(verify=True)` raises

    VerificationError: verification 'contract' failed after pass Tiling:
    kernel 0: tile loop io_1 (axis io): block B's predicate `(io_0 * 16 + io_1) * 2 + (ii_0 * 2 + ii_1) < 31`
    is not `io_0 * 16 + io_1 < 16` (the extent the kernel masks at)

A partial predicate on a loop nobody split fails the same way (seeds 5008, 5040 since the
generator writes them: `T.where(i1 < 2)` over `range(5)` gives "predicate `i1_0 * 8 + i1_1 < 2`
is not `i1_0 * 8 + i1_1 < 5`").

With verify=False the kernel is correct (also for seeds 5008 and 5040): Tiling tiles both halves
of the split, and the contract check expects each tile loop's own tail predicate, where the block
carries the user's predicate over the recombined index (or a predicate of its own). A valid program is refused under the default verify=True.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def split_loop_tail_predicate(A: T.Buffer((31,), "float32"), B: T.Buffer((31,), "float32")):
    for io, ii in T.grid(16, 2):
        with T.sblock("B"):
            v = T.axis.spatial(31, io * 2 + ii)
            T.where(io * 2 + ii < 31)
            B[v] = A[v] * T.float32(2)
