"""InlineElementwise: every elementwise block that writes an intermediate is inlined into the
blocks that read it (TVM's compute_inline), before any pass decides.

Why: `masked = T.if_then_else(vj <= vi, s, -inf)` in a block of its own, then `max(M, masked)`,
and the same selection written inline in the max are one computation; so are `P = exp(s - m) / l`
then `Σ P · V`, and the division written in the sum. The canonical forms after it (CanonicalMasks,
FactorOutOfSums) and the decisions (OnlineSoftmax, the tile window) see one form: expressions
inlined. LoopFusion inlined these blocks anyway, after OnlineSoftmax; doing it first changes no
value (compute_inline substitutes the expression, TVM checks the block is inlinable). Its
decisions (each inline with the bytes it saves, or TVM's refusal) open LoopFusion's record, the
root's "fusion.decisions": they are the first of LoopFusion's rewrites, made earlier.

Assumes: HoistAllocations ran (intermediates are root allocations).
"""

from __future__ import annotations

from tvm import s_tir, tirx

from tir_passes.contracts.fusion_record import FusionStep, write_fusion
from tir_passes.passes.loop_fusion import inline_elementwise
from tir_passes.infra.pass_util import root_block, s_tir_pass



def inline_elementwise_blocks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    intermediates = {b.name for b in root_block(func).alloc_buffers}
    if not intermediates:
        return func
    sch = s_tir.Schedule(func)
    decisions: list[FusionStep] = []
    inline_elementwise(sch, intermediates, decisions)
    if not decisions:
        return func
    return write_fusion(sch.mod["main"], decisions)   # LoopFusion's record, which LoopFusion extends


def InlineElementwise():
    return s_tir_pass("InlineElementwise", inline_elementwise_blocks)
