"""Causal attention as TVMScript users write it: scores of later keys are masked to -inf before
the softmax, O = softmax(mask(Q·Kᵀ · scale)) · V, per batch and head.

Stages: scores (a contraction over d), the masked and scaled scores, the row max, the
exponentials and their row sum, the weighted sum of V (a contraction over the keys), and its
normalization by the row sum. Every row keeps its diagonal, so its maximum is finite.
`weights_dtype` is the type the weights are rounded to before they multiply V: the input type by
default (16-bit products on tensor cores, as flash attention and PyTorch's SDPA compute them), or
"float32" to keep them exact (an fp32 contraction: several times slower)."""

from tvm.script import tirx as T


def make_causal_attention(B: int, H: int, S: int, D: int, dtype: str = "float16", weights_dtype: str | None = None):
    scale = 1.0 / D**0.5
    weights_dtype = weights_dtype or dtype

    @T.prim_func(s_tir=True)
    def causal_attention(Q: T.Buffer((B, H, S, D), dtype), K: T.Buffer((B, H, S, D), dtype),
                         V: T.Buffer((B, H, S, D), dtype), O: T.Buffer((B, H, S, D), dtype)):
        scores = T.sblock_alloc_buffer((B, H, S, S), "float32")
        masked = T.sblock_alloc_buffer((B, H, S, S), "float32")
        row_max = T.sblock_alloc_buffer((B, H, S), "float32")
        weights = T.sblock_alloc_buffer((B, H, S, S), "float32")
        row_sum = T.sblock_alloc_buffer((B, H, S), "float32")
        acc = T.sblock_alloc_buffer((B, H, S, D), "float32")
        for b, h, i, j, d in T.grid(B, H, S, S, D):
            with T.sblock("scores"):
                vb, vh, vi, vj, vd = T.axis.remap("SSSSR", [b, h, i, j, d])
                with T.init():
                    scores[vb, vh, vi, vj] = T.float32(0)
                scores[vb, vh, vi, vj] = scores[vb, vh, vi, vj] + T.Cast("float32", Q[vb, vh, vi, vd]) * T.Cast("float32", K[vb, vh, vj, vd])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("masked"):
                vb, vh, vi, vj = T.axis.remap("SSSS", [b, h, i, j])
                masked[vb, vh, vi, vj] = T.if_then_else(vj <= vi, scores[vb, vh, vi, vj] * T.float32(scale),
                                                        T.float32(float("-inf")))
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_max"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_max[vb, vh, vi] = T.float32(float("-inf"))
                row_max[vb, vh, vi] = T.max(row_max[vb, vh, vi], masked[vb, vh, vi, vj])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("weights"):
                vb, vh, vi, vj = T.axis.remap("SSSS", [b, h, i, j])
                weights[vb, vh, vi, vj] = T.exp(masked[vb, vh, vi, vj] - row_max[vb, vh, vi])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_sum"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_sum[vb, vh, vi] = T.float32(0)
                row_sum[vb, vh, vi] = row_sum[vb, vh, vi] + weights[vb, vh, vi, vj]
        for b, h, i, d, j in T.grid(B, H, S, D, S):
            with T.sblock("weighted_sum"):
                vb, vh, vi, vd, vj = T.axis.remap("SSSSR", [b, h, i, d, j])
                with T.init():
                    acc[vb, vh, vi, vd] = T.float32(0)
                acc[vb, vh, vi, vd] = acc[vb, vh, vi, vd] + T.Cast("float32", T.Cast(weights_dtype, weights[vb, vh, vi, vj])) * T.Cast("float32", V[vb, vh, vj, vd])
        for b, h, i, d in T.grid(B, H, S, D):
            with T.sblock("normalize"):
                vb, vh, vi, vd = T.axis.remap("SSSS", [b, h, i, d])
                O[vb, vh, vi, vd] = T.Cast(dtype, acc[vb, vh, vi, vd] / row_sum[vb, vh, vi])

    return causal_attention


causal_attention = make_causal_attention(1, 2, 37, 16)

if __name__ == "__main__":
    from _check import main

    main(causal_attention)
