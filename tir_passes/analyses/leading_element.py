"""Whether a running maximum's first element is finite for every row that has a finite element:
then the online sums need no restart (OnlineSoftmax writes them without the -inf reset).

Why: OnlineSoftmax's sums restart from zero where the maximum before an element is -inf
(`Y = if_then_else(M_prev == -inf, 0, Y * F) + t`), which keeps a row whose leading elements are
all masked exact. Tiled, that restart is a `where` on the whole accumulator (attention's
BLOCK_I × BLOCK_D) and on the row sums, every step. It fires only where the maximum is still -inf
after the walk's first element and becomes finite later. When the first element (j at its loop's
start) is finite for every row, the maximum is finite from it on (a maximum only grows), so the
reset never holds after it; at the first element Y is still its init zero and F is 1 or
exp(-inf) = 0, so the reset changes nothing there either. A row whose elements are all -inf gives
NaN with or without it (exp(-inf - -inf)). Tiled, the walk's first tile holds the first element
(a tile window without a low bound starts at tile 0: tile_window.py), so the same holds per tile.

What is proven, of the max's element x at j = start, over the rows' domains:
- a top-level select `if_then_else(c, a, -inf)` (-inf: the max's identity) where each conjunct of
  c is proven at the start, or cannot turn true as j grows (a comparison linear in j whose sign
  keeps it false, `j <= i`, `j < i + 3`, or one free of j, `i < n`): where it fails at the start
  it fails along the whole row, whose elements are then all -inf; where it holds, x is a;
- a select whose condition is proven true (false) at the start is its first (second) branch; an
  undecided one is finite where both branches are (a finite fill such as -1e30);
- finite values: +, -, *, min, max, float casts, division by a non-zero constant, finite
  constants, integer expressions, and loads of an intermediate that one block writes: a sum
  reduction (`Y = Y + t`, T.init finite) of finite terms in which parameters may be read (a
  contraction such as Q·Kᵀ: its operands are assumed finite and their sums not to overflow, as
  flash attention assumes and tile_window.py assumes of V), or a store of a finite value.
A parameter read in x itself (an additive mask or bias, which may hold -inf by design), a window
with a low bound (`j >= i - 64`: the leading keys of later rows are masked) or any other select
is not proven: the sums keep their reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import blocks_under, conjuncts, contraction_term, select_parts, uses_var

_COMPARISONS = (tirx.LT, tirx.LE, tirx.GT, tirx.GE)
_ARITHMETIC = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max)
_DEPTH = 4   # producers followed from x: scores of a contraction, a copy of them, ...


class _Unproven(Exception):
    """Why the first element is not proven finite."""


@dataclass(frozen=True)
class _Context:
    analyzer: sym.Analyzer
    axis: tirx.Var
    start: object
    producers: dict          # intermediate buffer name -> the blocks that write it
    params: frozenset[str]


def first_element_finite(func: tirx.PrimFunc, block: s_tir.SBlock, element, axis: tirx.IterVar) -> tuple[bool, str]:
    """(proven, reason): whether `element` (the max's x in `block`, over its variables) is finite at
    `axis`'s start for every row whose elements are not all -inf."""
    analyzer = sym.Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    producers: dict[str, list] = {}
    for other in blocks_under(func.body):
        for region in other.writes:
            producers.setdefault(region.source.name, []).append(other)
    params = frozenset(p.name for p in func.params if tirx.is_buffer_var(p))
    context = _Context(analyzer, axis.var, axis.dom.min, producers, params)
    try:
        _masked_finite(context, element)
    except _Unproven as why:
        return False, str(why)
    return True, f"its first element ({axis.var.name} = {axis.dom.min}) is finite for every row that has one"


def _at_start(context: _Context, expr):
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: context.start if v.same_as(context.axis) else v))


def _proven(context: _Context, cond) -> bool:
    return context.analyzer.can_prove(_at_start(context, cond))


def _masked_finite(context: _Context, expr) -> None:
    """x's top level: selects whose else-branch is -inf may mask a whole row."""
    parts = select_parts(expr)
    if parts is not None and _is_minus_inf(parts[2]):
        for part in conjuncts(parts[0]):
            if not (_proven(context, part) or _stays_false(context, part)):
                raise _Unproven(f"the mask `{part}` may hide the first element of a row that has others")
        _masked_finite(context, parts[1])
        return
    _finite(context, expr, parameters=False, depth=_DEPTH)


def _stays_false(context: _Context, cond) -> bool:
    """False at the start means false along the whole row: free of j, or a comparison whose
    difference moves, per step of j, only away from holding."""
    if not uses_var(cond, context.axis):
        return True
    if not isinstance(cond, _COMPARISONS) or not str(cond.a.ty.dtype).startswith(("int", "uint")):
        return False
    difference = cond.a - cond.b
    step = tvm_ffi.structural_map(difference, (tirx.Var, lambda v: v + 1 if v.same_as(context.axis) else v))
    slope = context.analyzer.simplify(step - difference)
    if not isinstance(slope, tirx.IntImm):
        return False
    # a < b holds while a - b < 0: once false, a non-decreasing a - b keeps it false
    return slope.value >= 0 if isinstance(cond, (tirx.LT, tirx.LE)) else slope.value <= 0


def _finite(context: _Context, expr, parameters: bool, depth: int) -> None:
    dtype = str(expr.ty.dtype)
    if dtype.startswith(("int", "uint", "bool")):
        return
    if isinstance(expr, tirx.FloatImm):
        if not math.isfinite(expr.value):
            raise _Unproven(f"the constant {expr.value} is not finite")
        return
    if isinstance(expr, tirx.Cast):
        return _finite(context, expr.value, parameters, depth)
    if isinstance(expr, _ARITHMETIC):
        _finite(context, expr.a, parameters, depth)
        return _finite(context, expr.b, parameters, depth)
    if isinstance(expr, tirx.Div) and isinstance(expr.b, tirx.FloatImm) and expr.b.value != 0:
        return _finite(context, expr.a, parameters, depth)
    if select_parts(expr) is not None:
        for branch in _taken_branches(context, select_parts(expr)):
            _finite(context, branch, parameters, depth)
        return None
    if isinstance(expr, tvm.ir.TensorLoad):
        return _finite_load(context, expr, parameters, depth)
    raise _Unproven(f"`{expr}` is not proven finite")


def _taken_branches(context: _Context, parts: tuple) -> tuple:
    """The branch the select takes at the first element where its condition is decided there,
    else both (a finite fill, `-1e30`, is as good as the value it replaces)."""
    cond, a, b = parts
    if _proven(context, cond):
        return (a,)
    if _proven(context, tirx.Not(cond)):
        return (b,)
    return a, b


def _finite_load(context: _Context, load, parameters: bool, depth: int) -> None:
    name = load.source.name
    if name in context.params:
        if parameters:
            return  # a contraction's operand: assumed finite
        raise _Unproven(f"it reads the parameter {name}, which may hold -inf (a mask or a bias)")
    writers = context.producers.get(name, [])
    if len(writers) != 1 or depth == 0:
        raise _Unproven(f"{name} is not written by one block whose values are proven finite")
    block = writers[0]
    body = block.body
    if not isinstance(body, tirx.BufferStore) or not body.buffer.same_as(load.source):
        raise _Unproven(f"block {block.name_hint} writing {name} is not one store")
    term = contraction_term(block)
    if term is None:
        return _finite(context, body.value, parameters, depth - 1)
    init = block.init
    if not isinstance(init, tirx.BufferStore):
        raise _Unproven(f"block {block.name_hint}'s T.init is not one store")
    _finite(context, init.value, True, depth - 1)
    _finite(context, term, True, depth - 1)


def _is_minus_inf(expr) -> bool:
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return isinstance(expr, tirx.FloatImm) and expr.value == float("-inf")


def finite_constant(expr) -> bool:
    """`expr` is a finite float constant (through casts): a maximum that starts there is never -inf."""
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return isinstance(expr, tirx.FloatImm) and math.isfinite(expr.value)
