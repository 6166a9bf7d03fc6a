"""Attention as users write it in other ways than examples/attention.py: the same O = softmax(Q·Kᵀ ·
scale [+ causal mask]) · V, per batch and head, that must compile to the same flash kernel
(docs/canonical-forms.md; tests/plan_invariance checks that it does).

- `make_attention_inline_mask`: no masked-scores block; every stage (max, sum, P·V) writes the
  causal mask inline, `T.Select(vj > vi, masked, s * scale)`, with -inf or a large negative
  constant as the masked value.
- `make_attention_normalize_first`: the weights are normalized before the contraction,
  `P = exp(s - m) / l`, then `O = Σ_j P · V`; the scale sits inside the Q·Kᵀ block.
"""

from tvm.script import tirx as T


def make_attention_inline_mask(B: int, H: int, S: int, D: int, dtype: str = "float16", masked: float = float("-inf")):
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def attention_inline_mask(Q: T.Buffer((B, H, S, D), dtype), K: T.Buffer((B, H, S, D), dtype),
                              V: T.Buffer((B, H, S, D), dtype), O: T.Buffer((B, H, S, D), dtype)):
        scores = T.sblock_alloc_buffer((B, H, S, S), "float32")
        row_max = T.sblock_alloc_buffer((B, H, S), "float32")
        row_sum = T.sblock_alloc_buffer((B, H, S), "float32")
        acc = T.sblock_alloc_buffer((B, H, S, D), "float32")
        for b, h, i, j, d in T.grid(B, H, S, S, D):
            with T.sblock("scores"):
                vb, vh, vi, vj, vd = T.axis.remap("SSSSR", [b, h, i, j, d])
                with T.init():
                    scores[vb, vh, vi, vj] = T.float32(0)
                scores[vb, vh, vi, vj] = scores[vb, vh, vi, vj] + T.Cast("float32", Q[vb, vh, vi, vd]) \
                    * T.Cast("float32", K[vb, vh, vj, vd])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_max"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_max[vb, vh, vi] = T.float32(float("-inf"))
                row_max[vb, vh, vi] = T.max(row_max[vb, vh, vi], T.Select(
                    vj > vi, T.float32(masked), scores[vb, vh, vi, vj] * T.float32(scale)))
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_sum"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_sum[vb, vh, vi] = T.float32(0)
                row_sum[vb, vh, vi] = row_sum[vb, vh, vi] + T.exp(T.Select(
                    vj > vi, T.float32(masked), scores[vb, vh, vi, vj] * T.float32(scale)) - row_max[vb, vh, vi])
        for b, h, i, d, j in T.grid(B, H, S, D, S):
            with T.sblock("weighted_sum"):
                vb, vh, vi, vd, vj = T.axis.remap("SSSSR", [b, h, i, d, j])
                with T.init():
                    acc[vb, vh, vi, vd] = T.float32(0)
                acc[vb, vh, vi, vd] = acc[vb, vh, vi, vd] + T.Cast("float32", T.Cast(dtype, T.exp(T.Select(
                    vj > vi, T.float32(masked), scores[vb, vh, vi, vj] * T.float32(scale)) - row_max[vb, vh, vi]))) \
                    * T.Cast("float32", V[vb, vh, vj, vd])
        for b, h, i, d in T.grid(B, H, S, D):
            with T.sblock("normalize"):
                vb, vh, vi, vd = T.axis.remap("SSSS", [b, h, i, d])
                O[vb, vh, vi, vd] = T.Cast(dtype, acc[vb, vh, vi, vd] / row_sum[vb, vh, vi])

    return attention_inline_mask


def make_attention_normalize_first(B: int, H: int, S: int, D: int, dtype: str = "float16"):
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def attention_normalize_first(Q: T.Buffer((B, H, S, D), dtype), K: T.Buffer((B, H, S, D), dtype),
                                  V: T.Buffer((B, H, S, D), dtype), O: T.Buffer((B, H, S, D), dtype)):
        scores = T.sblock_alloc_buffer((B, H, S, S), "float32")
        row_max = T.sblock_alloc_buffer((B, H, S), "float32")
        row_sum = T.sblock_alloc_buffer((B, H, S), "float32")
        probs = T.sblock_alloc_buffer((B, H, S, S), "float32")
        acc = T.sblock_alloc_buffer((B, H, S, D), "float32")
        for b, h, i, j, d in T.grid(B, H, S, S, D):
            with T.sblock("scores"):
                vb, vh, vi, vj, vd = T.axis.remap("SSSSR", [b, h, i, j, d])
                with T.init():
                    scores[vb, vh, vi, vj] = T.float32(0)
                scores[vb, vh, vi, vj] = scores[vb, vh, vi, vj] + T.Cast("float32", Q[vb, vh, vi, vd]) \
                    * T.Cast("float32", K[vb, vh, vj, vd]) * T.float32(scale)
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_max"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_max[vb, vh, vi] = T.float32(float("-inf"))
                row_max[vb, vh, vi] = T.max(row_max[vb, vh, vi], scores[vb, vh, vi, vj])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("row_sum"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_sum[vb, vh, vi] = T.float32(0)
                row_sum[vb, vh, vi] = row_sum[vb, vh, vi] + T.exp(scores[vb, vh, vi, vj] - row_max[vb, vh, vi])
        for b, h, i, j in T.grid(B, H, S, S):
            with T.sblock("probs"):
                vb, vh, vi, vj = T.axis.remap("SSSS", [b, h, i, j])
                probs[vb, vh, vi, vj] = T.exp(scores[vb, vh, vi, vj] - row_max[vb, vh, vi]) / row_sum[vb, vh, vi]
        for b, h, i, d, j in T.grid(B, H, S, D, S):
            with T.sblock("weighted_sum"):
                vb, vh, vi, vd, vj = T.axis.remap("SSSSR", [b, h, i, d, j])
                with T.init():
                    acc[vb, vh, vi, vd] = T.float32(0)
                acc[vb, vh, vi, vd] = acc[vb, vh, vi, vd] + T.Cast("float32", T.Cast(dtype, probs[vb, vh, vi, vj])) \
                    * T.Cast("float32", V[vb, vh, vj, vd])
        for b, h, i, d in T.grid(B, H, S, D):
            with T.sblock("output"):
                vb, vh, vi, vd = T.axis.remap("SSSS", [b, h, i, d])
                O[vb, vh, vi, vd] = T.Cast(dtype, acc[vb, vh, vi, vd])

    return attention_normalize_first


attention_inline_mask = make_attention_inline_mask(1, 2, 37, 16)
attention_normalize_first = make_attention_normalize_first(1, 2, 37, 16)

if __name__ == "__main__":
    from _check import main

    main(attention_inline_mask)
    main(attention_normalize_first)
