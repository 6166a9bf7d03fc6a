"""BankConflictFreeTiling's typed decision (tir_passes/contracts/shared_layout.py): its round trip through the
IR, its address functions, and how the pass chooses between padding, XOR swizzles and the
tensor-core layout."""

from dataclasses import replace

import pytest
import tvm
from tvm import s_tir

from matmul import make_matmul
from shared_memory import schedule_matmul_tensor_core, schedule_transpose, schedule_transpose_vectorized
from tir_passes.passes.bank_conflict_free_tiling import GLUON_LAYOUTS, BankConflictFreeTiling, as_issued, choose_layout
from tir_passes.analyses.bank_conflicts import analyze, wavefronts_under
from tir_passes.contracts.shared_layout import KEY, Counts, SharedLayoutDecision, SharedLayoutError, decision_of
from transpose import make_transpose


def _decisions(mod) -> dict[str, SharedLayoutDecision]:
    found = {}

    def visit(block):
        decision = decision_of(block)
        if decision is not None:
            found[decision.buffer] = decision

    import tvm_ffi

    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, visit))
    return found


def test_the_decision_survives_the_tvmscript_round_trip():
    """Written by the pass, printed, parsed back: the same typed decision."""
    fixed = BankConflictFreeTiling(GLUON_LAYOUTS)(schedule_transpose_vectorized(make_transpose(128, 128)))
    parsed = tvm.script.from_source(fixed.script())
    tvm.ir.assert_structural_equal(parsed, fixed)
    assert _decisions(parsed) == _decisions(fixed)
    decision = _decisions(parsed)["A_shared"]
    assert SharedLayoutDecision.from_annotation(tvm.runtime.convert(decision.to_annotation()), "here") == decision


@pytest.mark.parametrize("change, message", [
    ({"kind": "diagonal"}, "kind must be one of"),
    ({"kind": "swizzled", "vec": 3}, "vec must be a power of two"),
    ({"kind": "padded", "pad": 1, "vector": 4}, "breaks the 4-element alignment"),
    ({"kind": "nvmma", "swizzle_bytes": 48}, "swizzle_bytes must be one of"),
    ({"tile": [64]}, "at least two axes"),
])
def test_a_malformed_decision_is_named(change, message):
    raw = {**SharedLayoutDecision("A_shared", "float32", (64, 64)).to_annotation(), **change}
    with pytest.raises(SharedLayoutError, match=message):
        SharedLayoutDecision.from_annotation(tvm.runtime.convert(raw), "block A_shared")


@pytest.mark.parametrize("decision", [
    SharedLayoutDecision("S", "float32", (64, 64), "padded", pad=4),
    SharedLayoutDecision("S", "float32", (64, 64), "swizzled", vec=4, per_phase=4, max_phase=8),
    SharedLayoutDecision("S", "float16", (128, 64), "nvmma", swizzle_bytes=128),
    SharedLayoutDecision("S", "float16", (64, 128), "nvmma", swizzle_bytes=64),
], ids=["padded", "swizzled", "nvmma-128", "nvmma-64-two-blocks"])
def test_every_layout_gives_each_element_its_own_address_inside_the_allocation(decision):
    addresses = {decision.address((r, c)) for r in range(decision.tile[0]) for c in range(decision.tile[1])}
    assert len(addresses) == decision.tile[0] * decision.tile[1]
    assert max(addresses) < decision.allocated_elements


def test_the_modelled_padding_is_the_one_tvm_builds():
    """The model counts a padding on the row-major tile (wavefronts_under); TVM's build of the
    storage_align'd schedule gives the same counts for every access."""
    mod = schedule_transpose(make_transpose(64, 64))
    padded = BankConflictFreeTiling()(mod)
    decision = _decisions(padded)["A_shared"]
    modelled = [wavefronts_under(a, decision) for a in analyze(mod) if a.buffer == "A_shared"]
    built = [(a.wavefronts, a.ideal) for a in analyze(padded) if a.buffer == "A_shared"]
    assert decision.kind == "padded" and modelled == built == [(1, 1), (1, 1)]


def test_a_thread_reading_its_own_row_is_counted_as_the_vectors_gluon_issues():
    """Each thread of the scalar transpose reads 32 consecutive elements of a row: TVM emits
    scalar loads, Gluon ld.shared.v4 (16 bytes per lane, quarter-warp phases)."""
    (load,) = [a for a in analyze(schedule_transpose(make_transpose(64, 64))) if a.kind == "load"]
    assert (load.run, load.vector, load.executions) == (32, 1, 32)
    issued = as_issued(load, 4)
    assert (issued.vector, issued.bytes_per_lane, issued.executions) == (4, 16, 8)
    assert (issued.wavefronts, issued.ideal) == (32, 4)


def test_the_cuda_path_keeps_its_padding():
    """TVM's CUDA build realizes paddings only: the default pass pads the scalar transpose by one."""
    decision = _decisions(BankConflictFreeTiling()(schedule_transpose(make_transpose(64, 64))))["A_shared"]
    assert (decision.kind, decision.pad, decision.after.conflicts) == ("padded", 1, 0)


def test_a_swizzle_where_an_aligned_padding_leaves_conflicts():
    """The vectorized transpose stores float4 rows: a padding must keep 16-byte rows (4, 8, ...
    elements), and none of those removes the column reads' conflicts; an XOR swizzle does."""
    mod = schedule_transpose_vectorized(make_transpose(128, 128))
    sch = s_tir.Schedule(mod)
    buffer = sch.get(sch.get_sblock("A_shared")).writes[0].source
    padding_only = choose_layout(mod["main"], "A_shared", buffer, ("padded",), vectorize_runs=True)
    assert padding_only.kind == "padded" and padding_only.pad % 4 == 0 and padding_only.after.conflicts > 0
    chosen = _decisions(BankConflictFreeTiling(GLUON_LAYOUTS)(mod))["A_shared"]
    assert (chosen.kind, chosen.vec, chosen.after.conflicts) == ("swizzled", 4, 0)
    assert chosen.before.conflicts > 0 and chosen.allocated_elements == 64 * 64


def test_a_swizzle_where_the_aligned_padding_wastes_memory():
    """The scalar transpose read as Gluon issues it (float4 rows per thread): padding by 4 (1/8
    more memory) and a swizzle both remove the conflicts; the swizzle costs nothing."""
    chosen = _decisions(BankConflictFreeTiling(GLUON_LAYOUTS)(schedule_transpose(make_transpose(64, 64))))["A_shared"]
    assert chosen.kind == "swizzled" and chosen.after.conflicts == 0 and chosen.vector == 4


def test_tensor_core_operands_get_the_nvmma_layout():
    fixed = BankConflictFreeTiling(GLUON_LAYOUTS)(schedule_matmul_tensor_core(make_matmul(256, 128, 128, "float16", "float32")))
    decisions = _decisions(fixed)
    assert {d.kind for d in decisions.values()} == {"nvmma"}
    assert {d.swizzle_bytes for d in decisions.values()} == {128}
    assert all(d.before.conflicts > 0 and d.after == Counts(d.after.wavefronts, 0, d.after.worst)
               for d in decisions.values())


def test_the_annotation_key_is_the_contracts():
    script = BankConflictFreeTiling()(schedule_transpose(make_transpose(64, 64))).script()
    assert f'"{KEY}": {{' in script and '"kind": "padded"' in script


def _user_padded(offset: int):
    sch = s_tir.Schedule(schedule_transpose(make_transpose(64, 64)))
    sch.storage_align(sch.get_sblock("A_shared"), 0, axis=0, factor=32, offset=offset)
    return sch.mod


@pytest.mark.parametrize("layouts", [("padded",), GLUON_LAYOUTS], ids=["cuda", "gluon"])
def test_the_schedules_own_storage_align_is_replaced_by_the_decision(layouts):
    """A schedule that pads the tile itself (storage_align, offset 3): the pass decides on the
    row-major tile as for the unpadded schedule, says what it replaced, and only its own padding
    is left in the IR (counted on the padded addresses, the swizzle would keep 32 conflicts)."""
    plain = _decisions(BankConflictFreeTiling(layouts)(schedule_transpose(make_transpose(64, 64))))["A_shared"]
    fixed = BankConflictFreeTiling(layouts)(_user_padded(3))
    decision = _decisions(fixed)["A_shared"]
    assert decision == replace(plain, why=f"{plain.why}; replaces the schedule's storage_align [[0, 0, 32, 3]]")
    assert decision.after.conflicts == 0
    expected = "[[0, 0, 32, 1]]" if decision.kind == "padded" else None
    aligns = [str([[int(x) for x in e] for e in b.annotations["buffer_dim_align"]]) for b in _blocks(fixed)
              if "buffer_dim_align" in b.annotations]
    assert aligns == ([expected] if expected else [])


def _blocks(mod) -> list:
    import tvm_ffi

    found: list = []
    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, found.append))
    return found
