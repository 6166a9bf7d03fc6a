"""A `T.where` that cuts a reduction loop short is lost when LoopFusion fuses the reduction
with its consumer: with verify=False a silent wrong result, with verify=True its numerics check.

Found by the fuzzer, once the generator wrote partial predicates: seed 4113843585 (a matmul
summing over k < 4 only, with a bias-silu epilogue; verify=False: every element differs) and
seed 4113843646 (a layernorm whose variance sums over i1 < 2 only; verify=True):

    VerificationError: verification 'numerics' failed after pass LoopFusion:
    random data: Out0: 113 of 117 elements differ ...

Without the consumer (the reduction alone) the kernel is right, and with verification on only
the contract check objects (split_loop_tail_predicate.py). The generator writes partial
predicates on spatial axes only until this is fixed.

Fixed (2026-11-30): LoopFusion no longer moves a producer whose block has a predicate (compute_at
would drop it); the decision says so. This file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def reduction_predicate_fusion(A: T.Buffer((9, 13), "float32"), B: T.Buffer((9, 13), "float32")):
    T0 = T.sblock_alloc_buffer((9,), "float32")
    for i, j in T.grid(9, 13):
        with T.sblock("partial_sum"):
            vi, vj = T.axis.remap("SR", [i, j])
            T.where(j < 2)
            with T.init():
                T0[vi] = T.float32(0)
            T0[vi] = T0[vi] + A[vi, vj]
    for i, j in T.grid(9, 13):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] - T0[vi]
