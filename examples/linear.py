"""Linear layer: Y = X · Wᵀ with W stored as `torch.nn.Linear` keeps it (out_features × in_features),
fp16 inputs and output, fp32 accumulation. At M = 16 rows it is a decode step: memory-bound on W."""

from tvm.script import tirx as T


def make_linear(M: int, N: int, K: int, dtype: str = "float16"):
    @T.prim_func(s_tir=True)
    def linear(X: T.Buffer((M, K), dtype), W: T.Buffer((N, K), dtype), Y: T.Buffer((M, N), dtype)):
        acc = T.alloc_buffer((M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.sblock("acc"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    acc[vi, vj] = T.float32(0)
                acc[vi, vj] = acc[vi, vj] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", W[vj, vk])
        for i, j in T.grid(M, N):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, acc[vi, vj])

    return linear


linear_fp16 = make_linear(37, 45, 33)

if __name__ == "__main__":
    from _check import main

    main(linear_fp16)
