"""Longest first: where a tile window makes later row tiles walk more key tiles (open below,
bounded above: causal attention), Tiling records the rows' grid loop in KernelTile.longest_first
and the kernel takes that axis's tiles last-first from the program id, so the longest programs
start first and the last wave is of short ones. test_tile_window checks the numerics of the
windowed kernels (this order included) at every block size, and compiles them ahead of time."""

import pytest
import tvm

from attention import make_attention
from test_tile_window import make_banded_attention
from tir_passes.checks.verify_contract import check_contract
from tir_passes import run_pipeline
from tir_passes.infra.frontend import as_module
from tir_passes.contracts.tile_contract import KERNEL_KEY, ContractError, KernelTile, _kernel_from, _kernel_value
from tir_passes.contracts.tile_contract import kernel_tile
from tir_passes.infra.pass_util import replace_block, root_block, top_level_statements, with_root_block
from triton_codegen import compile


def _tiled(func):
    return run_pipeline(as_module(func), checks=("contract",)).module["main"]


def _record(func) -> KernelTile:
    return next(r for stmt in top_level_statements(_tiled(func)) if (r := kernel_tile(stmt)) is not None)


@pytest.mark.parametrize("func, rows", [
    (make_attention(1, 2, 300, 16, causal=True), "i_0"),
    (make_banded_attention(300, 16, -300, 0), "i_0"),          # the same mask as a band
    (make_banded_attention(300, 16, -300, -1), "i_0"),         # strictly causal
    (make_attention(1, 2, 300, 16), None),                     # every row walks every key tile
    (make_banded_attention(300, 16, -8, 0), None),             # a sliding window: as long for every row
    (make_banded_attention(300, 16, 0, 300), None),            # anticausal: the first tiles walk most already
], ids=["causal", "causal_band", "strictly_causal", "unmasked", "sliding", "anticausal"])
def test_the_rows_of_a_window_that_grows_with_them_launch_last_first(func, rows):
    assert _record(func).longest_first == rows


def test_the_kernel_takes_the_row_tiles_from_the_last():
    source = compile(make_attention(1, 2, 300, 16, causal=True), verify=False).source
    line = "i_0 = ((tl.cdiv(300, BLOCK_I)) - 1) - pid % (tl.cdiv(300, BLOCK_I))  # later tiles walk more"
    assert source.count(line) == 2   # pointers and descriptors
    assert "- 1) - pid" not in compile(make_attention(1, 2, 300, 16), verify=False).source


def test_the_record_round_trips_and_the_contract_catches_a_loop_that_is_no_grid_loop():
    record = KernelTile(4, 2, longest_first="i_0")
    assert _kernel_from(_kernel_value(record), "here") == record
    with pytest.raises(ContractError, match="longest_first"):
        _kernel_from({"num_warps": 4, "longest_first": 3}, "here")
    func = _tiled(make_attention(1, 2, 300, 16, causal=True))
    assert check_contract(tvm.IRModule({"main": func})) == []
    [outer] = [stmt for stmt in top_level_statements(func) if kernel_tile(stmt) is not None]
    value = {**dict(outer.annotations[KERNEL_KEY].items()), "longest_first": "j_0"}
    mutant = tvm.tirx.For(outer.loop_var, outer.min, outer.extent, outer.kind, outer.body, outer.thread_binding,
                          {**dict(outer.annotations), KERNEL_KEY: value})
    problems = check_contract(tvm.IRModule({"main": _replaced(func, outer, mutant)}))
    assert any("longest_first names j_0, not one of the kernel's grid loops" in p for p in problems)


def _replaced(func, old, new):
    """`func` with its top-level statement `old` replaced by `new`."""
    root = root_block(func)
    seq = [new if stmt.same_as(old) else stmt for stmt in top_level_statements(func)]
    return with_root_block(func, replace_block(root, body=tvm.tirx.SeqStmt(seq) if len(seq) > 1 else seq[0]))
