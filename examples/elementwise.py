"""An elementwise chain with broadcasts: Y = max(X * scale[j] + shift[i], 0) * X."""

from tvm.script import tirx as T


def make_scale_shift_relu(M: int, N: int, dtype: str = "float32"):
    @T.prim_func(s_tir=True)
    def scale_shift_relu(X: T.Buffer((M, N), dtype), scale: T.Buffer((N,), dtype),
                         shift: T.Buffer((M,), dtype), Y: T.Buffer((M, N), dtype)):
        Z = T.sblock_alloc_buffer((M, N), dtype)
        for i, j in T.grid(M, N):
            with T.sblock("affine"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = X[vi, vj] * scale[vj] + shift[vi]
        for i, j in T.grid(M, N):
            with T.sblock("relu_gate"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(Z[vi, vj], T.Cast(dtype, 0)) * X[vi, vj]

    return scale_shift_relu


scale_shift_relu = make_scale_shift_relu(67, 45)

if __name__ == "__main__":
    from _check import main

    main(scale_shift_relu)
