"""RMSNorm with a symbolic number of rows: Y = X * rsqrt(mean(X^2) + eps) * weight."""

from tvm.script import tirx as T


def make_rmsnorm(N: int, dtype: str = "float32", eps: float = 1e-6):
    @T.prim_func(s_tir=True)
    def rmsnorm(x: T.handle, weight: T.Buffer((N,), dtype), y: T.handle):
        rows = T.int32()
        X = T.match_buffer(x, (rows, N), dtype)
        Y = T.match_buffer(y, (rows, N), dtype)
        sum_sq = T.sblock_alloc_buffer((rows,), "float32")
        for i, k in T.grid(rows, N):
            with T.sblock("sum_sq"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    sum_sq[vi] = T.float32(0)
                sum_sq[vi] = sum_sq[vi] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", X[vi, vk])
        for i, j in T.grid(rows, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, T.Cast("float32", X[vi, vj]) * T.rsqrt(sum_sq[vi] * T.float32(1.0 / N) + T.float32(eps))
                                   * T.Cast("float32", weight[vj]))

    return rmsnorm


rmsnorm = make_rmsnorm(45)

if __name__ == "__main__":
    from _check import main

    main(rmsnorm)
