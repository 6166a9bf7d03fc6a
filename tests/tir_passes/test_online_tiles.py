"""Attention's tiles (tile_sizes.online_sizes): on sm_90, 128 keys with 8 warps and 3 stages where
the query tile and three stages of key and value tiles fit shared memory (measured best on the
H200); elsewhere 128 × 64 with 4 warps and 2 stages."""

from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.passes.tile_sizes import online_sizes


def test_sm_90_takes_wide_key_tiles_where_they_fit():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=128) == (128, 128, 8, 3)
    assert online_sizes(h200, "bfloat16", 4096, 4096, True, h200.limits, depth=64) == (128, 128, 8, 3)
    # head dimension 256: three stages of 128-key tiles do not fit 227 KiB
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=256) == (128, 64, 4, 2)
    assert online_sizes(h200, "float16", 4096, 4096, True, h200.limits, depth=None) == (128, 64, 4, 2)


def test_other_gpus_and_fp32_keep_the_narrow_tiles():
    a100, h200 = gpu_spec("A100"), gpu_spec("H200")
    assert online_sizes(a100, "float16", 4096, 4096, True, a100.limits, depth=128) == (128, 64, 4, 2)
    assert online_sizes(h200, "float32", 4096, 4096, True, h200.limits, depth=128) == (64, 32, 4, 2)


def test_short_key_rows_cap_the_tile_at_their_extent():
    h200 = gpu_spec("H200")
    assert online_sizes(h200, "float16", 37, 37, True, h200.limits, depth=16) == (64, 64, 8, 3)
