"""Column reductions (`S[j] = Σ_i X[i, j]·W[i, j]`, a norm's d_weight): the rows split into partials
when the column tiles alone leave the GPU idle (SplitReduction), tiles of columns stepped down the
rows so every load coalesces (Tiling), and the kernels compute what TVM computes."""

import torch
from tvm.script import tirx as T

from tests.helpers import compile_and_check
from tir_passes.analyses.nest import blocks_under
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.contracts.tile_contract import split_mark
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.hoist_allocations import hoist_allocations
from tir_passes.passes.split_reduction import split_reduction
from tir_passes.passes.tiling_plan import plan_kernel

H200 = gpu_spec("H200")
ROWS, COLS = 2048, 40


@T.prim_func(s_tir=True)
def column_sum(X: T.Buffer((ROWS, COLS), "float32"), W: T.Buffer((ROWS, COLS), "float32"),
               S: T.Buffer((COLS,), "float32")):
    for j, i in T.grid(COLS, ROWS):
        with T.sblock("S"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                S[vj] = T.float32(0)
            S[vj] = S[vj] + X[vi, vj] * W[vi, vj]


@T.prim_func(s_tir=True)
def column_sum_rows_outer(P: T.Buffer((ROWS, COLS), "float32"), Q: T.Buffer((ROWS, COLS), "float32"),
                          R: T.Buffer((COLS,), "float32")):
    for i, j in T.grid(ROWS, COLS):  # the same sum, the loops the other way round, other names
        with T.sblock("total"):
            vi, vj = T.axis.remap("RS", [i, j])
            with T.init():
                R[vj] = T.float32(0)
            R[vj] = R[vj] + Q[vi, vj] * P[vi, vj]


@T.prim_func(s_tir=True)
def row_sum(X: T.Buffer((COLS, ROWS), "float32"), S: T.Buffer((COLS,), "float32")):
    for j, i in T.grid(COLS, ROWS):
        with T.sblock("S"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                S[vj] = T.float32(0)
            S[vj] = S[vj] + X[vj, vi]


def _marks(func):
    return [mark for mark in (split_mark(b) for b in blocks_under(func.body)) if mark is not None]


def test_a_column_reduction_over_long_columns_is_split_into_row_partials():
    for func, name in ((column_sum, "S"), (column_sum_rows_outer, "total")):
        marks = _marks(split_reduction(hoist_allocations(func), H200))
        assert [(m.of, m.splits) for m in marks] == [(name, 4)], func   # 2048 rows: 4 slices of 512 rows


def test_a_row_reduction_is_not_a_column_reduction():
    func = hoist_allocations(row_sum)
    assert split_reduction(func, H200).same_as(func)


def test_a_column_reduction_is_tiled_along_its_columns():
    plan = plan_kernel(H200, top_level_statements(column_sum)[0])
    tiles = {choice.axis: (choice.size, choice.whole) for choice in plan.tiles.values()}
    assert tiles == {"j": (64, False), "i": (64, False)}, tiles
    assert any("reduces down the columns" in note for note in plan.notes)
    row_plan = plan_kernel(H200, top_level_statements(row_sum)[0])
    assert not any("columns" in note for note in row_plan.notes)


def test_the_split_column_reduction_matches_tvm():
    """Partials kernel and the sum over the slices, every per-pass check, TVM's llvm build as the
    reference, AOT for sm_90/sm_80."""
    kernel = compile_and_check(column_sum)
    assert len(kernel.program.kernels) == 2
    x, w = torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)
    out = torch.empty(COLS)
    kernel(x, w, out)
    torch.testing.assert_close(out, (x.double() * w.double()).sum(0).float(), rtol=1e-4, atol=1e-4)
