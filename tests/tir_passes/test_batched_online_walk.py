"""Decode attention: one query a head, each head with its own keys (the contraction's operands both
vary along the heads, a batch axis no tl.dot takes). Tiling walks it as a stream whose products span
the head dimension: one head a program and key tiles within the element budget, where it took the
heads as tl.dot rows (16 heads a program of 128 keys × 128 dimensions: 13 KB of spills a thread and
8 programs at b4 h32). Written two ways (the weights normalized after the weighted sum, or before
it) and with grouped keys (GQA: K and V indexed by the head's group)."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.passes.tile_sizes import ROW_ELEMENTS_PER_PROGRAM, online_sizes
from triton_codegen import compile


def make_decode_attention(B: int, H: int, KH: int, S: int, D: int, normalize_first: bool = False):
    """softmax(q·Kᵀ · scale)·V for one query a (batch, head); K and V have KH heads, head h reads
    group h // (H // KH). `normalize_first`: the weights divided by their sum before they multiply V."""
    group, scale = H // KH, 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def decode(Q: T.Buffer((B, H, 1, D), "float16"), K: T.Buffer((B, KH, S, D), "float16"),
               V: T.Buffer((B, KH, S, D), "float16"), O: T.Buffer((B, H, 1, D), "float16")):
        scores = T.sblock_alloc_buffer((B, H, 1, S), "float32")
        row_max = T.sblock_alloc_buffer((B, H, 1), "float32")
        row_sum = T.sblock_alloc_buffer((B, H, 1), "float32")
        acc = T.sblock_alloc_buffer((B, H, 1, D), "float32")
        for b, h, i, j, d in T.grid(B, H, 1, S, D):
            with T.sblock("scores"):
                vb, vh, vi, vj, vd = T.axis.remap("SSSSR", [b, h, i, j, d])
                with T.init():
                    scores[vb, vh, vi, vj] = T.float32(0)
                scores[vb, vh, vi, vj] = scores[vb, vh, vi, vj] + T.Cast("float32", Q[vb, vh, vi, vd]) * T.Cast(
                    "float32", K[vb, vh // group, vj, vd])
        for b, h, i, j in T.grid(B, H, 1, S):
            with T.sblock("row_max"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_max[vb, vh, vi] = T.float32(float("-inf"))
                row_max[vb, vh, vi] = T.max(row_max[vb, vh, vi], scores[vb, vh, vi, vj] * T.float32(scale))
        for b, h, i, j in T.grid(B, H, 1, S):
            with T.sblock("row_sum"):
                vb, vh, vi, vj = T.axis.remap("SSSR", [b, h, i, j])
                with T.init():
                    row_sum[vb, vh, vi] = T.float32(0)
                row_sum[vb, vh, vi] = row_sum[vb, vh, vi] + T.exp(scores[vb, vh, vi, vj] * T.float32(scale)
                                                                   - row_max[vb, vh, vi])
        for b, h, i, d, j in T.grid(B, H, 1, D, S):
            with T.sblock("weighted_sum"):
                vb, vh, vi, vd, vj = T.axis.remap("SSSSR", [b, h, i, d, j])
                with T.init():
                    acc[vb, vh, vi, vd] = T.float32(0)
                if normalize_first:
                    acc[vb, vh, vi, vd] = acc[vb, vh, vi, vd] + T.Cast("float32", T.Cast("float16", T.exp(
                        scores[vb, vh, vi, vj] * T.float32(scale) - row_max[vb, vh, vi]) / row_sum[vb, vh, vi])) * \
                        T.Cast("float32", V[vb, vh // group, vj, vd])
                else:
                    acc[vb, vh, vi, vd] = acc[vb, vh, vi, vd] + T.Cast("float32", T.Cast("float16", T.exp(
                        scores[vb, vh, vi, vj] * T.float32(scale) - row_max[vb, vh, vi]))) * \
                        T.Cast("float32", V[vb, vh // group, vj, vd])
        for b, h, i, d in T.grid(B, H, 1, D):
            with T.sblock("normalize"):
                vb, vh, vi, vd = T.axis.remap("SSSS", [b, h, i, d])
                if normalize_first:
                    O[vb, vh, vi, vd] = T.Cast("float16", acc[vb, vh, vi, vd])
                else:
                    O[vb, vh, vi, vd] = T.Cast("float16", acc[vb, vh, vi, vd] / row_sum[vb, vh, vi])

    return decode


FORMS = {"weighted_then_normalized": (32, False), "normalized_first": (32, True), "grouped_keys": (8, False)}


def _kernel_config(kernel) -> dict:
    module = kernel.module(True)
    [name] = module.CONFIGS
    return module.CONFIGS[name][module.CHOSEN[name]]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_decode_attention_takes_a_head_a_program_and_key_tiles_within_the_budget(form):
    key_heads, normalize_first = FORMS[form]
    kernel = compile(make_decode_attention(4, 32, key_heads, 4096, 128, normalize_first), verify=False)
    config = _kernel_config(kernel)
    assert len(kernel.program.kernels) == 1 and "tl.dot(" not in kernel.source
    assert not any(name.startswith("BLOCK_H") for name in config), config   # the heads are program ids
    key_tiles = [value for name, value in config.items() if name.startswith("BLOCK_J")]
    assert key_tiles and all(tile * 128 <= ROW_ELEMENTS_PER_PROGRAM for tile in key_tiles), config


@pytest.mark.interpreter
@pytest.mark.parametrize("form", sorted(FORMS))
def test_decode_attention_matches_tvm(form):
    key_heads, normalize_first = FORMS[form]
    compile_and_check(make_decode_attention(2, 8, key_heads // 4, 70, 16, normalize_first), aot=form == "grouped_keys")


def test_a_batched_walk_budgets_rows_by_keys_by_depth_and_a_softmax_keeps_its_wide_rows():
    h200 = gpu_spec("H200")
    rows, columns, _, _ = online_sizes(h200, "float16", 32, 4096, False, h200.limits, depth=128)
    assert (rows, columns) == (1, ROW_ELEMENTS_PER_PROGRAM // 128)
    # a softmax over long rows (no contraction: no depth) streams whole element budgets of a row
    assert online_sizes(h200, "float16", 16384, 65536, False, h200.limits)[:2] == (1, ROW_ELEMENTS_PER_PROGRAM)
