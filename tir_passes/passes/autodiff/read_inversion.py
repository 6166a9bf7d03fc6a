"""Inverting a read's index map: the domain of a contribution block that writes each element of the
read buffer once (a gather over the forward iterations that read it), instead of a scatter-add.

A forward block over variables v reads R[g(v)]; its contribution to dR is
dR[p] = Σ_{v : g(v) = p} t(v). For each axis d with g_d(v) = ±u + rest (u a variable with
coefficient ±1 that no other axis uses), u is solved: u = ±(p_d - rest), kept where 0 <= u < extent.
An axis with no such variable (a constant index, a diagonal) becomes the condition p_d == g_d(v).
The contribution iterates p (spatial, R's shape) and the variables not solved (reduced), the value
under `if_then_else` of the conditions (lazy: out-of-range reads are never made). A plain axis
(g_d = u over all of R's axis) keeps u itself and needs no condition, so elementwise and broadcast
reads give the plain blocks they always did; a window (a convolution's `h + r - 1`, a pool's
`2 * oh + r`) gives a gather over the window: deterministic, no atomics.
Why: the adjoint of an overlapping read is a sum over the iterations that read an element; written
as a gather it is an ordinary reduction block, which the pipeline compiles and verifies like any.
A gather through data (`X[index[i]]`, or any index not linear in the variables) is an axis with a
condition too: dX[p] = Σ_i (index[i] == p) · dY[i], a deterministic sort-free form that repeated
indices sum into correctly, at the cost of visiting every (p, i) pair.
Assumes: integer index expressions (TIR's).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

from .build import substitute


@dataclass(frozen=True)
class Inversion:
    domain: list         # IterVars: kept forward variables and new element variables (spatial), then reduced ones
    reduce: set          # handles of the reduced variables
    mapping: dict        # handle of a solved forward variable -> its expression
    condition: object    # None, or where the forward iteration exists
    indices: list        # the target's indices (one spatial variable per axis)


def invert_read(iter_vars, indices, shape, buffer_name: str) -> Inversion:
    by_handle = {iv.var.__chandle__(): iv for iv in iter_vars}
    forms = [_linear(index, by_handle) for index in indices]
    uses = [set(form[0]) if form is not None else _variables(index, by_handle) for form, index in zip(forms, indices)]
    solved, element_vars, conditions, target = {}, [], [], []
    for axis, form in enumerate(forms):
        others = set().union(*(u for k, u in enumerate(uses) if k != axis))
        coefficients, _constant = form if form is not None else ({}, 0)   # data-dependent: a condition
        candidates = [h for h, c in coefficients.items() if abs(c) == 1 and h not in others and h not in solved]
        if _is_plain(coefficients, _constant, candidates, by_handle, shape[axis]):
            solved[candidates[0]] = None   # kept as it is
            target.append(by_handle[candidates[0]].var)
            continue
        element = tirx.IterVar(tvm.ir.Range(0, shape[axis]), tirx.Var(f"v_{buffer_name}_{axis}", "int32"),
                               tirx.IterVar.DataPar)
        element_vars.append(element)
        target.append(element.var)
        if candidates:
            chosen = max(candidates, key=lambda h: _extent_rank(by_handle[h]))
            solved[chosen] = (element.var, axis)
        else:
            conditions.append((element.var, indices[axis]))
    mapping = {}
    for handle, entry in solved.items():
        if entry is None:
            continue
        element, axis = entry
        coefficients, constant = forms[axis]
        rest = _rebuild({h: c for h, c in coefficients.items() if h != handle}, constant, by_handle)
        solution = element - rest if coefficients[handle] == 1 else rest - element
        mapping[handle] = tvm.sym.Analyzer().simplify(solution)
    guard = []
    for handle, expr in mapping.items():
        extent = by_handle[handle].dom.extent
        guard += [tirx.const(0, "int32") <= expr, expr < extent]
    guard += [element == substitute(index, mapping) for element, index in conditions]
    kept = [by_handle[h] for h, entry in solved.items() if entry is None]
    reduced = [iv for iv in iter_vars if iv.var.__chandle__() not in solved]
    domain = _in_target_order(target, kept + element_vars) + reduced
    condition = None
    for clause in guard:
        condition = clause if condition is None else tirx.And(condition, clause)
    return Inversion(domain, {iv.var.__chandle__() for iv in reduced}, mapping, condition, target)


def _in_target_order(target: list, spatial: list) -> list:
    by_handle = {iv.var.__chandle__(): iv for iv in spatial}
    return [by_handle[v.__chandle__()] for v in target]


def _is_plain(coefficients: dict, constant: int, candidates: list, by_handle: dict, axis_extent) -> bool:
    if len(coefficients) != 1 or constant != 0 or not candidates:
        return False
    (handle, coefficient), = coefficients.items()
    return coefficient == 1 and _provably_equal(by_handle[handle].dom.extent, axis_extent)


def _extent_rank(iv):
    """Solve for the widest variable, so that the narrow one (a window's offset) is what is reduced."""
    extent = iv.dom.extent
    return int(extent.value) if isinstance(extent, tirx.IntImm) else 1 << 62


def _provably_equal(a, b) -> bool:
    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return int(a.value) == int(b.value)
    return bool(tvm.sym.Analyzer().can_prove_equal(a, b))


def _variables(expr, by_handle: dict) -> set:
    found = set()
    tvm_ffi.structural_walk(expr, (tirx.Var, lambda var: found.add(var.__chandle__()) if var.__chandle__() in by_handle
                                   else None))
    return found


class _NotLinear(Exception):
    pass


def _linear(expr, by_handle: dict) -> tuple[dict, int] | None:
    """({variable handle: integer coefficient}, integer constant); None when not linear (an index
    read from memory, a product or division of variables)."""
    def refuse():
        raise _NotLinear

    def walk(node):
        if isinstance(node, tirx.IntImm):
            return {}, int(node.value)
        if isinstance(node, tirx.Var) and node.__chandle__() in by_handle:
            return {node.__chandle__(): 1}, 0
        if isinstance(node, (tirx.Add, tirx.Sub)):
            (ca, ka), (cb, kb) = walk(node.a), walk(node.b)
            sign = 1 if isinstance(node, tirx.Add) else -1
            merged = dict(ca)
            for handle, c in cb.items():
                merged[handle] = merged.get(handle, 0) + sign * c
            return {h: c for h, c in merged.items() if c != 0}, ka + sign * kb
        if isinstance(node, tirx.Mul):
            for factor, other in ((node.a, node.b), (node.b, node.a)):
                if isinstance(factor, tirx.IntImm):
                    coefficients, constant = walk(other)
                    scale = int(factor.value)
                    return {h: c * scale for h, c in coefficients.items() if c * scale != 0}, constant * scale
        refuse()

    try:
        return walk(expr)
    except _NotLinear:
        return None


def _rebuild(coefficients: dict, constant: int, by_handle: dict):
    expr = tirx.const(constant, "int32")
    for handle, coefficient in coefficients.items():
        expr = expr + by_handle[handle].var * tirx.const(coefficient, "int32")
    return expr

