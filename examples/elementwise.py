"""An elementwise chain with broadcasts: Y = max(X * scale[j] + shift[i], 0) * X."""

from tvm.script import tirx as T

M, N = 67, 45


@T.prim_func(s_tir=True)
def scale_shift_relu(X: T.Buffer((M, N), "float32"), scale: T.Buffer((N,), "float32"),
                     shift: T.Buffer((M,), "float32"), Y: T.Buffer((M, N), "float32")):
    Z = T.sblock_alloc_buffer((M, N), "float32")
    for i, j in T.grid(M, N):
        with T.sblock("affine"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = X[vi, vj] * scale[vj] + shift[vi]
    for i, j in T.grid(M, N):
        with T.sblock("relu_gate"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.max(Z[vi, vj], T.float32(0)) * X[vi, vj]


if __name__ == "__main__":
    from _check import main

    main(scale_shift_relu)
