"""Column reductions: `S[j] = Σ_i X[i, j]·W[i, j]` (a norm's weight gradient, a bias gradient), a sum
whose every matrix load is contiguous along a spatial loop and strided along the reduction.

Why: such a reduction walks its reduced axis one row apart; as a row tile (what a row reduction
gets) each program reads one element per row and per 32-byte sector. SplitReduction (rows into
partials, for programs) and Tiling (column tiles stepped down the rows, for coalescing) ask the
same question, answered here once.
Assumes: loops bound one to one to the block's iteration variables (the nests the pipeline makes).
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.analyses.nest import block_accesses, bound_iter_var, vars_of


def reduces_down_columns(reduction: tirx.For, column: tirx.For, realize) -> bool:
    """Every load of a matrix (not the accumulator's own read) indexes its contiguous axis by `column`'s
    variable and not by `reduction`'s."""
    column_iv, reduced_iv = bound_iter_var(realize, column.loop_var), bound_iter_var(realize, reduction.loop_var)
    if column_iv is None or reduced_iv is None:
        return False
    accesses = block_accesses(realize.block)
    stored = {a.buffer.name for a in accesses if a.is_store}
    loads = [a for a in accesses if not a.is_store and a.buffer.name not in stored and len(a.indices) >= 2]
    last = [{v.name for v in vars_of(a.indices[-1])} for a in loads]
    return bool(loads) and all(column_iv.var.name in names and reduced_iv.var.name not in names for names in last)


def column_loop(reduction: tirx.For, spatial: list, realize) -> tirx.For | None:
    """The spatial loop (innermost first) along which the reduction over `reduction` reads columns."""
    return next((loop for loop in reversed(spatial) if reduces_down_columns(reduction, loop, realize)), None)
