"""The per-stage contract check refuses decisions that would pass every other check and fail
later: a reduction loop re-marked as a program id, num_warps=3 (a clear ContractError, where the
sm_90 compile failed), a tile extent written as a string (where a raw TypeError escaped)."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx

import programs
from tir_passes.pipeline import run_pipeline
from tir_passes.contracts.tile_contract import KERNEL_KEY, LOOP_KEY, ContractError, kernel_tile, loop_tile
from tir_passes.checks.verify_contract import check_contract


@pytest.fixture(scope="module")
def row_sum():
    return run_pipeline(tvm.IRModule({"main": programs.int_row_sum})).module


def _loops(mod) -> list:
    found: list = []
    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, found.append))
    return found


def _annotated(mod, name: str, key: str, value):
    def rewrite(loop):
        if loop.loop_var.name != name:
            return loop
        annotations = dict(loop.annotations.items())
        annotations[key] = value
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, None, annotations)

    return tvm.IRModule({"main": mod["main"].with_body(tvm_ffi.structural_map(mod["main"].body, (tirx.For, rewrite)))})


def _role(loop) -> str:
    tile = loop_tile(loop)
    return tile.role if tile is not None else ""


def test_a_reduction_loop_remarked_as_a_program_id_is_caught(row_sum):
    assert check_contract(row_sum) == []
    [serial] = [loop for loop in _loops(row_sum) if _role(loop) == "serial"]
    problems = check_contract(_annotated(row_sum, serial.loop_var.name, LOOP_KEY, {"role": "grid"}))
    assert any("walks the reduction axis of block" in p and "race" in p for p in problems)


def test_num_warps_three_is_a_contract_error(row_sum):
    [grid] = [loop for loop in _loops(row_sum) if _role(loop) == "grid"]
    fields = dict(dict(grid.annotations.items())[KERNEL_KEY].items()) | {"num_warps": 3}
    bad = _annotated(row_sum, grid.loop_var.name, KERNEL_KEY, fields)
    [problem] = check_contract(bad)
    assert "num_warps 3 is not a power of two" in problem
    with pytest.raises(ContractError, match="num_warps 3"):
        kernel_tile([loop for loop in _loops(bad) if loop.loop_var.name == grid.loop_var.name][0])


def test_a_tile_extent_written_as_a_string_is_a_contract_error(row_sum):
    [tile, *_] = [loop for loop in _loops(row_sum) if _role(loop) == "tile"]
    fields = dict(dict(tile.annotations.items())[LOOP_KEY].items()) | {"extent": "37"}
    [problem] = check_contract(_annotated(row_sum, tile.loop_var.name, LOOP_KEY, fields))
    assert "extent must be an integer expression" in problem
