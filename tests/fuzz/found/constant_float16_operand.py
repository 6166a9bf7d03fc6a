"""A constant float16 subexpression is emitted as a Python float with `.to`.

Found by the fuzzer (seed 1060). The reduction operand `T.float16(-1.5) - T.float16(1.0)` becomes

    t = tl.where(mask_j, (-1.5 - 1.0).to(tl.float32), float("-inf"))

and the kernel fails with `InterpreterError: AttributeError("'float' object has no attribute
'to'")` (the same expression in float32 compiles: no rounding step is emitted for it). The
issue's "constant subexpressions are emitted as Python values" class.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def constant_float16_operand(B: T.Buffer((15,), "float16")):
    for i, j in T.grid(15, 3):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SR", [i, j])  # noqa: RUF059 - the operand is constant along vj
            with T.init():
                B[vi] = T.float16(-0.75)
            B[vi] = T.max(B[vi], T.float16(-1.5) - T.float16(1.0))
