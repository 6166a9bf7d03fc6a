"""A scan whose elements do not vary along the scan axis stops the lowering with a ContractError.

Found by the fuzzer (seed 7143, scale 2, the 2026-12-02 campaign). `Out[i, j] = max(Out[i, j - 1],
sigmoid(3))` with `Out[i, 0] = sigmoid(3)` is a max-scan of a constant: Tiling rightly marks it a
scan along j, but the scan's element expression is a scalar, so the lowering's scan rule had no
tile axis to scan along and raised "the scan's elements do not vary along i1" (an internal error).
The elements are now laid along the scan axis first (`reductions.laid_along`), as a reduction does
with a term that does not vary along its reduction tile.

Fixed (2026-12-02): this file is a regression test.
"""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def scan_of_constants(Out0: T.Buffer((51, 128), "float32")):
    for i0, i1 in T.grid(51, 128):
        with T.sblock("scan"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            Out0[v0, v1] = T.if_then_else(
                v1 == 0, T.sigmoid(T.float32(3.0)), T.max(Out0[v0, v1 - 1], T.sigmoid(T.float32(3.0)))
            )
