"""CanonicalReductionOrder: the reduction loops of a nest inside its spatial loops, in the order of
the axes they index (the one nearest a read's contiguous axis innermost).

Why: `for k, i, j` and `for i, j, k` around one matmul block compute the same thing, and so do a
convolution's `rh, rw, rc` and `rc, rh, rw`; the later passes read the loop order (the innermost
reduction loop is the one Tiling steps, the rows LoopFusion fuses are the outer spatial loops).
Without one order the kernel plan depends on how the user wrote the grid (tests/plan_invariance).

What it rewrites: a top-level perfect nest of serial loops starting at 0 without annotations,
around one block (any body: an arg-max's stores and lets too) whose variables are bound one to
one to the loops (T.axis.remap): its spatial
loops keep their relative order (CanonicalLoopOrder's) and come first, then its reduction loops,
ordered by where they index the block's loads: by the fewest axes between the axis a reduction
variable indexes and a load's last (contiguous) axis, innermost the nearest, then by its smaller
coefficient in that index (`vr1 * 4 + vr2`: vr2 inner), then by the larger extent outer, then as
written. A reduction variable no load indexes goes outermost.

Sound: moving a reduction loop inside a spatial one changes nothing any element sees (each
element's reduction runs over the same values in the same order; T.init still runs before its
first update). Reordering reduction loops among themselves is exact for a max, a min or an
integer sum; for a float sum it moves the additions' order, as every tiled reduction of the
kernels does anyway (tl.sum, tl.dot): the numerics check compares the result with TVM's build of
the input, as after every pass. Any other update (an arg-max's selection, whose ties go to the
first element in loop order; a running value read by a second store) depends on the order its
elements arrive in, so its reduction loops keep their written order: only the spatial loops move
(random inputs have no ties, so the numerics check could not see the difference).

Assumes: CanonicalLoopOrder ran (it orders the spatial loops; this pass keeps their order).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import vars_of
from tir_passes.infra.pass_util import s_tir_pass
from tir_passes.passes.canonical_loop_order import loop_of_block_var, plain_loop, reorder_nests

REDUCE = tirx.IterVar.CommReduce
UNINDEXED = 1 << 30   # the distance of a reduction variable no load indexes: outermost


def _loads(expr) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, found.append), order="pre")
    return found


def _coefficient(index, var: tirx.Var) -> int:
    """The constant coefficient of `var` in `index` (a large one where the index is not linear in it)."""
    found = sym.detect_linear_equation(index, [var])
    if len(found) == 2 and isinstance(found[0], tirx.IntImm):
        return abs(int(found[0].value))
    return UNINDEXED


def reduction_key(var: tirx.Var, loads: list, extent: int) -> tuple[int, int, int]:
    """(distance from a contiguous axis, coefficient, -extent): the smallest is the innermost loop."""
    best = (UNINDEXED, UNINDEXED)
    for load in loads:
        rank = len(load.indices)
        for axis, index in enumerate(load.indices):
            if any(v.same_as(var) for v in vars_of(index)):
                best = min(best, (rank - 1 - axis, _coefficient(index, var)))
    return best + (-extent,)


COMMUTATIVE = (tirx.Add, tirx.Mul, tirx.Max, tirx.Min)


def _order_free(block: s_tir.SBlock) -> bool:
    """Whether the block's update is one store of a commutative combine of the stored element."""
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, COMMUTATIVE):
        return False
    value = store.value

    def is_self(expr) -> bool:
        return (isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(store.buffer)
                and len(expr.indices) == len(store.indices)
                and all(tvm_ffi.structural_equal(a, b) for a, b in zip(expr.indices, store.indices)))
    return is_self(value.a) or is_self(value.b)


def canonical_order(loops: list[tirx.For], realize: s_tir.SBlockRealize) -> list[int] | None:
    """The permutation of `loops` (new position -> old index), or None to leave the nest."""
    block = realize.block
    if not all(plain_loop(loop) for loop in loops):
        return None
    loop_of = loop_of_block_var(realize, loops)
    if loop_of is None:
        return None
    kind_of = {loop_of[iv.var.__chandle__()]: iv for iv in block.iter_vars}
    if any(iv.iter_type not in (tirx.IterVar.DataPar, REDUCE) for iv in kind_of.values()):
        return None
    spatial = [index for index in range(len(loops)) if kind_of[index].iter_type != REDUCE]
    reductions = [index for index in range(len(loops)) if kind_of[index].iter_type == REDUCE]
    loads = _loads(block.body)

    def key(index: int) -> tuple:
        extent = loops[index].extent
        size = int(extent.value) if isinstance(extent, tirx.IntImm) else 0
        return reduction_key(kind_of[index].var, loads, size)

    if not _order_free(block):
        return spatial + reductions
    inner_first = sorted(reductions, key=lambda index: (key(index), -index))   # ties: as written
    return spatial + list(reversed(inner_first))


def canonical_reduction_order(func: tirx.PrimFunc) -> tirx.PrimFunc:
    return reorder_nests(func, canonical_order)


def CanonicalReductionOrder():
    return s_tir_pass("CanonicalReductionOrder", canonical_reduction_order)
