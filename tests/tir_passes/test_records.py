"""The typed records of the contracts layer (docs/pipeline.md): LoopFusion's fusion record,
BufferLayout's layout record and OnlineSoftmax's mark round trip through the IR, are what their
writer decides, are read by Tiling and the report instead of prose, survive a rewrite that keeps
the meaning, and the contract check catches a record that is not true of the IR."""

import dataclasses
import re

import pytest
import tvm
import tvm_ffi
from tvm.script import tirx as T

from tir_passes import run_pipeline
from tir_passes.checks.verify_contract import check_contract
from tir_passes.contracts.fusion_record import (FUSE, INLINE, MOVE, RECOMPUTE, FusionStep, fusion_steps,
                                                recomputed_blocks, write_fusion)
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.contracts.layout_record import LayoutDecision, layout_decisions, write_layout
from tir_passes.contracts.online_contract import SHIFT_KEY, online_shift
from tir_passes.contracts.tile_contract import ContractError, loop_tile
from tir_passes.analyses.nest import blocks_under, loops_under, realizes_under
from tir_passes.infra.pass_util import replace_block, top_level_statements
from tir_passes.passes.tiling import tile_function
from triton_codegen.report.decisions import read_decisions

from attention import make_attention
from attention_scores import make_attention_scores


@T.prim_func(s_tir=True)
def scaled_row_sum(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
    B = T.sblock_alloc_buffer((8, 16), "float32")
    C = T.sblock_alloc_buffer((8,), "float32")
    for i, j in T.grid(8, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 16):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + B[vi, vj]
    for i in range(8):
        with T.sblock("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = C[vi] * T.float32(0.5)


@T.prim_func(s_tir=True)
def scaled_row_sum_rewritten(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
    """The same program: other loop names, intermediates declared with T.alloc_buffer."""
    B = T.alloc_buffer((8, 16), "float32")
    C = T.alloc_buffer((8,), "float32")
    for r, c in T.grid(8, 16):
        with T.sblock("B"):
            vr, vc = T.axis.remap("SS", [r, c])
            B[vr, vc] = T.float32(2) * A[vr, vc]
    for r, c in T.grid(8, 16):
        with T.sblock("C"):
            vr, vc = T.axis.remap("SR", [r, c])
            with T.init():
                C[vr] = T.float32(0)
            C[vr] = C[vr] + B[vr, vc]
    for r in range(8):
        with T.sblock("D"):
            vr = T.axis.spatial(8, r)
            D[vr] = C[vr] * T.float32(0.5)


@T.prim_func(s_tir=True)
def transposed_intermediate(A: T.Buffer((24, 16, 4), "float32"), Y: T.Buffer((24, 16), "float32"),
                            Z: T.Buffer((24, 16), "float32")):
    """X is written and read as X[vj, vi] by two nests: BufferLayout permutes it."""
    X = T.sblock_alloc_buffer((16, 24), "float32")
    for i, j, k in T.grid(24, 16, 4):
        with T.sblock("X"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                X[vj, vi] = T.float32(0)
            X[vj, vi] = X[vj, vi] + A[vi, vj, vk]
    for i, j in T.grid(24, 16):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vj, vi] * T.float32(2)
    for i, j in T.grid(24, 16):
        with T.sblock("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = X[vj, vi] + T.float32(1)


def _final(func, stop_after=None):
    return run_pipeline(tvm.IRModule({"main": func}), stop_after=stop_after).module


def _round_trip(func):
    return tvm.script.from_source(func.script())


# --- round trips ---------------------------------------------------------------------------------
def test_fusion_steps_round_trip_through_the_annotation():
    steps = [FusionStep(INLINE, ("B",), buffers=("B",), reason="elementwise producer", bytes_saved=1024),
             FusionStep(MOVE, ("n",), ("m", "s"), ("s",), depth=2, bytes_saved=None),
             FusionStep(RECOMPUTE, ("S",), ("N",), ("S",), reason="cheaper", copies=("S_2",)),
             FusionStep(FUSE, ("C",), ("D",), taken=False, reason="D reads C[vi + 1]")]
    func = write_fusion(scaled_row_sum, steps)
    assert fusion_steps(_round_trip(func)) == tuple(steps)
    assert recomputed_blocks(func) == {"S_2"}


def test_layout_decisions_round_trip_through_the_annotation():
    decisions = [LayoutDecision("X", (1, 0), (8, 16), "proven"), LayoutDecision("W", None, reason="symbolic")]
    func = write_layout(scaled_row_sum, decisions)
    assert layout_decisions(_round_trip(func)) == tuple(decisions)
    assert decisions[0].text == "X: axes permuted to (1, 0): proven" and decisions[1].text == "W: kept (symbolic)"


def test_a_malformed_record_is_a_contract_error_naming_its_writer():
    func = write_fusion(scaled_row_sum, [FusionStep("fold", ("B",))])
    with pytest.raises(ContractError, match="fusion action must be one of .* LoopFusion pass"):
        fusion_steps(func)
    func = write_layout(scaled_row_sum, [LayoutDecision("X", (0, 0), (8, 16))])
    with pytest.raises(ContractError, match="not a permutation .* BufferLayout pass"):
        layout_decisions(func)


def _with_shift_mark(func, change):
    def edit(block):
        if SHIFT_KEY not in block.annotations:
            return block
        value = change(dict(block.annotations[SHIFT_KEY].items()))
        return replace_block(block, annotations={**dict(block.annotations), SHIFT_KEY: value})
    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.s_tir.SBlock, edit)))


def _serial_loops(func) -> int:
    return sum(1 for loop in loops_under(func.body) if (t := loop_tile(loop)) is not None and t.role == "serial")


def test_the_online_mark_says_the_loop_is_streamed_and_tiling_reads_it():
    func = _final(make_attention(1, 1, 29, 16), stop_after="BankConflictFreeTiling")["main"]
    [mark] = [m for b in blocks_under(func.body) if (m := online_shift(b)) is not None]
    assert mark.streamed
    # the same IR with the mark saying "not streamed": Tiling keeps the key loop one tile
    whole = _with_shift_mark(func, lambda value: {**value, "streamed": False})
    assert _serial_loops(tile_function(func, gpu_spec("H200"))) == 1
    assert _serial_loops(tile_function(whole, gpu_spec("H200"))) == 0
    # and the contract check says when a streamed mark is not what the tiled kernel does
    lying = _with_shift_mark(tile_function(whole, gpu_spec("H200")), lambda value: {**value, "streamed": True})
    assert any("marked streamed, but its row loop is not walked in tiles" in p
               for p in check_contract(tvm.IRModule({"main": lying})))
    assert check_contract(tvm.IRModule({"main": tile_function(func, gpu_spec("H200"))})) == []
    unmarked = _with_shift_mark(func, lambda value: {k: v for k, v in value.items() if k != "streamed"})
    with pytest.raises(ContractError, match='needs a boolean "streamed"'):
        [online_shift(b) for b in blocks_under(unmarked.body)]


# --- the writers' output -------------------------------------------------------------------------
def test_loop_fusion_records_an_inline_and_a_fusion_with_their_bytes():
    steps = fusion_steps(_final(scaled_row_sum, stop_after="LoopFusion")["main"])
    assert [(s.action, s.blocks, s.into, s.buffers, s.taken, s.bytes_saved, s.depth) for s in steps] == [
        (INLINE, ("B",), (), ("B",), True, 8 * 16 * 4 * 2, 0),
        (FUSE, ("C",), ("D",), ("C",), True, 8 * 4 * 2, 1)]


def test_a_program_rewritten_without_changing_its_meaning_gives_the_same_records():
    for stage in ("LoopFusion", None):
        assert fusion_steps(_final(scaled_row_sum, stage)["main"]) == \
            fusion_steps(_final(scaled_row_sum_rewritten, stage)["main"])


def test_buffer_layout_records_the_permutation_it_applied():
    [decision] = layout_decisions(_final(transposed_intermediate)["main"])
    assert decision.buffer == "X" and decision.permutation == (1, 0) and decision.old_shape == (16, 24)


def test_the_report_reads_attentions_bytes_saved_from_the_record():
    """The move of the normalize pass counts: 10,064 + 21,904 bytes, not the 21,904 a regex over
    the prose found (it took a move for a refusal)."""
    mod = _final(make_attention(1, 2, 37, 16))
    steps = fusion_steps(mod["main"])
    decisions = read_decisions(mod)
    kinds = [(s.action, s.taken) for s in steps]
    assert (MOVE, True) in kinds and (FUSE, True) in kinds
    assert decisions.fusion == steps
    assert decisions.fusion_bytes_saved == sum(s.bytes_saved or 0 for s in steps if s.taken)
    assert sum(s.bytes_saved for s in steps if s.action in (MOVE, FUSE)) == 10064 + 21904


# --- Tiling reads the recompute record -----------------------------------------------------------
def _copy_row_tile(func) -> list[int]:
    tiled = tile_function(func, gpu_spec("H200"))
    [stmt] = top_level_statements(tiled)
    [copy] = [r for r in realizes_under(stmt) if r.block.name_hint == "scores_2"]
    bound = {v.name for v in copy.iter_values if isinstance(v, tvm.tirx.Var)}
    sizes = [t.size for loop in loops_under(stmt) if (t := loop_tile(loop)) is not None and t.role == "tile"
             and loop.loop_var.name in bound and t.axis != "i"]
    return sizes


def test_tiling_walks_the_recomputed_scores_in_the_online_tiles_because_the_record_says_so():
    func = _final(make_attention_scores(37, 601, 16), stop_after="BankConflictFreeTiling")["main"]
    assert recomputed_blocks(func) == {"scores_2"}
    with_record = _copy_row_tile(func)
    steps = [dataclasses.replace(s, copies=()) if s.action == RECOMPUTE else s for s in fusion_steps(func)]
    without = _copy_row_tile(write_fusion(func, steps))
    assert with_record != without


# --- the contract check --------------------------------------------------------------------------
def test_what_the_writers_record_passes_the_contract_check():
    assert check_contract(_final(scaled_row_sum)) == []
    assert check_contract(_final(transposed_intermediate)) == []


@pytest.mark.parametrize("edit, problem", [
    (lambda s: dataclasses.replace(s, bytes_saved=s.bytes_saved + 1), "says it saves 65 bytes; .* are 64"),
    (lambda s: dataclasses.replace(s, into=("E",)), "names block E, which does not exist"),
    (lambda s: dataclasses.replace(s, action=INLINE), "block C was inlined but still exists"),
])
def test_a_fusion_step_that_is_not_true_of_the_ir_is_caught(edit, problem):
    mod = _final(scaled_row_sum, stop_after="LoopFusion")
    steps = [edit(s) if s.action == FUSE else s for s in fusion_steps(mod["main"])]
    problems = check_contract(tvm.IRModule({"main": write_fusion(mod["main"], steps)}))
    assert any(re.search(problem, p) for p in problems), problems


def test_a_fusion_into_one_nest_that_is_two_nests_is_caught():
    mod = _final(scaled_row_sum, stop_after="HoistAllocations")
    lying = write_fusion(mod["main"], [FusionStep(FUSE, ("C",), ("D",), ("C",), bytes_saved=64, depth=1)])
    assert any("not one nest" in p for p in check_contract(tvm.IRModule({"main": lying})))


def test_a_layout_decision_that_is_not_true_of_the_ir_is_caught():
    mod = _final(transposed_intermediate)
    [decision] = layout_decisions(mod["main"])
    for lie, problem in [(dataclasses.replace(decision, buffer="W"), "no root allocation"),
                         (dataclasses.replace(decision, old_shape=(24, 16)), "not the old shape")]:
        problems = check_contract(tvm.IRModule({"main": write_layout(mod["main"], [lie])}))
        assert any(problem in p for p in problems), problems
