"""Max pooling, NCHW, 3x3 window with stride 2 and no padding."""

from tvm.script import tirx as T


def make_max_pool2d(N: int, C: int, H: int, W: int, dtype: str = "float32"):
    OH, OW = (H - 3) // 2 + 1, (W - 3) // 2 + 1

    @T.prim_func(s_tir=True)
    def max_pool2d(X: T.Buffer((N, C, H, W), dtype), Y: T.Buffer((N, C, OH, OW), dtype)):
        for n, c, oh, ow, rh, rw in T.grid(N, C, OH, OW, 3, 3):
            with T.sblock("pool"):
                vn, vc, voh, vow, vrh, vrw = T.axis.remap("SSSSRR", [n, c, oh, ow, rh, rw])
                with T.init():
                    Y[vn, vc, voh, vow] = T.min_value(dtype)
                Y[vn, vc, voh, vow] = T.max(Y[vn, vc, voh, vow], X[vn, vc, voh * 2 + vrh, vow * 2 + vrw])

    return max_pool2d


max_pool2d = make_max_pool2d(2, 5, 17, 13)

if __name__ == "__main__":
    from _check import main

    main(max_pool2d)
