"""LayerNorm with both moments in one reduction block (sum and sum of squares), as many model
codebases write it: mean = s / N, var = sq / N - mean^2. One kernel after LoopFusion."""

from tvm.script import tirx as T


def make_layernorm_moments(M: int, N: int, dtype: str = "float32", eps: float = 1e-5):
    @T.prim_func(s_tir=True)
    def layernorm_moments(X: T.Buffer((M, N), dtype), gamma: T.Buffer((N,), dtype), beta: T.Buffer((N,), dtype),
                          Y: T.Buffer((M, N), dtype)):
        s = T.sblock_alloc_buffer((M,), "float32")
        sq = T.sblock_alloc_buffer((M,), "float32")
        for i, k in T.grid(M, N):
            with T.sblock("moments"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    s[vi] = T.float32(0)
                    sq[vi] = T.float32(0)
                s[vi] = s[vi] + T.Cast("float32", X[vi, vk])
                sq[vi] = sq[vi] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", X[vi, vk])
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - s[vi] * T.float32(1.0 / N))
                                   * T.rsqrt(sq[vi] * T.float32(1.0 / N) - s[vi] * s[vi] * T.float32(1.0 / (N * N))
                                             + T.float32(eps))
                                   * T.Cast("float32", gamma[vj]) + T.Cast("float32", beta[vj]))

    return layernorm_moments


layernorm_moments = make_layernorm_moments(67, 45)

if __name__ == "__main__":
    from _check import main

    main(layernorm_moments)
