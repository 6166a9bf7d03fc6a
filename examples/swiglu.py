"""SwiGLU as users write it: silu(X·Wgᵀ) * (X·Wuᵀ), two contraction blocks and an elementwise
block. LoopFusion moves both projections under the output's loops, ShareContractionLoops gives
them one K loop, and the kernel is two tl.dots over the same K tiles, X loaded once per step."""

from tvm.script import tirx as T


def make_swiglu(M: int, N: int, K: int, dtype: str = "float16", gate_first: bool = True):
    """`gate_first=False` writes the up projection's nest first (the same computation)."""

    @T.prim_func(s_tir=True)
    def gate_up(X: T.Buffer((M, K), dtype), Wg: T.Buffer((N, K), dtype), Wu: T.Buffer((N, K), dtype),
                Y: T.Buffer((M, N), dtype)):
        G = T.sblock_alloc_buffer((M, N), "float32")
        U = T.sblock_alloc_buffer((M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.sblock("G"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    G[vi, vj] = T.float32(0)
                G[vi, vj] = G[vi, vj] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", Wg[vj, vk])
        for i, j, k in T.grid(M, N, K):
            with T.sblock("U"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    U[vi, vj] = T.float32(0)
                U[vi, vj] = U[vi, vj] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", Wu[vj, vk])
        for i, j in T.grid(M, N):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, G[vi, vj] / (T.float32(1) + T.exp(-G[vi, vj])) * U[vi, vj])

    @T.prim_func(s_tir=True)
    def up_gate(X: T.Buffer((M, K), dtype), Wg: T.Buffer((N, K), dtype), Wu: T.Buffer((N, K), dtype),
                Y: T.Buffer((M, N), dtype)):
        G = T.sblock_alloc_buffer((M, N), "float32")
        U = T.sblock_alloc_buffer((M, N), "float32")
        for a, b, c in T.grid(M, N, K):
            with T.sblock("U"):
                vi, vj, vk = T.axis.remap("SSR", [a, b, c])
                with T.init():
                    U[vi, vj] = T.float32(0)
                U[vi, vj] = U[vi, vj] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", Wu[vj, vk])
        for a, b, c in T.grid(M, N, K):
            with T.sblock("G"):
                vi, vj, vk = T.axis.remap("SSR", [a, b, c])
                with T.init():
                    G[vi, vj] = T.float32(0)
                G[vi, vj] = G[vi, vj] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", Wg[vj, vk])
        for a, b in T.grid(M, N):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [a, b])
                Y[vi, vj] = T.Cast(dtype, G[vi, vj] / (T.float32(1) + T.exp(-G[vi, vj])) * U[vi, vj])

    return gate_up if gate_first else up_gate


swiglu = make_swiglu(37, 45, 53)

if __name__ == "__main__":
    from _check import main

    main(swiglu)
