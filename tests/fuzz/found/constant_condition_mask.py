"""A guarded load whose guard folds to a constant crashes the kernel in the interpreter, and
Triton refuses it for sm_90.

Found by the fuzzer (seeds 15, 1039: `T.if_then_else(not (v == 0), A[v - 1], 0)` with v of
extent 1). The load is emitted as

    A_tile = tl.load(A_ptr + (-1 * A_stride0), mask=(~(0 == 0)), other=0.0)

a Python int mask (-2): the interpreter raises `InterpreterError: ValueError('mask has
unsupported dtype')`, and the ahead-of-time compile fails MLIR's verifier ("'tt.load' op operand
#1 must be 1-bit signless integer ..., but got 'i32'"), which also knocks the compile worker
out of step (aot_worker_stdout in test_found.py). The same root cause as
constant_condition_wrong_branch.py.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def constant_condition_mask(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(1):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = T.if_then_else(not (v == 0), A[v - 1], T.float32(0))  # noqa: SIM201 - the form the fuzzer wrote
