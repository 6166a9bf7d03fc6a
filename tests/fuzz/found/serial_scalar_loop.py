"""A kernel that is one serial loop over scalars fails in the interpreter.

Found by the fuzzer (seed 27). `Y[v] = T.if_then_else(v + 1 < 9, Y[v + 1] + X[v], X[v])` reads
the element after the one it writes (the output's input contents: an anti-dependence), so
Tiling rightly keeps the loop serial, with no tile axes. The kernel is

    for i in range(0, 9):
        Y_tile = tl.load(Y_ptr + ((i + 1) * Y_stride0), mask=((i + 1) < 9), other=0.0)

In the interpreter `i` is a Python int, so the mask is a Python bool: `InterpreterError:
ValueError('mask has unsupported dtype')`. With a symbolic length the same kernel fails one
step earlier, on `(i + 1).to(tl.int64)` ("'int' object has no attribute 'to'", seeds 1010,
1143), and so does any use of the loop variable as a value (`i0.to(tl.float32)`, seed 20080).
The sm_90 compile accepts all of them. (known.py matches found files in name order, so a
constant mask is constant_condition_mask.py's.)

Fixed (2026-11-30): this file is a regression test now.
"""
from tvm.script import tirx as T



@T.prim_func(s_tir=True)
def serial_scalar_loop(X: T.Buffer((9,), "float32"), Y: T.Buffer((9,), "float32")):
    for i in range(9):
        with T.sblock("Y"):
            v = T.axis.remap("S", [i])
            Y[v] = T.if_then_else(v + 1 < 9, Y[v + 1] + X[v], X[v])
