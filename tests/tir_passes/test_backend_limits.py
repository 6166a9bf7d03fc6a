"""The backend's limits are passed in with the GPU spec (never a module global): a pipeline built
under other limits decides differently, records the limits it tiled under, and the lowering and
the config space read them back; the default limits decide as before."""

import tvm

from matmul import make_matmul
from softmax import make_softmax
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.online_contract import online_shift
from tir_passes.contracts.tile_contract import dot_mark, loop_tile
from tir_passes.contracts.tile_root import backend_limits
from tir_passes.analyses.nest import blocks_under, loops_under
from tir_passes.pipeline import default_pipeline, run_pipeline
from triton_codegen import compile
from triton_codegen.configs import config_space
from triton_codegen.triton_backend import TRITON_LIMITS

WIDE_DOTS = BackendLimits(dot_min_block=32)
NARROW_ROWS = BackendLimits(max_row_tile=128)


def _module(func) -> tvm.IRModule:
    return tvm.IRModule({"main": func})


def _tile_sizes(func) -> dict[str, int]:
    return {tile.axis: tile.size for loop in loops_under(func.body) if (tile := loop_tile(loop)) and tile.axis}


def test_the_dot_minimum_comes_from_the_backend_and_is_recorded():
    default = run_pipeline(_module(make_matmul(16, 16, 16)), default_pipeline("H200")).module["main"]
    wide = run_pipeline(_module(make_matmul(16, 16, 16)), default_pipeline("H200", limits=WIDE_DOTS),
                        checks=("contract",)).module["main"]
    assert backend_limits(default) == TRITON_LIMITS and backend_limits(wide) == WIDE_DOTS
    assert set(_tile_sizes(default).values()) == {16}
    assert set(_tile_sizes(wide).values()) == {32}   # each tl.dot tile at least the backend's minimum
    assert any(dot_mark(b) is not None for b in blocks_under(wide.body))


def test_the_lowering_and_the_configs_read_the_recorded_minimum():
    wide = compile(make_matmul(16, 16, 16), verify=False, passes=default_pipeline("H200", limits=WIDE_DOTS))
    default = compile(make_matmul(16, 16, 16), verify=False)
    assert wide.program.kernels[0].dot_min_block == 32 and default.program.kernels[0].dot_min_block == 16
    smallest = min(config[block] for config in config_space(wide.program.kernels[0])
                   for block in wide.program.kernels[0].block_sizes)
    assert smallest == 32


def test_the_widest_row_tile_comes_from_the_backend():
    def shifts(limits):
        func = run_pipeline(_module(make_softmax(4, 300)), default_pipeline("H200", limits=limits)).module["main"]
        return [b.name_hint for b in blocks_under(func.body) if online_shift(b) is not None]

    assert shifts(None) == []            # a row of 300 is one tile: no running maximum
    assert shifts(NARROW_ROWS) != []     # longer than the backend's widest tile: the online form
