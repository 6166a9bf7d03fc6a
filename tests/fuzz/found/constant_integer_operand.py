"""A constant integer subexpression is emitted as a Python int or bool with `.to`.

Found by the fuzzer (seed 4113843651; on the H200, seed 36 of the scale-2 GPU campaign, as a
CompilationError). `v2 // -4` with v2 of extent 1 becomes

    t = tl.where(mask, I0_tile.to(tl.int32), (0 // -4 - ((0 % -4 != 0) & ((0 < 0) != (-4 < 0))).to(tl.int32)))

and the kernel fails with `InterpreterError: AttributeError("'bool' object has no attribute
'to'")` (`'int' object` for `(0 // 4).to(tl.int64)` in an index). The issue's "constant
subexpressions are emitted as Python values" class, for integers.

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def constant_integer_operand(A: T.Buffer((7, 1), "float32"), B: T.Buffer((7, 1), "float32")):
    for i, j in T.grid(7, 1):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.Select(A[vi, vj] > T.float32(0), A[vi, vj], T.Cast("float32", vj // -4))
