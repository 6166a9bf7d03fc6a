"""Batch matmul: C[b] = A[b] @ B[b], fp16 in, fp32 out."""

from tvm.script import tirx as T


def make_batch_matmul(batch: int, M: int, N: int, K: int, dtype: str = "float16"):
    @T.prim_func(s_tir=True)
    def batch_matmul(A: T.Buffer((batch, M, K), dtype), B: T.Buffer((batch, K, N), dtype),
                     C: T.Buffer((batch, M, N), "float32")):
        for b, i, j, k in T.grid(batch, M, N, K):
            with T.sblock("C"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.float32(0)
                C[vb, vi, vj] = C[vb, vi, vj] + T.Cast("float32", A[vb, vi, vk]) * T.Cast("float32", B[vb, vk, vj])

    return batch_matmul


batch_matmul = make_batch_matmul(3, 37, 29, 21)

if __name__ == "__main__":
    from _check import main

    main(batch_matmul)
