"""A transformer MLP's tail: Y = gelu(X + bias) + residual, elementwise over rows (fp16 in and out)."""

from tvm.script import tirx as T


def make_bias_gelu_residual(M: int, N: int, dtype: str = "float16"):
    @T.prim_func(s_tir=True)
    def bias_gelu_residual(X: T.Buffer((M, N), dtype), bias: T.Buffer((N,), dtype), R: T.Buffer((M, N), dtype),
                           Y: T.Buffer((M, N), dtype)):
        H = T.sblock_alloc_buffer((M, N), "float32")
        for i, j in T.grid(M, N):
            with T.sblock("biased"):
                vi, vj = T.axis.remap("SS", [i, j])
                H[vi, vj] = T.Cast("float32", X[vi, vj]) + T.Cast("float32", bias[vj])
        for i, j in T.grid(M, N):
            with T.sblock("gelu_residual"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, H[vi, vj] * T.float32(0.5) * (T.float32(1) + T.erf(H[vi, vj] * T.float32(0.7071067811865476)))
                                   + T.Cast("float32", R[vi, vj]))

    return bias_gelu_residual


bias_gelu_residual = make_bias_gelu_residual(67, 45)

if __name__ == "__main__":
    from _check import main

    main(bias_gelu_residual)
