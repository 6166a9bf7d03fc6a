"""Matmul: fp16 inputs with fp32 accumulation, and plain fp32."""

from tvm.script import tirx as T


def make_matmul(M: int, N: int, K: int, in_dtype: str = "float16", out_dtype: str = "float32"):
    @T.prim_func(s_tir=True)
    def matmul(A: T.Buffer((M, K), in_dtype), B: T.Buffer((K, N), in_dtype), C: T.Buffer((M, N), out_dtype)):
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.Cast(out_dtype, 0)
                C[vi, vj] = C[vi, vj] + T.Cast(out_dtype, A[vi, vk]) * T.Cast(out_dtype, B[vk, vj])

    return matmul


matmul_fp16 = make_matmul(67, 45, 33, "float16", "float32")
matmul_fp32 = make_matmul(67, 45, 33, "float32", "float32")

if __name__ == "__main__":
    import sys

    from _check import main

    main(matmul_fp32 if "fp32" in sys.argv else matmul_fp16)
