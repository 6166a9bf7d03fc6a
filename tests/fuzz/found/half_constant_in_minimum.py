"""A float16 constant in tl.minimum / tl.maximum / tl.where made the op float32 on the GPU.

Found by the GPU fuzz campaign of 2026-12-02 (seed 8627, scale 2): `Cast(f32, min(A, f16(0)) *
|A|)` with A float16. The kernel wrote `tl.minimum(A_tile, 0.0)`: Triton 3.6 turns the Python float
into a float32 tensor there, so the minimum, and the product after it, ran in float32 and the
product was not rounded to float16 as TVM rounds it (-1.2678232 against -1.2675781 on the H200;
the interpreter of Triton 3.9 kept float16). A 16-bit float scalar is now written with its dtype
(`tl.full([], 0.0, tl.float16)`). The interpreter never showed it, so this file checks the text.

Fixed (2026-12-02).
"""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def half_constant_in_minimum(A0: T.Buffer((3, 5), "float16"), Out0: T.Buffer((3, 5), "float32")):
    for i0, i1 in T.grid(3, 5):
        with T.sblock("compute"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            Out0[v0, v1] = T.Cast("float32", (T.min(A0[v0, v1], T.Cast("float16", v0 * 0)) * T.fabs(A0[v0, v1])))
