"""The bank-conflict model against hand-computed cases, and the padding pass."""

import pytest
import tvm

from tir_passes import CHECKS, run_pipeline
from tir_passes.passes import bank_conflict_free_tiling
from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling, padded_layout, padded_layout_problems
from tir_passes.analyses.bank_conflicts import analyze, count_wavefronts

from matmul import make_matmul as _make_matmul
from shared_memory import schedule_matmul, schedule_transpose
from transpose import make_transpose as _make_transpose


def make_transpose(n):
    return _make_transpose(n, n)


def make_matmul(n):
    return _make_matmul(n, n, n, "float32", "float32")


WORD = 4


def column_read(stride_words: int, bytes_per_lane: int = 4) -> list[int]:
    return [lane * stride_words * WORD for lane in range(32)]


@pytest.mark.parametrize("addresses, width, expected", [
    (column_read(32), 4, (32, 1)),                                    # 32x32 fp32 tile read by column
    (column_read(33), 4, (1, 1)),                                     # the same tile padded by one element
    ([lane * 64 for lane in range(32)], 2, (16, 1)),                  # fp16 column of a 32-wide tile: two lanes per word row
    ([lane * 2 for lane in range(32)], 2, (1, 1)),                    # fp16 row: 32 lanes share 16 words
    ([lane * 16 for lane in range(32)], 16, (4, 4)),                  # float4 row: quarter-warp phases, conflict-free
    (column_read(32), 16, (32, 4)),                                   # float4 along a 32-word row stride (8 per bank per phase)
    ([0] * 32, 4, (1, 1)),                                            # broadcast
    ([(lane * 32 + (5 ^ lane)) * WORD for lane in range(32)], 4, (1, 1)),  # XOR swizzle: column 5 across rows
    ([lane * 8 for lane in range(32)], 8, (2, 2)),                    # float2 row: half-warp phases
], ids=["fp32-column", "fp32-padded", "fp16-column", "fp16-row", "float4-row", "float4-column", "broadcast",
        "xor-swizzle", "float2-row"])
def test_hand_computed_wavefronts(addresses, width, expected):
    assert count_wavefronts(addresses, width) == expected


def _loads(mod, buffer):
    return [a for a in analyze(mod) if a.buffer == buffer and a.kind == "load"]


def test_transpose_through_shared_memory_is_32_way_then_conflict_free():
    mod = schedule_transpose(make_transpose(64))
    assert [a.wavefronts for a in _loads(mod, "A_shared")] == [32]
    fixed = BankConflictFreeTiling()(mod)
    assert [a.wavefronts for a in _loads(fixed, "A_shared")] == [1]
    assert "rows padded by 1 element(s)" in fixed.script() and "32 -> 1 wavefront(s)" in fixed.script()


def test_only_the_conflicting_tile_is_padded():
    mod = schedule_matmul(make_matmul(64))
    fixed = BankConflictFreeTiling()(mod)
    script = fixed.script()
    assert "A_shared: rows padded by 1 element(s)" in script
    assert "B_shared: no layout needed" in script
    assert [a.conflicts for a in analyze(fixed)] == [0, 0, 0, 0]


def test_padding_keeps_the_results(tmp_path):
    """The padded schedule computes what the input computes (thread loops run serially on the CPU)."""
    mod = schedule_transpose(make_transpose(64))
    result = run_pipeline(mod, [BankConflictFreeTiling()], checks=CHECKS)
    assert result.stages[0].changed and result.stages[0].checks["numerics"] == "ok"


def test_functions_without_shared_memory_are_left_alone():
    func = make_transpose(64)
    mod = tvm.IRModule({"main": func})
    assert BankConflictFreeTiling()(mod)["main"].same_as(func)


def test_before_expected_padding_of_the_transpose_tile():
    """Before: the 64x64 transpose staged through a 32x32 shared tile. Expected: the staging block
    carries the row padding (storage_align 32k + 1) and the decision."""
    from tvm.script import ir as I
    from tvm.script import tirx as T

    from helpers import assert_rewrites

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
            T.func_attr({"global_symbol": "transpose"})
            A_shared = T.sblock_alloc_buffer((64, 64), scope="shared")
            for j_0 in T.thread_binding(2, thread="blockIdx.y"):
                for i_0 in T.thread_binding(2, thread="blockIdx.x"):
                    for ax0 in range(32):
                        for ax1 in T.thread_binding(32, thread="threadIdx.x"):
                            with T.sblock("A_shared"):
                                v0 = T.axis.spatial(64, i_0 * 32 + ax0)
                                v1 = T.axis.spatial(64, j_0 * 32 + ax1)
                                T.reads(A[v0, v1])
                                T.writes(A_shared[v0, v1])
                                T.sblock_attr({"bank.decision": {
                                    "after": {"conflicts": 0, "wavefronts": 64, "worst": 1},
                                    "before": {"conflicts": 992, "wavefronts": 1056, "worst": 32},
                                    "buffer": "A_shared", "dtype": "float32", "kind": "padded", "pad": 1, "tile": [32, 32],
                                    "vector": 1,
                                    "why": "A_shared: rows padded by 1 element(s) (read and written by the threads, 128 extra "
                                           "bytes): 32 -> 1 wavefront(s) per request at worst, 992 -> 0 conflicts per warp; "
                                           "proven on TVM's layout of the 32x32 tile, strides (33, 1): one address per "
                                           "element, the highest (1054) inside the 1056-element allocation"},
                                    "buffer_dim_align": [[0, 0, 32, 1]]})
                                A_shared[v0, v1] = A[v0, v1]
                    for j_1 in range(32):
                        for i_1 in T.thread_binding(32, thread="threadIdx.x"):
                            with T.sblock("B"):
                                vi = T.axis.spatial(64, i_0 * 32 + i_1)
                                vj = T.axis.spatial(64, j_0 * 32 + j_1)
                                T.reads(A_shared[vi, vj])
                                T.writes(B[vj, vi])
                                B[vj, vi] = A_shared[vi, vj]

    assert_rewrites(BankConflictFreeTiling(), schedule_transpose(make_transpose(64)), Expected)


def test_the_padded_layout_tvm_builds_is_proven():
    """The real pass output: TVM's strides and allocation pass the proof, and agree with an
    exhaustive look at the tile's addresses."""
    shape, strides, allocated = padded_layout(BankConflictFreeTiling()(schedule_transpose(make_transpose(64))), "A_shared")
    assert (shape, strides, allocated) == ([32, 32], [33, 1], 1056)
    assert padded_layout_problems(shape, strides, allocated) == []
    addresses = {row * strides[0] + col for row in range(shape[0]) for col in range(shape[1])}
    assert len(addresses) == 32 * 32 and max(addresses) < allocated


def test_an_allocation_not_enlarged_for_the_padding_is_caught():
    """Catalogue M12: stride 33, but only 32 * 32 elements allocated."""
    assert padded_layout_problems([32, 32], [33, 1], 1024) == ["not proven: map(x) lies in shape (1024,)"]


def test_a_row_stride_shorter_than_the_row_is_caught():
    """Stride 31 for 32-element rows: the last element of a row is the first of the next."""
    assert padded_layout_problems([32, 32], [31, 1], 1056) == ["not proven: inverse(map(x)) == x"]


def test_a_layout_without_padded_strides_is_caught():
    assert padded_layout_problems([32, 32], [], 1024) == ["TVM's layout of the (32, 32) tile has no padded strides"]


def test_the_pass_keeps_the_tile_unpadded_when_the_allocation_is_not_enlarged(monkeypatch):
    """A mutant lowering that allocates the unpadded tile: the pass refuses its own padding."""
    monkeypatch.setattr(bank_conflict_free_tiling, "_allocated_elements", lambda mod, name: 32 * 32)
    fixed = BankConflictFreeTiling()(schedule_transpose(make_transpose(64)))
    script = fixed.script()
    assert ("A_shared: kept unpadded: a padding of 1 element(s) was not proven "
            "(not proven: map(x) lies in shape (1024,))") in script
    assert "buffer_dim_align" not in script and '"kind": "unchanged"' in script


def test_the_pass_keeps_the_tile_unpadded_when_the_stride_is_short(monkeypatch):
    monkeypatch.setattr(bank_conflict_free_tiling, "padded_layout", lambda mod, name: ([32, 32], [31, 1], 1056))
    script = BankConflictFreeTiling()(schedule_transpose(make_transpose(64))).script()
    assert "A_shared: kept unpadded: a padding of 1 element(s) was not proven (not proven: inverse(map(x)) == x)" in script


def test_a_tile_without_its_own_allocation_is_not_proven():
    assert padded_layout_problems([32, 32], [33, 1], None) == [
        "TVM's CUDA build has no single shared allocation of the tile to check"]
