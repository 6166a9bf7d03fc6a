"""CanonicalMasks: one way of writing a mask, whichever the user chose.

What it rewrites, in every block of the function:
- a negated comparison of integers, `T.Not(vj <= vi)`, as the comparison it means, `vj > vi`
  (integers have no NaN, so `not (a <= b)` is `a > b`);
- `T.if_then_else(c, a, b)` as `T.Select(c, a, b)` where evaluating both branches is safe: every
  load in a branch is also evaluated unconditionally (it is the block's store target, or read in
  the condition or outside any selection of the same value), and no branch divides integers. The
  later passes and the lowering recognize selection reductions (arg-max) written with Select;
- a large negative constant c <= MASKED_LIMIT as a selection's masked value, where the selection
  varies with a reduction variable j of its block and sits in a max reduction's update
  (`Y = max(Y, sel)`) or in an exponential of it (`exp(sel - x)`, `exp((sel - x) * k)`,
  `exp(sel * k - x)`, k > 0), as -inf: then the tile window (tile_window.py) and OnlineSoftmax
  see it as the identity it stands for.

Soundness of the masked value (the arith analyzer proves the first part): every row keeps an
unmasked element, proven by a witness j (the domain's first or last element, or another block
variable) for which the condition is false (or true, for the masked value in the false branch)
whatever the other variables are. Then a row's max is an unmasked value either way, and
exp(c - m) and exp(-inf - m) are both exactly 0 in float32 when m > c + 104 (exp underflows
below -103.9). Assumed, as every "large negative" mask assumes it: the unmasked values that the
maximum m takes are above c + 104 (with c = -1e4: above -9896). The numerics check after the
pass compares the result with the input's.

Why: the tile window proves from the masks which tiles fold only identities, and only -inf
(max's identity) and 0 are identities; masks written with `T.if_then_else` or a negation, or
with -1e30, would lose causal attention's window (docs/canonical-forms.md).

Assumes: nothing beyond well-formed S-TIR.
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import call_name, is_self_load
from tir_passes.infra.pass_util import replace_block, s_tir_pass

MASKED_LIMIT = -1e4          # a constant at most this negative, masked into a max or an exp, means -inf
REDUCE = tirx.IterVar.CommReduce
_NEGATED = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT, tirx.EQ: tirx.NE, tirx.NE: tirx.EQ}


# --- negations -------------------------------------------------------------------------------------
def _without_negation(node: tirx.Not):
    inner = node.a
    if isinstance(inner, tirx.Not):
        return inner.a
    for kind, negated in _NEGATED.items():
        if isinstance(inner, kind) and "int" in str(inner.a.ty.dtype) and "int" in str(inner.b.ty.dtype):
            return negated(inner.a, inner.b)
    return node


# --- if_then_else as Select ------------------------------------------------------------------------
def _loads(expr) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, found.append))
    return found


def _unconditional_loads(expr) -> list:
    """Loads of `expr` evaluated whatever the selections in it choose."""
    found: list = []

    def visit(node, visitor):
        if call_name(node) == "if_then_else":
            visitor.visit(node.args[0])
            return
        if isinstance(node, tvm.ir.TensorLoad):
            found.append(node)
        visitor.default_visit(node)

    tvm_ffi.structural_visit(expr, [(tvm.ir.Call, visit), (tvm.ir.TensorLoad, visit)])
    return found


def _divides_integers(expr) -> bool:
    found: list = []
    kinds = (tirx.Div, tirx.FloorDiv, tirx.FloorMod, tirx.Mod)
    tvm_ffi.structural_walk(expr, (kinds, lambda n: found.append(n) if "int" in str(n.ty.dtype) else None))
    return bool(found)


def _as_selects(store: tirx.BufferStore, stores: list):
    safe = [load for other in stores for load in
            [tirx.BufferLoad(other.buffer, list(other.indices))] + _unconditional_loads(other.value)]

    def is_safe(branch) -> bool:
        return not _divides_integers(branch) and all(
            any(tvm_ffi.structural_equal(load, known) for known in safe) for load in _loads(branch))

    def rewrite(call):
        if call_name(call) != "if_then_else":
            return call
        cond, a, b = call.args
        if not (is_safe(a) and is_safe(b)):
            return call
        return tirx.Select(cond, a, b)

    value = tvm_ffi.structural_map(store.value, (tvm.ir.Call, rewrite))
    return store if value.same_as(store.value) else _with_value(store, value)


def _with_value(store: tirx.BufferStore, value) -> tirx.BufferStore:
    return tirx.BufferStore(store.buffer, value, store.indices, span=store.span)


# --- large negative masked values ------------------------------------------------------------------
def _large_negative(expr) -> bool:
    return isinstance(expr, tirx.FloatImm) and math.isfinite(expr.value) and expr.value <= MASKED_LIMIT


def _selection(expr):
    """(cond, a, b) of a Select or if_then_else, else None."""
    if isinstance(expr, tirx.Select):
        return expr.condition, expr.true_value, expr.false_value
    if call_name(expr) == "if_then_else":
        return tuple(expr.args)
    return None


def _with_branches(expr, a, b):
    if isinstance(expr, tirx.Select):
        return tirx.Select(expr.condition, a, b)
    return tirx.if_then_else(expr.args[0], a, b)


def _every_row_keeps_one(cond, masked_when: bool, block: s_tir.SBlock) -> bool:
    """Some j of a reduction domain leaves the element unmasked, whatever the other variables."""
    for iv in block.iter_vars:
        if iv.iter_type != REDUCE or not _uses(cond, iv.var):
            continue
        others = [other for other in block.iter_vars if not other.var.same_as(iv.var)]
        for witness in _witnesses(iv, others):
            analyzer = sym.Analyzer()
            for other in others:
                analyzer.bind(other.var, other.dom)
            kept = tvm_ffi.structural_map(cond, (tirx.Var, lambda v, w=witness, j=iv.var: w if v.same_as(j) else v))
            if masked_when:
                kept = tirx.Not(kept)
            if _fits(analyzer, witness, iv.dom) and analyzer.can_prove(kept):
                return True
    return False


def _witnesses(iv: tirx.IterVar, others) -> list:
    first, extent = iv.dom.min, iv.dom.extent
    return [first, first + extent - 1] + [other.var for other in others if other.var.ty.dtype == iv.var.ty.dtype]


def _fits(analyzer, witness, dom) -> bool:
    return analyzer.can_prove(tirx.all(dom.min <= witness, witness < dom.min + dom.extent))


def _uses(expr, var) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: found.append(v) if v.same_as(var) else None))
    return bool(found)


def _unmasked_to_inf(sel, block: s_tir.SBlock):
    """`sel` with its large negative masked value as -inf, when the rule holds."""
    parts = _selection(sel)
    if parts is None:
        return sel
    cond, a, b = parts
    if _large_negative(a) and not _large_negative(b) and _every_row_keeps_one(cond, True, block):
        return _with_branches(sel, tirx.FloatImm(a.ty.dtype, float("-inf")), b)
    if _large_negative(b) and not _large_negative(a) and _every_row_keeps_one(cond, False, block):
        return _with_branches(sel, a, tirx.FloatImm(b.ty.dtype, float("-inf")))
    return sel


def _positive_constant(expr) -> bool:
    return isinstance(expr, tirx.FloatImm) and expr.value > 0


def _in_exponent(arg, block):
    """An exp's argument with its masked selections rewritten (sel - x, (sel - x) * k, sel * k - x)."""
    if isinstance(arg, tirx.Mul) and _positive_constant(arg.b):
        inner = _in_exponent(arg.a, block)
        return arg if inner.same_as(arg.a) else tirx.Mul(inner, arg.b)
    if isinstance(arg, tirx.Sub):
        first = arg.a
        if isinstance(first, tirx.Mul) and _positive_constant(first.b):
            inner = _unmasked_to_inf(first.a, block)
            first = first if inner.same_as(first.a) else tirx.Mul(inner, first.b)
        else:
            first = _unmasked_to_inf(first, block)
        return arg if first.same_as(arg.a) else tirx.Sub(first, arg.b)
    return arg


def _masked_values(store: tirx.BufferStore, block: s_tir.SBlock):
    if not any(iv.iter_type == REDUCE for iv in block.iter_vars):
        return store
    value = store.value
    if isinstance(value, tirx.Max) and is_self_load(value.a, store):
        operand = _unmasked_to_inf(value.b, block)
        value = value if operand.same_as(value.b) else tirx.Max(value.a, operand)
    elif isinstance(value, tirx.Max) and is_self_load(value.b, store):
        operand = _unmasked_to_inf(value.a, block)
        value = value if operand.same_as(value.a) else tirx.Max(operand, value.b)

    def exponent(call):
        if call_name(call) != "exp":
            return call
        arg = _in_exponent(call.args[0], block)
        return call if arg.same_as(call.args[0]) else tirx.exp(arg)

    value = tvm_ffi.structural_map(value, (tvm.ir.Call, exponent))
    return store if value.same_as(store.value) else _with_value(store, value)


# --- the pass ----------------------------------------------------------------------------------------
def _canonical_store(store: tirx.BufferStore, stores: list, block: s_tir.SBlock) -> tirx.BufferStore:
    value = tvm_ffi.structural_map(store.value, (tirx.Not, _without_negation))
    new = store if value.same_as(store.value) else _with_value(store, value)
    return _masked_values(_as_selects(new, stores), block)


def _canonical_block(block: s_tir.SBlock) -> s_tir.SBlock:
    """A block whose body is a store, or a sequence of stores (an arg-max's value and index)."""
    body = block.body
    stores = [body] if isinstance(body, tirx.BufferStore) else list(body.seq) if isinstance(body, tirx.SeqStmt) else []
    if not stores or not all(isinstance(s, tirx.BufferStore) for s in stores):
        return block
    new = [_canonical_store(store, stores, block) for store in stores]
    if all(n.same_as(s) for n, s in zip(new, stores)):
        return block
    return replace_block(block, body=new[0] if isinstance(body, tirx.BufferStore) else tirx.SeqStmt(new))


def canonical_masks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, _canonical_block))
    return func if body.same_as(func.body) else func.with_body(body)


def CanonicalMasks():
    return s_tir_pass("CanonicalMasks", canonical_masks)
