"""Matmul with a bias + GELU epilogue, written in TE: D = gelu(A @ B + bias)."""

from tvm import te, tirx


def make_matmul_bias_gelu(M: int, N: int, K: int, dtype: str = "float16"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    bias = te.placeholder((N,), "float32", name="bias")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")

    def gelu(x):
        return x * tirx.const(0.5, "float32") * (tirx.const(1.0, "float32") + tirx.erf(x * tirx.const(0.7071067811865476, "float32")))

    D = te.compute((M, N), lambda i, j: gelu(C[i, j] + bias[j]).astype(dtype), name="D")
    return te.create_prim_func([A, B, bias, D]).with_attr("global_symbol", "matmul_bias_gelu")


matmul_bias_gelu = make_matmul_bias_gelu(67, 45, 33)

if __name__ == "__main__":
    from _check import main

    main(matmul_bias_gelu)
