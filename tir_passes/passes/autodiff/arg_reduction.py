"""A tuple (value, index) reduction read for differentiation: an arg-max or arg-min whose value is
a float buffer and whose index is an integer one (torch.max(dim)'s pair, topi.argmax's block).

What it reads: a block body of lets (`Bind`) and stores, the lets substituted into the stores
(`stores_of`), then the pair (`arg_reduction`):

    V[s] = Select(V[s] > t, V[s], t)        (or >=, the operands swapped, or T.max(V[s], t); < or T.min)
    I[s] = Select(c, I[s], k)               k: the block's one reduction variable

where `c` is what keeps the index: `V[s] > t` or `V[s] >= t`, or a disjunction of those and of
conjunctions holding `V[s] == t` (topi's ties rule, `V > t or (V == t and I < k)`). Then
`V > t ⇒ c ⇒ V >= t` (for a min, `<`): whenever the index moves to k the value becomes t = A[k], and
whenever it stays the value stays the element the index names. So after the reduction V = t at
k = I (or V is still its init, I never set, and V depends on no element): V's gradient goes to the
element at the program's own index, `d t[k] = (k == I[s]) · dV[s]` (and `t == V[s]` where I's init is
a valid index: forward.py decides, differentiate.py writes it), whatever tie rule `c` encodes
(with topi's, the first maximal element: torch.max(dim)'s rule). The index itself carries no
gradient (an integer, piecewise constant).
Why: without the pair the block was refused; a max through its arg-max gives the gradient to one
element, where a plain max reduction shares it among the ties (torch.amax's rule, differentiate.py).
Assumes: forward.py's block reading (bindings, plain indices) around it. Anything else, a pair
whose conditions this cannot relate, or a store reading what an earlier store of the body wrote
(the lets' values would no longer be the old ones), is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

from ...errors import NotDifferentiableError
from ...infra.reduction_kinds import MAX, MIN

ARG_INDEX = "arg_index"   # ForwardBlock.kind of the index a tuple reduction writes (no gradient)

_OPS = {tirx.GT: ">", tirx.GE: ">=", tirx.LT: "<", tirx.LE: "<=", tirx.EQ: "=="}
_SWAPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "=="}
_NEGATED = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}
_KEEPS = {MAX: (">", ">="), MIN: ("<", "<=")}   # the value keeps its accumulator


@dataclass(frozen=True)
class ArgReduction:
    kind: str         # MAX or MIN: the value's reduction
    value: object     # the value's BufferStore
    term: object      # t, the element compared and taken
    index: object     # the index's BufferStore
    position: object  # k, the reduction variable the index takes


def stores_of(body, where: str) -> list:
    """The body's stores, each let (`Bind`) before them substituted into what follows it."""
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    lets, stores = {}, []
    for stmt in stmts:
        if isinstance(stmt, tirx.Bind) and not stores:
            lets[stmt.var.__chandle__()] = _substitute(stmt.value, lets)
        elif isinstance(stmt, tirx.BufferStore):
            stores.append(tirx.BufferStore(stmt.buffer, _substitute(stmt.value, lets), stmt.indices)
                          if lets else stmt)
        else:
            raise NotDifferentiableError(f"{where}: the body holds a {type(stmt).__name__} where lets, then stores, "
                                         "are read: not differentiated")
    return stores


def arg_reduction(stores: list, reduce_vars: tuple, where: str) -> ArgReduction | None:
    """The (value, index) pair of a two-store block (None when it is not one float and one integer
    store); refused when it is, but not in the form above."""
    if len(stores) != 2:
        return None
    floats = [s for s in stores if str(s.buffer.dtype).startswith("float")]
    ints = [s for s in stores if str(s.buffer.dtype).startswith(("int", "uint"))]
    if len(floats) != 1 or len(ints) != 1:
        return None
    value, index = floats[0], ints[0]
    if stores.index(value) < stores.index(index) and _reads(index.value, value.buffer):
        raise NotDifferentiableError(f"{where}: the index {index.buffer.name} is stored after {value.buffer.name} and "
                                     f"reads it: it compares the new value, not the one before this element")
    found = _value_form(value, index)
    if found is None:
        raise NotDifferentiableError(f"{where}: a tuple reduction whose value {value.buffer.name} is not "
                                     f"Select({value.buffer.name} > t, {value.buffer.name}, t) (a max or min of its "
                                     "accumulator and a term not reading the pair): not differentiated")
    kind, term = found
    position = _index_position(index, value, term, kind, reduce_vars)
    if position is None:
        raise NotDifferentiableError(
            f"{where}: a tuple reduction whose index {index.buffer.name} is not Select(c, {index.buffer.name}, k) over "
            f"the one reduction variable k, with c keeping it exactly where {value.buffer.name} keeps its value or "
            f"ties ({value.buffer.name} {_KEEPS[kind][0]} t, or ... or ({value.buffer.name} == t and ...)): the "
            "element its value came from is not known, so its gradient is not (not differentiated)")
    return ArgReduction(kind, value, term, index, position)


def _value_form(value, index):
    """(MAX or MIN, t) of `V = Select(V ⋈ t, V, t)`, `Select(t ⋈ V, t, V)`, `max(V, t)`, `min(V, t)`."""
    acc = _accumulator(value)
    expr = value.value
    for node, kind in ((tirx.Max, MAX), (tirx.Min, MIN)):
        if isinstance(expr, node):
            term = expr.b if _same(expr.a, acc) else expr.a if _same(expr.b, acc) else None
            return (kind, term) if term is not None and _pure(term, value, index) else None
    if not isinstance(expr, tirx.Select):
        return None
    if _same(expr.true_value, acc):
        term, keeps = expr.false_value, lambda op: op
    elif _same(expr.false_value, acc):
        term, keeps = expr.true_value, lambda op: _NEGATED.get(op)
    else:
        return None
    op = _comparison(expr.condition, acc, term)
    kept = keeps(op) if op is not None else None
    kind = next((k for k, ops in _KEEPS.items() if kept in ops), None)
    return (kind, term) if kind is not None and _pure(term, value, index) else None


def _index_position(index, value, term, kind: str, reduce_vars: tuple):
    """k of `I = Select(c, I, k)` when `V ⋈ t ⇒ c ⇒ V ⋈= t` holds by c's form (None otherwise)."""
    expr = index.value
    if len(reduce_vars) != 1 or not isinstance(expr, tirx.Select) or not _same(expr.true_value, _accumulator(index)):
        return None
    position = expr.false_value
    if not (isinstance(position, tirx.Var) and position.same_as(reduce_vars[0])):
        return None
    acc = _accumulator(value)
    disjuncts = _flatten(expr.condition, tirx.Or)
    direct = [_comparison(d, acc, term) in _KEEPS[kind] for d in disjuncts]
    at_ties = [any(_comparison(c, acc, term) in (*_KEEPS[kind], "==") for c in _flatten(d, tirx.And))
               for d in disjuncts]
    return position if any(direct) and all(at_ties) else None


def _comparison(expr, left, right) -> str | None:
    """The operator of `expr` written as `left ⋈ right`, when it compares exactly those two."""
    op = _OPS.get(type(expr))
    if op is None:
        return None
    if _same(expr.a, left) and _same(expr.b, right):
        return op
    return _SWAPPED[op] if _same(expr.a, right) and _same(expr.b, left) else None


def _flatten(expr, node) -> list:
    return _flatten(expr.a, node) + _flatten(expr.b, node) if isinstance(expr, node) else [expr]


def _accumulator(store):
    return tirx.BufferLoad(store.buffer, list(store.indices))


def _pure(term, value, index) -> bool:
    """The term reads neither buffer of the pair."""
    return not _reads(term, value.buffer) and not _reads(term, index.buffer)


def _same(a, b) -> bool:
    return tvm_ffi.structural_equal(a, b)


def _reads(expr, buffer) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(load.source.same_as(buffer))))
    return any(found)


def _substitute(expr, lets: dict):
    if not lets:
        return expr
    return tvm_ffi.structural_map(expr, (tvm.ir.Var, lambda var: lets.get(var.__chandle__(), var)))
