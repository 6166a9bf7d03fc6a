"""Scans written the ways users write them compile to tl.cumsum / tl.cumprod / associative scans
along a tile axis, carry across tiles when the axis is longer than one tile, and match TVM."""

import pytest
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.infra.pass_util import replace_block
from tir_passes.contracts.tile_contract import SCAN_KEY, scan_mark
from tir_passes.passes.tiling import tile_function
from tir_passes.checks.verify_contract import check_contract


@T.prim_func(s_tir=True)
def cumsum_first_branch(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


@T.prim_func(s_tir=True)
def cumsum_guarded_previous(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] + T.if_then_else(vj >= 1, Y[vi, vj - 1], T.float32(0))


@T.prim_func(s_tir=True)
def running_max(X: T.Buffer((3, 50), "float32"), Y: T.Buffer((3, 50), "float32")):
    for i, j in T.grid(3, 50):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.max(T.if_then_else(not (vj == 0), Y[vi, vj - 1], T.min_value("float32")), X[vi, vj])


@T.prim_func(s_tir=True)
def cumprod_down_columns(X: T.Buffer((23, 7), "float32"), Y: T.Buffer((23, 7), "float32")):
    # the scan walks the first axis, and the loops are in the other order
    for j, i in T.grid(7, 23):
        with T.sblock("Y"):
            vj, vi = T.axis.remap("SS", [j, i])
            Y[vi, vj] = X[vi, vj] * T.if_then_else(vi > 0, Y[vi - 1, vj], T.float32(1))


@T.prim_func(s_tir=True)
def int_cummin_symbolic(a: T.handle, b: T.handle):
    # a symbolic length: a serial loop steps the tiles of the axis, the running min is carried
    n = T.int32()
    X = T.match_buffer(a, (5, n), "int32")
    Y = T.match_buffer(b, (5, n), "int32")
    for i, j in T.grid(5, n):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], T.min(Y[vi, vj - 1], X[vi, vj]))


@T.prim_func(s_tir=True)
def fp16_cumsum(X: T.Buffer((9, 70), "float16"), Y: T.Buffer((9, 70), "float16")):
    for i, j in T.grid(9, 70):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


SCANS = [cumsum_first_branch, cumsum_guarded_previous, running_max, cumprod_down_columns, fp16_cumsum]


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("func", SCANS, ids=lambda f: f.attrs["global_symbol"])
def test_scan_matches_tvm(func):
    kernel = compile_and_check(func)
    assert "scan_" in kernel.tile_ir and "tl.debug_barrier()" not in kernel.source


@pytest.mark.interpreter
@pytest.mark.parametrize("n", [1, 29, 2500])
def test_symbolic_length_scan_carries_across_tiles(n):
    kernel = compile_and_check(int_cummin_symbolic, sizes={"n": n}, aot=False)
    assert "carry_Y" in kernel.tile_ir


def test_scan_uses_the_triton_scan_of_its_combiner():
    sources = {f.attrs["global_symbol"]: compile_and_check(f, aot=False).source for f in (cumsum_first_branch,
                                                                                       cumprod_down_columns)}
    assert "tl.cumsum(" in sources["cumsum_first_branch"]
    assert "tl.cumprod(" in sources["cumprod_down_columns"]


def test_scan_axis_is_a_tile_with_a_scan_mark():
    tiled = tile_function(running_max, gpu_spec("H200"))
    blocks: list = []
    tvm_ffi.structural_walk(tiled.body, (s_tir.SBlock, blocks.append))
    mark = scan_mark(next(b for b in blocks if b.name_hint == "Y"))
    assert (mark.buffer, mark.axis, mark.combiner) == ("Y", "j", "max")
    assert check_contract(tvm.IRModule({"main": tiled})) == []


def test_scan_tile_without_its_mark_is_caught():
    """Without the mark the lowering would compute the tile's lanes at once from stale values:
    the contract check sees a tile loop that carries a dependence."""
    tiled = tile_function(cumsum_first_branch, gpu_spec("H200"))

    def unmark(block):
        annotations = {k: v for k, v in block.annotations.items() if k != SCAN_KEY}
        return replace_block(block, annotations=annotations) if block.name_hint == "Y" else block

    mutant = tvm.IRModule({"main": tiled.with_body(tvm_ffi.structural_map(tiled.body, (s_tir.SBlock, unmark)))})
    assert any("tile loop j" in p and "carries a dependence through Y" in p for p in check_contract(mutant))
