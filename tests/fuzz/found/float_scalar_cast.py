"""A cast of a float scalar parameter fails in the interpreter.

Found by the fuzzer (seeds 38, 1119). `T.Cast("float16", alpha)` (or to int32) is emitted as
`alpha.to(tl.float16)`; in Triton's interpreter a scalar argument is a Python float, so the
kernel check fails with `InterpreterError: AttributeError("'float' object has no attribute
'to'")`. The sm_90 compile accepts it (there the argument is a tensor), so only the CPU path,
which is what verifies kernels, breaks.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def float_scalar_cast(alpha: T.float32, B: T.Buffer((5,), "float16")):
    for i in range(5):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = T.Cast("float16", alpha)
