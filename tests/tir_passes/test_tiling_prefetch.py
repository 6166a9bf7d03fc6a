"""Tiling's prefetch of row walks (passes/tiling_prefetch.py): a serial walk of whole rows whose rows reduce
before it goes on gets a LoopPrefetch of the row loads of the buffers the kernel only reads; a walk that
reduces nothing, a buffer the kernel writes, or early tiles over the register budget get none."""

import pytest
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.contracts.tile_contract import ContractError, loop_tile
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.tiling_prefetch import decide_prefetch

KERNEL = {"num_stages": 2, "num_warps": 4, "registers": ["s"]}


def _walk(cols: int = 64, prefetch: dict | None = None, reduce: bool = True, in_place: bool = False,
          dtype: str = "float32", let_row: bool = False):
    """Tiled: programs t of 16 rows, each walked (serial r) one whole row of `cols` at a time: a row
    sum (or, without `reduce`, a scaled copy) then the row centred, into Y or back into X."""
    serial = {"tile": {"role": "serial", **({"prefetch": prefetch} if prefetch else {})}}
    tile = {"tile": {"axis": "k", "block": "BLOCK_K", "extent": cols, "role": "tile", "size": cols}}

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((32, cols), dtype), Y: T.Buffer((32, cols), dtype)):
        s = T.sblock_alloc_buffer((32, cols if not reduce else 1), dtype)
        for t in T.serial(2, annotations={"tile": {"role": "grid"}, "tile.kernel": KERNEL}):
            for r in T.serial(16, annotations=serial):
                for k in T.serial(cols, annotations=tile):
                    with T.sblock("row"):
                        if reduce:
                            vi = T.axis.spatial(32, t * 16 + r)
                            vk = T.axis.reduce(cols, k)
                            with T.init():
                                s[vi, 0] = T.Cast(dtype, 0)
                            if let_row:
                                row = T.bind(vi)
                                s[vi, 0] = s[vi, 0] + X[row, vk]
                            else:
                                s[vi, 0] = s[vi, 0] + X[vi, vk]
                        else:
                            vi = T.axis.spatial(32, t * 16 + r)
                            vk = T.axis.spatial(cols, k)
                            s[vi, vk] = X[vi, vk] * T.Cast(dtype, 2)
                for k in T.serial(cols, annotations=tile):
                    with T.sblock("out"):
                        vi = T.axis.spatial(32, t * 16 + r)
                        vk = T.axis.spatial(cols, k)
                        if in_place:
                            X[vi, vk] = X[vi, vk] - s[vi, 0 if reduce else vk]
                        else:
                            Y[vi, vk] = X[vi, vk] - s[vi, 0 if reduce else vk]

    return main


def _record(func):
    walk = top_level_statements(func)[0].body
    return loop_tile(walk).prefetch


def test_a_walk_whose_rows_reduce_prefetches_its_row_loads():
    """X's rows are read by the row sum and the centring: loaded one iteration ahead; the scratch row sum
    and Y (written) are not; 64 fp32 at 4 warps: 1 register per thread."""
    expected = _walk(prefetch={"buffers": ["X"], "distance": 1, "registers": 1})
    assert_rewrites(decide_prefetch, _walk(), expected)
    record = _record(expected)
    assert (record.distance, record.buffers, record.registers) == (1, ("X",), 1)


def test_a_walk_that_reduces_nothing_is_left_alone():
    """Elementwise rows only: nothing waits behind a block-wide reduction, the loads overlap already."""
    before = _walk(reduce=False)
    assert_rewrites(decide_prefetch, before, before)


def test_a_buffer_the_kernel_writes_is_not_loaded_early():
    """The rows are centred in place: X is written, so no load of it may move before a store."""
    before = _walk(in_place=True)
    assert_rewrites(decide_prefetch, before, before)


def test_an_address_through_a_let_is_not_loaded_early():
    """The row sum reads X at a let-bound row: the lowering assigns the let inside the walk, after where
    the early load would go, so only the centring's load of X (the same buffer) could move: none does."""
    before = _walk(let_row=True)
    assert_rewrites(decide_prefetch, before, before)


def test_early_tiles_over_the_register_budget_are_refused():
    """A row of 16384 fp32 at 4 warps: 128 registers per thread of early tiles, over the budget of 32."""
    before = _walk(cols=16384)
    assert_rewrites(decide_prefetch, before, before)
    assert _record(decide_prefetch(_walk(cols=8192, dtype="float16"))).registers == 32   # at the budget: taken


@pytest.mark.parametrize("bad", [{"distance": 0, "buffers": ["X"]}, {"distance": 1, "buffers": []},
                                 {"distance": 1, "buffers": ["Y", "X"]}, {"distance": 1, "buffers": ["X"], "ahead": 2},
                                 {"distance": 1, "buffers": ["X"], "sums_together": 2}])
def test_a_malformed_record_is_refused_naming_the_loop(bad):
    with pytest.raises(ContractError, match="loop r"):
        _record(_walk(prefetch=bad))


def test_the_contract_check_refuses_a_prefetch_of_a_buffer_the_kernel_writes():
    """Y is the walk's output, and X is written in place: loads moved before the walk's stores would read
    other values, so the check after every pass names the loop and the buffer."""
    import tvm

    from tir_passes.checks.verify_contract import check_contract

    good = {"buffers": ["X"], "distance": 1, "registers": 1}
    assert check_contract(tvm.IRModule({"main": _walk(prefetch=good)})) == []
    for func in (_walk(prefetch={**good, "buffers": ["Y"]}), _walk(prefetch=good, in_place=True)):
        problems = check_contract(tvm.IRModule({"main": func}))
        assert any("loop r prefetches" in p and "not a parameter the kernel only reads" in p for p in problems), problems
