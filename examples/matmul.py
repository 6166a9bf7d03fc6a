"""Matmul: fp16 inputs with fp32 accumulation (into a float32 C, or rounded to a float16 C as cuBLAS does),
and plain fp32."""

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


def make_matmul_rounded(M: int, N: int, K: int, dtype: str = "float16"):
    """C = A · B in `dtype`, accumulated in float32 and rounded once at the end: the product torch.matmul
    (cuBLAS) computes for float16 operands, up to the order of its sums (cuBLAS may also reduce in
    reduced precision, torch's default), where make_matmul's C keeps the float32 sums."""
    @T.prim_func(s_tir=True)
    def matmul_rounded(A: T.Buffer((M, K), dtype), B: T.Buffer((K, N), dtype), C: T.Buffer((M, N), dtype)):
        acc = T.alloc_buffer((M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.sblock("acc"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    acc[vi, vj] = T.float32(0)
                acc[vi, vj] = acc[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])
        for i, j in T.grid(M, N):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.Cast(dtype, acc[vi, vj])

    return matmul_rounded


matmul_fp16 = make_matmul(67, 45, 33, "float16", "float32")
matmul_fp32 = make_matmul(67, 45, 33, "float32", "float32")

if __name__ == "__main__":
    import sys

    from _check import main

    main(matmul_fp32 if "fp32" in sys.argv else matmul_fp16)
