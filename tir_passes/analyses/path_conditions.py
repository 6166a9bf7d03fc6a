"""Proofs under the conditions an access executes in: `if` conditions, `T.if_then_else`
branches, `T.where` predicates.

Why: TVM's arithmetic analyzer learns little from a negated or disjunctive constraint. Under
`not (vj == 0)` it does not conclude `vj >= 1`, so the scan
`T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])` would look out of bounds.
`cases` rewrites conditions into alternatives it does understand (disjunctive normal form):
negations move onto the comparisons (`not (a < b)` is `a >= b`), integer `a != b` and
`not (a == b)` become `a < b or a > b`, and each `or` splits into cases. `proven` proves a claim
in every case; a case that contradicts what the analyzer already knows (`vj < 0` for
`vj` in [0, 29)) never executes and is skipped. When the default proof fails, the analyzer's
stronger `ProofStrength.SYMBOLIC_BOUND` (which reasons with its built-in SMT solver) gets a try.
Assumes: conditions are boolean TIR expressions. Float comparisons are never negated (NaN
compares false both ways): they stay opaque facts. Beyond MAX_CASES cases the conditions are
used as they are, which is weaker, never unsound.
"""

from __future__ import annotations

from contextlib import ExitStack

from tvm import sym, tirx

from tir_passes.analyses.nest import conjuncts

MAX_CASES = 64

_NEGATED = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT}


def proven(analyzer: sym.Analyzer, claim, conditions) -> bool:
    """`claim` holds whenever every one of `conditions` holds (under the analyzer's bindings)."""
    return all(_proven_in_case(analyzer, claim, case) for case in cases(conditions))


def cases(conditions) -> list[list]:
    """Alternatives whose union is `all(conditions)`, each a list of conditions that all hold."""
    result: list[list] | None = [[]]
    for condition in conditions:
        result = _product(result, _dnf(condition, positive=True))
        if result is None:
            return [list(conditions)]
    return result


def _proven_in_case(analyzer: sym.Analyzer, claim, case: list) -> bool:
    with ExitStack() as scopes:
        for condition in case:
            # NOTE: a constraint is matched as written, a claim after the analyzer substitutes its
            # bound variables: simplify the constraint so both read alike
            condition = analyzer.simplify(condition)
            if analyzer.can_prove(tirx.Not(condition)):
                return True  # the case contradicts what is known: it never executes
            scopes.enter_context(analyzer.constraint_scope(condition))
        # NOTE: each conjunct alone: the solver proves `0 <= n - 1 - v` and `n - 1 - v < n` for v in
        # [0, n), but not their conjunction
        return all(analyzer.can_prove(part) or analyzer.can_prove(part, sym.ProofStrength.SYMBOLIC_BOUND)
                   for part in conjuncts(claim))


def _dnf(expr, positive: bool) -> list[list] | None:
    """`expr` (or its negation) as alternatives of conjunctions; None past MAX_CASES."""
    if isinstance(expr, tirx.Not):
        return _dnf(expr.a, not positive)
    if isinstance(expr, (tirx.And, tirx.Or)):
        left, right = _dnf(expr.a, positive), _dnf(expr.b, positive)
        if isinstance(expr, tirx.And) == positive:  # a conjunction (De Morgan for a negated `or`)
            return _product(left, right)
        return None if left is None or right is None or len(left) + len(right) > MAX_CASES else left + right
    if isinstance(expr, tirx.IntImm):
        return [[]] if bool(expr.value) == positive else []
    return _atom(expr, positive)


def _atom(expr, positive: bool) -> list[list]:
    integral = type(expr) in (tirx.EQ, tirx.NE, *_NEGATED) and _is_integer(expr.a)
    if integral and isinstance(expr, (tirx.EQ, tirx.NE)):
        if isinstance(expr, tirx.EQ) == positive:
            return [[tirx.EQ(expr.a, expr.b)]]
        return [[tirx.LT(expr.a, expr.b)], [tirx.GT(expr.a, expr.b)]]
    if positive:
        return [[expr]]
    if integral:
        return [[_NEGATED[type(expr)](expr.a, expr.b)]]
    return [[tirx.Not(expr)]]


def _product(left: list[list] | None, right: list[list] | None) -> list[list] | None:
    if left is None or right is None or len(left) * len(right) > MAX_CASES:
        return None
    return [a + b for a in left for b in right]


def _is_integer(expr) -> bool:
    return str(expr.ty.dtype).startswith(("int", "uint"))
