"""Decode attention written without a query axis (Q of shape (B, H, D)): its scores are matrix-vector
products, no contraction a tl.dot takes, so Tiling walks the keys as a stream; the stream's budget
counts each key's products over the head dimension (tile_axes.contraction_depth over the walk's
sums), where it held a whole row of 4096 keys × 128 dimensions a program."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.passes.tile_sizes import ROW_ELEMENTS_PER_PROGRAM
from triton_codegen import compile


def make_matvec_decode(B: int, H: int, S: int, D: int):
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def matvec_decode(Q: T.Buffer((B, H, D), "float16"), K: T.Buffer((B, H, S, D), "float16"),
                      V: T.Buffer((B, H, S, D), "float16"), O: T.Buffer((B, H, D), "float16")):
        scores = T.sblock_alloc_buffer((B, H, S), "float32")
        row_max = T.sblock_alloc_buffer((B, H), "float32")
        row_sum = T.sblock_alloc_buffer((B, H), "float32")
        acc = T.sblock_alloc_buffer((B, H, D), "float32")
        for b, h, j, d in T.grid(B, H, S, D):
            with T.sblock("scores"):
                vb, vh, vj, vd = T.axis.remap("SSSR", [b, h, j, d])
                with T.init():
                    scores[vb, vh, vj] = T.float32(0)
                scores[vb, vh, vj] = scores[vb, vh, vj] + T.Cast("float32", Q[vb, vh, vd]) * T.Cast(
                    "float32", K[vb, vh, vj, vd])
        for b, h, j in T.grid(B, H, S):
            with T.sblock("row_max"):
                vb, vh, vj = T.axis.remap("SSR", [b, h, j])
                with T.init():
                    row_max[vb, vh] = T.float32(float("-inf"))
                row_max[vb, vh] = T.max(row_max[vb, vh], scores[vb, vh, vj] * T.float32(scale))
        for b, h, j in T.grid(B, H, S):
            with T.sblock("row_sum"):
                vb, vh, vj = T.axis.remap("SSR", [b, h, j])
                with T.init():
                    row_sum[vb, vh] = T.float32(0)
                row_sum[vb, vh] = row_sum[vb, vh] + T.exp(scores[vb, vh, vj] * T.float32(scale) - row_max[vb, vh])
        for b, h, d, j in T.grid(B, H, D, S):
            with T.sblock("weighted_sum"):
                vb, vh, vd, vj = T.axis.remap("SSSR", [b, h, d, j])
                with T.init():
                    acc[vb, vh, vd] = T.float32(0)
                acc[vb, vh, vd] = acc[vb, vh, vd] + T.exp(scores[vb, vh, vj] * T.float32(scale) - row_max[vb, vh]) \
                    * T.Cast("float32", V[vb, vh, vj, vd])
        for b, h, d in T.grid(B, H, D):
            with T.sblock("normalize"):
                vb, vh, vd = T.axis.remap("SSS", [b, h, d])
                O[vb, vh, vd] = T.Cast("float16", acc[vb, vh, vd] / row_sum[vb, vh])

    return matvec_decode


def test_a_matrix_vector_decode_walks_key_tiles_within_the_budget():
    kernel = compile(make_matvec_decode(4, 32, 4096, 128), verify=False)
    module = kernel.module(True)
    [name] = module.CONFIGS
    config = module.CONFIGS[name][module.CHOSEN[name]]
    key_tiles = [value for block, value in config.items() if block.startswith("BLOCK_J")]
    assert len(kernel.program.kernels) == 1 and key_tiles, config
    assert all(tile * 128 <= ROW_ELEMENTS_PER_PROGRAM for tile in key_tiles), config
    assert not any(block.startswith("BLOCK_H") for block in config), config   # a head a program


@pytest.mark.interpreter
def test_a_matrix_vector_decode_matches_tvm():
    compile_and_check(make_matvec_decode(2, 3, 70, 16))
