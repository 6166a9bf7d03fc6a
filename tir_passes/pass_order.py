"""The default pipeline's passes, in order: names and import paths only, so that what needs the
order without running it (`tir-triton list-passes`, a reproducer's import line) imports no TVM.
pipeline.default_pipeline builds the passes from this table; pipeline.py's docstring says why
this order.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassEntry:
    name: str            # the pass's `info.name` (what dumps, tables and --disable use)
    import_path: str     # "module:Class"
    takes_gpu: bool      # the class is called with the GPU model the pipeline sizes tiles for, and limits=
    takes_deterministic: bool = False   # the class takes deterministic=True (docs/determinism.md)


DEFAULT_ORDER = (
    PassEntry("HoistAllocations", "tir_passes.passes.hoist_allocations:HoistAllocations", False),
    PassEntry("ScalarTemporaries", "tir_passes.passes.scalar_temporaries:ScalarTemporaries", False),
    PassEntry("CanonicalSplitAxes", "tir_passes.passes.canonical_split_axes:CanonicalSplitAxes", False),
    # the canonical forms (docs/canonical-forms.md): one way of writing each computation, before any decision
    PassEntry("CanonicalBlockOrder", "tir_passes.passes.canonical_block_order:CanonicalBlockOrder", False),
    PassEntry("CanonicalLoopOrder", "tir_passes.passes.canonical_loop_order:CanonicalLoopOrder", False),
    PassEntry("CanonicalReductionOrder", "tir_passes.passes.canonical_reduction_order:CanonicalReductionOrder", False),
    PassEntry("InlineElementwise", "tir_passes.passes.inline_elementwise:InlineElementwise", False),
    PassEntry("CanonicalConstants", "tir_passes.passes.canonical_constants:CanonicalConstants", False),
    PassEntry("CanonicalCasts", "tir_passes.passes.canonical_casts:CanonicalCasts", False),
    PassEntry("CanonicalUpdates", "tir_passes.passes.canonical_updates:CanonicalUpdates", False),
    PassEntry("CanonicalInits", "tir_passes.passes.canonical_inits:CanonicalInits", False),
    PassEntry("CanonicalMasks", "tir_passes.passes.canonical_masks:CanonicalMasks", False),
    PassEntry("FactorOutOfSums", "tir_passes.passes.factor_out_of_sums:FactorOutOfSums", False),
    PassEntry("RowPartials", "tir_passes.passes.row_partials:RowPartials", True, True),
    PassEntry("SplitReduction", "tir_passes.passes.split_reduction:SplitReduction", True, True),
    PassEntry("OnlineSoftmax", "tir_passes.passes.online_softmax:OnlineSoftmax", True),
    PassEntry("LoopFusion", "tir_passes.passes.loop_fusion:LoopFusion", True),
    PassEntry("SplitOnlineRows", "tir_passes.passes.split_online_rows:SplitOnlineRows", True, True),
    PassEntry("ShareContractionLoops", "tir_passes.passes.share_contraction_loops:ShareContractionLoops", False),
    PassEntry("RoundOperandsOnce", "tir_passes.passes.round_operands_once:RoundOperandsOnce", True),
    PassEntry("BufferLayout", "tir_passes.passes.buffer_layout:BufferLayout", False),
    PassEntry("RemoveUnitLoops", "tir_passes.passes.remove_unit_loops:RemoveUnitLoops", False, True),
    PassEntry("NormalizeLoopStarts", "tir_passes.passes.normalize_loop_starts:NormalizeLoopStarts", False),
    PassEntry("BankConflictFreeTiling", "tir_passes.passes.bank_conflict_free_tiling:BankConflictFreeTiling", False),
    PassEntry("Tiling", "tir_passes.passes.tiling:Tiling", True, True),
)


def default_pass_names() -> list[str]:
    return [entry.name for entry in DEFAULT_ORDER]
