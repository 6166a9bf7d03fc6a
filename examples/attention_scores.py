"""softmax(Q @ K^T * scale) row by row: the attention-score part of attention."""

from tvm.script import tirx as T


def make_attention_scores(M: int, N: int, D: int, dtype: str = "float16"):
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def attention_scores(Q: T.Buffer((M, D), dtype), K: T.Buffer((N, D), dtype), P: T.Buffer((M, N), "float32")):
        S = T.sblock_alloc_buffer((M, N), "float32")
        row_max = T.sblock_alloc_buffer((M,), "float32")
        E = T.sblock_alloc_buffer((M, N), "float32")
        row_sum = T.sblock_alloc_buffer((M,), "float32")
        for i, j, d in T.grid(M, N, D):
            with T.sblock("scores"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    S[vi, vj] = T.float32(0)
                S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
        for i, j in T.grid(M, N):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.min_value("float32")
                row_max[vi] = T.max(row_max[vi], S[vi, vj])
        for i, j in T.grid(M, N):
            with T.sblock("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                E[vi, vj] = T.exp((S[vi, vj] - row_max[vi]) * T.float32(scale))
        for i, j in T.grid(M, N):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + E[vi, vj]
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                P[vi, vj] = E[vi, vj] / row_sum[vi]

    return attention_scores


attention_scores = make_attention_scores(37, 45, 32)

if __name__ == "__main__":
    from _check import main

    main(attention_scores)
