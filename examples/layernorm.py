"""LayerNorm over the last axis: mean, variance, then (x - mean) * rsqrt(var + eps) * gamma + beta."""

from tvm.script import tirx as T


def make_layernorm(M: int, N: int, dtype: str = "float32", eps: float = 1e-5):
    @T.prim_func(s_tir=True)
    def layernorm(X: T.Buffer((M, N), dtype), gamma: T.Buffer((N,), dtype), beta: T.Buffer((N,), dtype),
                  Y: T.Buffer((M, N), dtype)):
        mean = T.sblock_alloc_buffer((M,), "float32")
        var = T.sblock_alloc_buffer((M,), "float32")
        for i, k in T.grid(M, N):
            with T.sblock("mean"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    mean[vi] = T.float32(0)
                mean[vi] = mean[vi] + T.Cast("float32", X[vi, vk]) * T.float32(1.0 / N)
        for i, k in T.grid(M, N):
            with T.sblock("var"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    var[vi] = T.float32(0)
                var[vi] = var[vi] + (T.Cast("float32", X[vi, vk]) - mean[vi]) * (T.Cast("float32", X[vi, vk]) - mean[vi]) * T.float32(1.0 / N)
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - mean[vi]) * T.rsqrt(var[vi] + T.float32(eps))
                                   * T.Cast("float32", gamma[vj]) + T.Cast("float32", beta[vj]))

    return layernorm


layernorm = make_layernorm(67, 45)

if __name__ == "__main__":
    from _check import main

    main(layernorm)
