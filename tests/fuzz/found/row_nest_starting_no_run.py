"""RowPartials looped forever on a row nest that starts no run of row nests.

Found by the CI run of 2026-12-02 (tests/fuzz/test_determinism_fuzz.py, seed 3): a suffix scan over
one loop. Its nest has row bindings but does not join a run (`_joins_run` is false), so the run
stayed empty and the scan over the statements never moved past it: the compile hung. A nest that
starts no run is now skipped.

Fixed (2026-12-02): this file is a regression test.
"""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def row_nest_starting_no_run(A0: T.Buffer((4,), "float32"), Out0: T.Buffer((15,), "float32")):
    for i0 in T.grid(15):
        with T.sblock("scan"):
            v0 = T.axis.remap("S", [i0])
            Out0[v0] = T.if_then_else(v0 + 1 < 15, Out0[v0 + 1] * (T.float32(1) + T.tanh(A0[v0 // 4]) * T.float32(0.25)),
                                      (T.float32(1) + T.tanh(A0[v0 // 4]) * T.float32(0.25)))
