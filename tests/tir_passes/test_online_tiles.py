"""Attention's tiles (tile_sizes.online_sizes): on sm_90, 128 keys with 8 warps and 3 stages where
the query tile and three stages of key and value tiles fit shared memory (measured best on the
H200); 4-byte operands on sm_90 128 × 64 with 8 warps and 2 stages where that fits (measured best on
an H100); elsewhere 128 × 64 with 4 warps and 2 stages (16-bit) or 64 × 32 (4-byte)."""

from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.passes.tile_sizes import online_sizes


def test_sm_90_takes_wide_key_tiles_where_they_fit():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=128) == (128, 128, 8, 3)
    assert online_sizes(h200, "bfloat16", 4096, 4096, True, h200.limits, depth=64) == (128, 128, 8, 3)
    # head dimension 256: three stages of 128-key tiles do not fit 227 KiB
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=256) == (128, 64, 4, 2)
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=None) == (128, 64, 4, 2)


def test_other_gpus_keep_the_narrow_tiles():
    a100 = gpu_spec("A100")
    assert online_sizes(a100, "float16", 4096, 4096, True, a100.limits, depth=128) == (128, 64, 4, 2)
    assert online_sizes(a100, "float32", 4096, 4096, True, a100.limits, depth=128) == (64, 32, 4, 2)


def test_fp32_on_sm_90_takes_128_rows_and_8_warps_where_two_stages_fit():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float32", 4096, 4096, True, h200.limits, depth=128) == (128, 64, 8, 2)
    # (128 + 2 stages × 2 × 64) rows of 256 fp32: 393,216 bytes, over 227 KiB
    assert online_sizes(h200, "float32", 4096, 4096, True, h200.limits, depth=256) == (64, 32, 4, 2)
    assert online_sizes(h200, "float32", 4096, 4096, True, h200.limits, depth=None) == (64, 32, 4, 2)
    # a backward's streamed walk keeps two resident tiles: not measured at these tiles, kept narrow
    assert online_sizes(h200, "float32", 4096, 4096, True, h200.limits, depth=128, online=False) == (64, 32, 4, 2)


def test_short_key_rows_cap_the_tile_at_their_extent():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float16", 37, 37, True, h200.limits, depth=16) == (64, 64, 8, 3)


def test_only_masked_walks_take_the_wide_key_tiles():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=128, masked=False) == (128, 64, 4, 2)


def test_the_mask_decides_the_tiles_whatever_form_it_is_written_in():
    """Unmasked attention keeps 128×64 / 4 warps; causal attention takes 128 keys and 8 warps, with
    the mask in a separate block (the example) or inline in each stage (attention_forms)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from attention import make_attention
    from attention_causal import make_causal_attention
    from attention_forms import make_attention_inline_mask
    from triton_codegen import compile

    def plan(func):   # 4 × 32 heads of 512 queries: enough programs that the rows stay at 128
        kernel = compile(func, verify=False, gpu="H200").program.kernels[0]
        return kernel.num_warps, kernel.num_stages, {d.block: d.default for d in kernel.dims}["BLOCK_J"]

    assert plan(make_attention(4, 32, 512, 128)) == (4, 2, 64)
    assert plan(make_causal_attention(4, 32, 512, 128)) == (8, 3, 128)
    assert plan(make_attention_inline_mask(4, 32, 512, 128)) == (8, 3, 128)


def test_fp32_attention_at_small_batch_keeps_tiles_that_fit_shared_memory():
    """Few programs (b1 h8 s1024): Tiling halves the rows to fill the GPU, and 4-byte key tiles are
    not widened to 3 stages of 128 keys (426 KB at head dimension 128, over 227 KiB)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from attention import make_attention

    from triton_codegen import compile

    h200 = gpu_spec("H200")
    [kernel] = compile(make_attention(1, 8, 1024, 128, dtype="float32"), verify=False).program.kernels
    rows, keys = kernel.block_sizes["BLOCK_I"], kernel.block_sizes["BLOCK_J"]
    assert rows < 128   # the rows were halved: 64 programs of 128 would fill half the GPU
    assert (rows + kernel.num_stages * 2 * keys) * 128 * 4 <= h200.shared_memory_per_block, (rows, keys)
