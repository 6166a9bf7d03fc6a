"""The bounds check: every buffer access is proven in bounds by TVM's arithmetic analyzer (under
the conditions it executes in and the program's `T.assume`s), or guarded by a predicate.

Its own module because the shape-reduced copy (shape_reduction.py) checks its copy with it, and
the numerics check builds on the reduced copy.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.assumptions import Assumptions, reads_memory
from tir_passes.analyses.path_conditions import proven
from tir_passes.infra.pass_util import source_line


@dataclass(frozen=True)
class BoundsProblem:
    block: str
    access: str
    dimension: int
    index: str
    extent: str
    line: int | None            # in the stage's TVMScript
    source: str | None = None   # `file.py:line` of the user's TVMScript, when the node kept its span
    binding: bool = False       # a block variable's binding outside its domain (not a buffer access)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else (f"line {self.line}: " if self.line else "")
        if self.binding:
            return (f"{where}block '{self.block}': {self.access} is not proven inside the variable's domain "
                    f"(below {self.extent}) under the loop ranges and the block predicate")
        return (f"{where}block '{self.block}': {self.access}: index {self.index} of dimension "
                f"{self.dimension} is not proven within [0, {self.extent})")


@dataclass(frozen=True)
class GuardedAccess(BoundsProblem):
    """An index that depends on loaded data and is not proven in bounds: not a failure, the
    lowering checks it at run time (an index out of range reads zero; a store is dropped)."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return (f"{where}block '{self.block}': {self.access}: index {self.index} of dimension {self.dimension} "
                f"depends on loaded data and is not proven within [0, {self.extent}): guarded at run time")


@dataclass(frozen=True)
class BoundsReport:
    problems: tuple[BoundsProblem, ...]
    guarded: tuple[GuardedAccess, ...]
    proven: tuple[str, ...]  # accesses (as TVMScript) proven in bounds in every dimension

    def __add__(self, other: "BoundsReport") -> "BoundsReport":
        return BoundsReport(self.problems + other.problems, self.guarded + other.guarded, self.proven + other.proven)


def check_bounds(mod: tvm.IRModule) -> list[str]:
    """The bounds problems of every PrimFunc (guarded accesses are not problems)."""
    return [str(p) for p in bounds_report(mod).problems]


def guarded_accesses(mod: tvm.IRModule) -> list[str]:
    """Accesses whose data-dependent index the lowering guards at run time, one line each."""
    return [str(g) for g in bounds_report(mod).guarded]


def bounds_report(mod: tvm.IRModule) -> BoundsReport:
    report = BoundsReport((), (), ())
    for _gvar, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if isinstance(func, tirx.PrimFunc):
            report = report + func_bounds_report(func)
    return report


def func_bounds_report(func: tirx.PrimFunc, script: str | None = None) -> BoundsReport:
    walker = _BoundsWalker(func, script or func.script())
    walker.visit(func.body)
    return BoundsReport(tuple(walker.problems), tuple(walker.guarded), tuple(walker.proven))


def unproven_accesses(func: tirx.PrimFunc, script: str | None = None) -> list[BoundsProblem]:
    """Every buffer access whose indices the analyzer cannot prove in bounds (guarded ones aside)."""
    return list(func_bounds_report(func, script).problems)


class _BoundsWalker:
    """Walks one PrimFunc; the analyzer knows the loop ranges and block domains on the way, and
    `path` holds the conditions under which the current statement or expression executes:
    enclosing block predicates, `if` conditions, `T.if_then_else` branches. `T.Select` evaluates
    both of its values whatever the condition (TVM's semantics), so loads in it must be in bounds
    unconditionally: the walk passes through it without a condition."""

    def __init__(self, func: tirx.PrimFunc, script: str):
        self.analyzer = sym.Analyzer()
        self.assumptions = Assumptions.of(func)
        self.script_lines = script.splitlines()
        self.path: list = []
        self.problems: list[BoundsProblem] = []
        self.guarded: list[GuardedAccess] = []
        self.proven: list[str] = []
        self.block = "root"

    def visit(self, node) -> None:
        tvm_ffi.structural_visit(node, [
            (tirx.For, self._for),
            (s_tir.SBlockRealize, self._realize),
            (tirx.IfThenElse, self._if),
            (tirx.BufferStore, self._store),
            (tvm.ir.TensorLoad, self._load),
            (tvm.ir.Call, self._call),
        ])

    @contextmanager
    def _assuming(self, condition):
        self.path.append(condition)
        try:
            yield
        finally:
            self.path.pop()

    def _for(self, loop, visitor) -> None:
        if self.analyzer.can_prove(loop.extent <= 0):
            return  # the body never executes: nothing in it is accessed
        self.analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        visitor.default_visit(loop)

    def _realize(self, realize, visitor) -> None:
        """Two steps: every binding lies in its iteration variable's domain (under the loop
        ranges and the predicate), then the body's accesses are in bounds over those domains."""
        block = realize.block
        outer, self.block = self.block, block.name_hint
        with self._assuming(realize.predicate):
            for iv, value in zip(block.iter_vars, realize.iter_values):
                self._check_binding(iv, value)
            for iv in block.iter_vars:
                self.analyzer.bind(iv.var, iv.dom)
            if block.init is not None:
                self.visit(block.init)
            self.visit(block.body)
        self.block = outer

    def _check_binding(self, iv, value) -> None:
        low, extent = iv.dom.min, iv.dom.extent
        if proven(self.analyzer, tirx.all(value >= low, value < low + extent), self.path):
            return
        self.problems.append(BoundsProblem(self.block, f"binding {iv.var.name} = {value}", 0, str(value),
                                           str(low + extent), self._line_of(f"{iv.var.name} = "), binding=True))

    def _if(self, stmt, visitor) -> None:
        self.visit(stmt.condition)
        with self._assuming(stmt.condition):
            self.visit(stmt.then_case)
        if stmt.else_case is not None:
            with self._assuming(tirx.Not(stmt.condition)):
                self.visit(stmt.else_case)

    def _call(self, call, visitor) -> None:
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else ""
        if name == "tirx.assume":
            return  # a stated fact: its loads never execute
        if name.endswith("if_then_else"):
            cond, then_value, else_value = call.args
            self.visit(cond)
            with self._assuming(cond):
                self.visit(then_value)
            with self._assuming(tirx.Not(cond)):
                self.visit(else_value)
            return
        visitor.default_visit(call)

    def _store(self, store, visitor) -> None:
        self._check(store, store.buffer, store.indices, f"{store.buffer.name}[{_indices(store.indices)}] = ...")
        visitor.default_visit(store)

    def _load(self, load, visitor) -> None:
        self._check(load, load.source, load.indices, f"{load.source.name}[{_indices(load.indices)}]")
        visitor.default_visit(load)

    def _check(self, node, buf, indices, access: str) -> None:
        all_proven = True
        for dim, (index, extent) in enumerate(zip(indices, buf.shape)):
            if not (index.ty.dtype.startswith("int") and getattr(index.ty, "lanes", 1) in (1, None)):
                continue
            if self._in_bounds(index, extent):
                continue
            all_proven = False
            found = (self.block, access, dim, str(index), str(extent), self._line_of(access.split(" = ")[0]))
            if reads_memory(index):
                self.guarded.append(GuardedAccess(*found))
            else:
                self.problems.append(BoundsProblem(*found, source=source_line(node)))
        if all_proven:
            self.proven.append(access)

    def _in_bounds(self, index, extent) -> bool:
        claim = tirx.all(index >= 0, index < extent)
        if self._proven(claim, self.path):
            return True
        return reads_memory(index) and self._proven(claim, self.path + self._facts_about(index))

    def _proven(self, claim, conditions) -> bool:
        """Over the block domains; failing that, with block variables replaced by their
        bindings (where a predicate on the loop variables is what keeps the access in bounds)."""
        if proven(self.analyzer, claim, conditions):
            return True
        in_loop_terms = self.assumptions.in_loop_terms
        return proven(self.analyzer, in_loop_terms(claim), [in_loop_terms(c) for c in conditions])

    def _facts_about(self, index) -> list:
        return [claim for premise, claim in self.assumptions.about(index) if proven(self.analyzer, premise, self.path)]

    def _line_of(self, text: str) -> int | None:
        for number, line in enumerate(self.script_lines, start=1):
            if text in line:
                return number
        return None


def _indices(indices) -> str:
    return ", ".join(str(i) for i in indices)
