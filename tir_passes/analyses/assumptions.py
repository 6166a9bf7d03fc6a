"""Facts a program states with `T.assume(cond)` about the data it loads, for the bounds proofs.

TVMScript `T.assume(cond)` is an `Evaluate` of the `tirx.assume` builtin; TVM's llvm build
drops it (it has no run-time effect). Here it tells the bounds check and the lowering what an
index read from memory can be: in an embedding lookup, `T.assume(0 <= ids[vi] and ids[vi] < V)`
in the block proves `table[ids[vi], vj]` in bounds.

Which facts are used: an assume not under an `if`, whose loads all read buffers the function
never writes (so a location holds the same value wherever it is read). It holds where it
executes, that is under the predicates of its enclosing blocks: its premise, which must be
proven where the fact is used. A load in an index and a load in a fact are the same value when
they are structurally equal once block variables are replaced by their bindings (so a fact over
`ids[vi]` serves every access of its block, and of any block bound to the same loop variables).
Facts without loads (`T.assume(n % 16 == 0)`) are not used.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx


@dataclass(frozen=True)
class Assumption:
    claim: object    # the assumed condition, block variables replaced by their bindings
    premise: object  # the predicates of the enclosing blocks, likewise


class Assumptions:
    """The usable `T.assume` facts of one PrimFunc, and the block bindings to match loads with."""

    def __init__(self, facts: list[Assumption], bindings: dict):
        self.facts = facts
        self.bindings = bindings

    @classmethod
    def of(cls, func: tirx.PrimFunc) -> "Assumptions":
        bindings = _block_bindings(func)
        written = _written_buffers(func)
        facts = []
        for claim, premise in _assume_statements(func):
            loads = _loads_in(claim)
            if loads and not any(load.source.name in written for load in loads):
                facts.append(Assumption(_substitute(claim, bindings), _substitute(premise, bindings)))
        return cls(facts, bindings)

    def in_loop_terms(self, expr):
        """`expr` with every block variable replaced by its binding."""
        return _substitute(expr, self.bindings)

    def about(self, index) -> list[tuple[object, object]]:
        """(premise, claim) of each fact on a value that `index` loads, the claim's matching loads
        written as in `index` (so the analyzer relates the two)."""
        own = [(self.in_loop_terms(load), load) for load in _loads_in(index)]

        def as_written_in_index(load):
            return next((local for bound, local in own if tvm_ffi.structural_equal(load, bound)), load)

        found = []
        for fact in self.facts:
            claim = tvm_ffi.structural_map(fact.claim, (tvm.ir.TensorLoad, as_written_in_index))
            if not claim.same_as(fact.claim):
                found.append((fact.premise, claim))
        return found


def is_assumption(stmt) -> bool:
    """`T.assume(...)`: a statement with no run-time effect."""
    return (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call)
            and isinstance(stmt.value.op, tvm.ir.Op) and stmt.value.op.name == "tirx.assume")


def reads_memory(expr) -> bool:
    return bool(_loads_in(expr))


def _assume_statements(func: tirx.PrimFunc) -> list[tuple[object, object]]:
    """(condition, conjunction of enclosing block predicates) of every assume not under an `if`."""
    found: list[tuple[object, object]] = []
    premises: list = []

    def realize(node, visitor) -> None:
        premises.append(node.predicate)
        visitor.visit(node.block.body)
        premises.pop()

    def evaluate(node, visitor) -> None:
        if is_assumption(node):
            found.append((node.value.args[0], tirx.all(*premises) if premises else tirx.const(True, "bool")))

    tvm_ffi.structural_visit(func.body, [(s_tir.SBlockRealize, realize), (tirx.Evaluate, evaluate),
                                         (tirx.IfThenElse, lambda node, visitor: None)])
    return found


def _block_bindings(func: tirx.PrimFunc) -> dict:
    """Block variable (its handle) -> its binding over loop variables only (outer blocks first, so nested
    bindings compose)."""
    bindings: dict = {}
    realizes: list = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlockRealize, realizes.append), order="pre")
    for node in realizes:
        for iv, value in zip(node.block.iter_vars, node.iter_values):
            bindings[iv.var.__chandle__()] = _substitute(value, bindings)
    return bindings


def _written_buffers(func: tirx.PrimFunc) -> set[str]:
    names: set[str] = set()
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda store: names.add(store.buffer.name)))
    return names


def _loads_in(expr) -> list:
    loads: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, loads.append))
    return loads


def _substitute(expr, bindings: dict):
    """`expr` with each variable in `bindings` (keyed by handle) replaced."""
    return tvm_ffi.structural_map(expr, (tvm.ir.Var, lambda var: bindings.get(var.__chandle__(), var)))
