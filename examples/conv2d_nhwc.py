"""conv2d in NHWC layout, 3x3 window, stride 1, zero padding 1, fp16 in / fp32 out."""

from tvm.script import tirx as T


def make_conv2d_nhwc(N: int, H: int, W: int, C: int, F: int, dtype: str = "float16"):
    @T.prim_func(s_tir=True)
    def conv2d_nhwc(X: T.Buffer((N, H, W, C), dtype), Wt: T.Buffer((3, 3, C, F), dtype),
                    Y: T.Buffer((N, H, W, F), "float32")):
        for n, h, w, f, rh, rw, rc in T.grid(N, H, W, F, 3, 3, C):
            with T.sblock("conv"):
                vn, vh, vw, vf, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, f, rh, rw, rc])
                with T.init():
                    Y[vn, vh, vw, vf] = T.float32(0)
                Y[vn, vh, vw, vf] = Y[vn, vh, vw, vf] + T.Cast("float32", T.if_then_else(
                    1 <= vh + vrh and vh + vrh < H + 1 and 1 <= vw + vrw and vw + vrw < W + 1,
                    X[vn, vh + vrh - 1, vw + vrw - 1, vrc], T.Cast(dtype, 0))) * T.Cast("float32", Wt[vrh, vrw, vrc, vf])

    return conv2d_nhwc


conv2d_nhwc = make_conv2d_nhwc(2, 9, 11, 19, 24)

if __name__ == "__main__":
    from _check import main

    main(conv2d_nhwc)
