"""The order of a reduction's fold: element positions, and what the order decides.

TIR runs a reduction block's elements in loop order. A selection (arg-max) depends on that order
where keys tie, so the lowering numbers the elements: the position of an element is its reduction
variables, row-major in declaration order, from 0. That is the fold order when the block's loops
walk its reduction variables in declaration order, each upwards (`fold_order_problem` checks it
with the arithmetic analyzer, on the loops after Tiling's splits). The same question, "does this
value grow at every step of the fold?", decides tie clauses such as topi's `idx < k`
(`old_versus_new`).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import uses_var
from tir_passes.infra.pass_util import static_int

INT32_POSITIONS = 2**31 - 1   # int32 positions stay below INT32_MAX, which marks lanes that never win


def _substitute(expr, values: dict[int, object]):
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: values.get(v.__chandle__(), v)))


def strictly_increasing(expr, variables: list[tuple[tirx.Var, object, object]]) -> bool:
    """Whether `expr` grows at every step when `variables` ((var, min, extent), outermost first)
    run like nested loops: advancing variable j and resetting the later ones to their minimum
    must increase it, for every j."""
    analyzer = sym.Analyzer()
    for var, low, extent in variables:
        analyzer.bind(var, tvm.ir.Range.from_min_extent(low, extent))
    for j, (var, low, extent) in enumerate(variables):
        later = variables[j + 1:]
        before = _substitute(expr, {v.__chandle__(): lo + ext - 1 for v, lo, ext in later})
        after = _substitute(expr, {var.__chandle__(): var + 1, **{v.__chandle__(): lo for v, lo, _ in later}})
        with analyzer.constraint_scope(var + 1 < low + extent):
            if not analyzer.can_prove(after > before):
                return False
    return True


def _reduce_vars(block: s_tir.SBlock) -> list[tirx.IterVar]:
    return [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]


def old_versus_new(new, init, block: s_tir.SBlock) -> int | None:
    """-1 when a payload's old value is below its new value `new` at every element of the fold,
    1 when above, None when unknown. The old value is its T.init value `init` or the new value of
    an earlier element, so it suffices that the new values grow (fall) in fold order and the init
    lies below (above) the first."""
    if init is None:
        return None
    ivs = _reduce_vars(block)
    variables = [(iv.var, iv.dom.min, iv.dom.extent) for iv in ivs]
    first = _substitute(new, {iv.var.__chandle__(): iv.dom.min for iv in ivs})
    analyzer = sym.Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    if strictly_increasing(new, variables) and analyzer.can_prove(init < first):
        return -1
    if strictly_increasing(-new, variables) and analyzer.can_prove(init > first):
        return 1
    return None


def fold_order_problem(realize: s_tir.SBlockRealize, loops: list[tirx.For]) -> str | None:
    """Why the loops around the block (outermost first) do not walk its reduction variables in
    declaration order, each ascending; None when they do (positions are then the fold order)."""
    last = -1
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.iter_type != tirx.IterVar.CommReduce:
            continue
        own = [index for index, loop in enumerate(loops) if uses_var(value, loop.loop_var)]
        if not own:
            continue
        if own[0] <= last:
            return f"its loops walk reduction variable {iv.var.name} before or together with an earlier one"
        last = own[-1]
        if not strictly_increasing(value, [(loops[i].loop_var, loops[i].min, loops[i].extent) for i in own]):
            return f"its loops do not walk reduction variable {iv.var.name} upwards (binding `{value}`)"
    return None


def position_dtype(block: s_tir.SBlock) -> str:
    count = 1
    for iv in _reduce_vars(block):
        extent = static_int(iv.dom.extent)
        if extent is None:
            return "int64"
        count *= extent
    return "int32" if count < INT32_POSITIONS else "int64"


def linear_position(block: s_tir.SBlock, dtype: str):
    """The element's position in fold order: its reduction variables, row-major in declaration
    order, counted from 0."""

    def as_dtype(expr):
        return expr if str(expr.ty.dtype) == dtype else tirx.Cast(dtype, expr)

    position = tirx.const(0, dtype)
    for iv in _reduce_vars(block):
        position = position * as_dtype(iv.dom.extent) + as_dtype(iv.var - iv.dom.min)
    return sym.Analyzer().simplify(position)
