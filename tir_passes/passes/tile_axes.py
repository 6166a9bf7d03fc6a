"""Which loops of a fused nest share one tile axis (Tiling's `_plan_fused`).

Loops of different sub-nests that index the same axis of the same buffer with whole tiles of equal extent walk
the same columns: they take one tile axis, so each buffer tile is loaded once and the lowering's registers line
up (LayerNorm's statistics and its normalize over one row tile; attention backward's dO for dP = dO·Vᵀ and for
dV += P·dO). A loop around several blocks is tiled by the first of them; the buffer axes the others index with
it are covered by that tile too (`share_whole_tile`). And how deep a fused nest's contractions are
(`contraction_depth`: attention's head dimension), which Tiling's online tiles are sized by.
Assumes: the realizes of one fused nest, their loops keyed as Tiling keys them.
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.analyses.nest import block_accesses, contraction_operands, contraction_term
from tir_passes.infra.pass_util import static_int
from tir_passes.passes.tiling_types import TileChoice


def indexed_axes(realize, loop: tirx.For) -> set[tuple[str, int]]:
    """(buffer, axis) pairs that the loop indexes directly: loops of different sub-nests that index
    the same axis of the same buffer walk the same columns and can share one tile axis."""
    iter_var = next(
        (
            iv.var
            for iv, v in zip(realize.block.iter_vars, realize.iter_values)
            if isinstance(v, tirx.Var) and v.same_as(loop.loop_var)
        ),
        None,
    )
    if iter_var is None:
        return set()
    axes = set()
    for access in block_accesses(realize.block):
        for axis, index in enumerate(access.indices):
            if isinstance(index, tirx.Var) and index.same_as(iter_var):
                axes.add((access.name, axis))
    return axes


def share_whole_tile(shared_axes: dict, choice: TileChoice, realize, loop: tirx.For) -> None:
    """A whole tile an earlier block chose for a loop they share covers the buffer axes this block indexes
    with it too: a later loop indexing one of them takes the same axis (dV's dO[i, d] and dP's dO[i, ax0],
    whose loop S = K·Qᵀ tiled first: one tile of dO per step, not two)."""
    if choice.whole:
        for key in indexed_axes(realize, loop):
            shared_axes.setdefault((static_int(loop.extent), key), choice.axis)


def contraction_depth(subs, walk: tirx.For, shared, under_walk: bool = False) -> int | None:
    """The largest extent of a contraction block's loop that is neither the online `walk` nor a shared
    (program id) loop: attention's head dimension. `under_walk`: that of the sums `walk` encloses
    only, products of tl.dot operands or not: how many products a batched or matrix-vector walk
    makes a key (decode attention's head dimension, its query with or without a unit axis), not
    the second pass's walk over the keys again. None where no such loop has a static extent."""
    def counted(loops, realize) -> bool:
        if under_walk:
            return contraction_term(realize.block) is not None and any(loop.same_as(walk) for loop in loops)
        return contraction_operands(realize.block) is not None

    depth = max((static_int(loop.extent) or 0 for loops, realize in subs if counted(loops, realize)
                 for loop in loops if not loop.same_as(walk) and not any(loop.same_as(s) for s in shared)), default=0)
    return depth or None
