"""Streaming for LoopFusion: a contraction whose rows do not fit in registers, read by a block that
reduces along the axis the contraction produces, is computed one element per step of that
reduction instead of going through memory.

Why: the chain "contraction, elementwise, reduction over the produced axis" is flash attention's
walk: `S[i, j] = Σ_d Q[i, d]·K[j, d]`, then `m[i] = max_j S[i, j]`, `l[i] = Σ_j exp(S[i, j] - m[i])`
or `O[i, e] += f(S[i, j])·V[j, e]`. A row of S over j is too long for registers, but the reader
consumes it element by element along j: with the producer moved under the reader's j loop (TVM's
compute_at), each step computes the tile of S it reads, and Tiling walks the loop in tiles (a
`tl.dot` per step). OnlineSoftmax does this for a running maximum with rescaled sums; here the
statistics the reader needs are inputs (a backward's recomputed or saved row statistics), so no
correction is needed: a plain reduction, walked.

What it decides: `stream_order` gives the reader's loops in the order that puts the loops carrying
the produced element's index first (a contraction's reader usually iterates its own spatial axis `e`
before the reduction `j`; the sum over j is then taken in the same order per element, so the value
is unchanged), and the order of the intermediate's axes that makes the reduced ones last: a reader
that reduces along an earlier axis (dK's reader of S[i, j] reduces over the query rows i) gets the
intermediate transposed (it is the reader's own recomputed copy, so nothing else sees the layout)
and the producer's loops swapped to match, so that the reader's rows become the program's rows and
the reduction the walk (FlashAttention-2's dK/dV loop over query tiles per key tile).
Assumes: HoistAllocations ran.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx



def _loads_of(block: s_tir.SBlock, buf) -> list:
    loads: list = []
    tvm_ffi.structural_walk(
        block.body, (tvm.ir.TensorLoad, lambda l: loads.append(l) if l.source.same_as(buf) else None)
    )
    return loads


def stream_order(loops: list[tirx.For], realize: s_tir.SBlockRealize, buf) -> tuple[list[int], list[tirx.For], str]:
    """(axes, loops, '') or ([], [], why not). `axes`: the axes of `buf` in the order the reader
    streams them, those it computes (its spatial variables) first, then those it reduces along (dK's
    reader of S[i, j] computes rows j and reduces over i: (0, 1, 3, 2) for S[b, h, i, j]); `loops`:
    the reader's loops in streaming order, the loops binding those axes first, then the others as
    they were. At least one axis must be a reduction of the reader (else it is an ordinary fusion
    over shared axes)."""
    reads = _loads_of(realize.block, buf)
    if not reads or any(not tvm_ffi.structural_equal(r.indices, reads[0].indices) for r in reads):
        return [], [], f"its reader reads {buf.name} at more than one index"
    bound = {iv.var: (value, iv.iter_type) for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    per_axis = []
    for index in reads[0].indices:
        value, kind = bound.get(index, (None, None)) if isinstance(index, tirx.Var) else (None, None)
        loop = next((l for l in loops if isinstance(value, tirx.Var) and l.loop_var.same_as(value)), None)
        if loop is None:
            indices = ", ".join(str(i) for i in reads[0].indices)
            return [], [], f"its reader reads {buf.name}[{indices}], not one loop per index"
        per_axis.append((loop, kind == tirx.IterVar.CommReduce))
    axes = [a for a, (_, red) in enumerate(per_axis) if not red] + [a for a, (_, red) in enumerate(per_axis) if red]
    if len(axes) == len([a for a, (_, red) in enumerate(per_axis) if not red]):
        return [], [], f"its reader does not reduce along an axis of {buf.name}"
    leading = [per_axis[a][0] for a in axes]
    return axes, leading + [l for l in loops if not any(l.same_as(k) for k in leading)], ""
