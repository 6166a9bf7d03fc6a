"""Loop-carried dependences: may the iterations of a loop run at the same time?

A loop may become a grid axis (program ids) or a tile axis (lanes of one program) only when no two
of its iterations touch the same element of a buffer that one of them writes. This module answers
that question for a loop of a kernel nest, conservatively: a dependence is reported unless the
arithmetic analyzer proves, for every pair (write, other access) of a written buffer under the loop,
that two different iterations address different elements.

The proof: rename the loop in the second access to a fresh `L'`, and every other loop around it
that is not `fixed` to a fresh copy (loops that run concurrently with `L`, or in any order
relative to it, take independent values), then for `L < L'` and for `L > L'` find an index
dimension where the analyzer proves the two addresses differ. Asked with nothing fixed, the
question is whether the loop may be a program id (programs run in any order and at once).
Data-dependent indices (`X[ids[i]]`) are never proven: such a loop is serial.

A reduction block's updates of its own outputs (`X[i] = X[i] + ...` under a loop over `k` that
drives only its reduction axes; several outputs too, such as an arg-max's value and index, each
accessed only at its store's index, and stored once by the body) are not reported: they are what the lowering
turns into a
reduction. Nor are the reads of an online nest's running maximum by its sums along the nest's
reduction loop (online_contract.py: the lowering folds them tile by tile, rescaling).

Used by Tiling (to decide roles) and by the contract check (to verify them). Assumes S-TIR after
NormalizeLoopStarts or Tiling: loops have static or symbolic extents; block bindings are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import REDUCE, Access, block_accesses, block_sites, loop_kind, substitute_bindings
from tir_passes.contracts.online_contract import online_rescale, online_shift

PROOF = sym.ProofStrength.SYMBOLIC_BOUND


@dataclass(frozen=True)
class Dependence:
    loop: str
    buffer: str
    first: str  # "block: access" of the write
    second: str  # "block: access" of the other access
    blocks: tuple[str, str]  # the blocks of the two accesses

    def __str__(self) -> str:
        return (
            f"loop {self.loop} carries a dependence through {self.buffer}: {self.first} and {self.second} "
            "may touch the same element in different iterations"
        )


@dataclass(frozen=True)
class _Site:
    """One access: the block it is in and the loops of the kernel around that block."""

    realize: s_tir.SBlockRealize
    access: Access
    loops: tuple[tirx.For, ...]

    def describe(self) -> str:
        indices = ", ".join(str(i) for i in self.access.indices)
        return f"{self.realize.block.name_hint}: {self.access.name}[{indices}]"


def _sites(stmt) -> list[_Site]:
    return [
        _Site(realize, access, loops)
        for realize, loops in block_sites(stmt)
        for access in block_accesses(realize.block, include_init=True)
    ]


def _is_reduction_update(site: _Site, other: _Site, loop: tirx.For) -> bool:
    """The pair is a reduction block's read-modify-write of one of its outputs along a reduction
    loop: every access of that buffer in the block (T.init included) is at the index its store uses."""
    if site.realize is not other.realize or loop_kind(loop, site.realize) != REDUCE:
        return False
    if sum(a.is_store and a.name == site.access.name for a in block_accesses(site.realize.block)) != 1:
        return False  # an update stores each output once; a second store (an init in the body) is not one
    accesses = [a for a in block_accesses(site.realize.block, include_init=True) if a.name == site.access.name]
    return all(
        len(a.indices) == len(site.access.indices)
        and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a.indices, site.access.indices))
        for a in accesses
    )


def _is_online_read(write: _Site, other: _Site, loop: tirx.For) -> bool:
    """A sum of an online nest reading the running maximum (or the one before it) along the nest's
    reduction loop: the online form rescales for it (online_contract.py), tile by tile."""
    shift = online_shift(write.realize.block)
    rescale = online_rescale(other.realize.block)
    if shift is None or rescale is None or other.access.is_store:
        return False
    buffers = (shift.shift, shift.previous)
    return (
        (rescale.shift, rescale.previous) == buffers
        and write.access.name in buffers
        and loop_kind(loop, write.realize) == REDUCE
        and loop_kind(loop, other.realize) == REDUCE
    )


def _addresses(site: _Site, fixed: set[int], rename: bool) -> tuple[list, object, list[tuple[tirx.Var, tirx.For]]]:
    """The site's indices and its block's predicate over loop variables, and (variable, loop whose
    range it has) for each loop around it; with `rename`, the loops that are not fixed get fresh
    copies."""
    fresh = {
        l.loop_var.__chandle__(): tirx.Var(l.loop_var.name + "'", l.loop_var.ty.dtype)
        for l in site.loops
        if rename and l.loop_var.__chandle__() not in fixed
    }

    def over_loops(expr):
        return tvm_ffi.structural_map(
            substitute_bindings(expr, site.realize), (tirx.Var, lambda v: fresh.get(v.__chandle__(), v))
        )

    indices = [over_loops(i) for i in site.access.indices]
    return (
        indices,
        over_loops(site.realize.predicate),
        [(fresh.get(l.loop_var.__chandle__(), l.loop_var), l) for l in site.loops],
    )


def _differ(analyzer: sym.Analyzer, first: list, second: list) -> bool:
    return any(analyzer.can_prove(a != b, PROOF) for a, b in zip(first, second))


def _independent(loop: tirx.For, write: _Site, other: _Site, fixed: set[int]) -> bool:
    """No two different iterations of `loop` in which both blocks run (their predicates hold)
    address one element."""
    if len(write.access.indices) != len(other.access.indices):
        return False
    first, first_runs, first_vars = _addresses(write, fixed, rename=False)
    second, second_runs, second_vars = _addresses(other, fixed, rename=True)
    analyzer = sym.Analyzer()
    for var, ranged_like in first_vars + second_vars:
        analyzer.bind(var, tvm.ir.Range.from_min_extent(ranged_like.min, ranged_like.extent))
    here = loop.loop_var
    there = next(var for var, l in second_vars if l.same_as(loop))
    with analyzer.constraint_scope(tirx.And(first_runs, second_runs)):
        for order in (here < there, here > there):
            with analyzer.constraint_scope(order):
                if not _differ(analyzer, first, second):
                    return False
    return True


def carried_dependences(stmt, loop: tirx.For, fixed=()) -> list[Dependence]:
    """Every (write, access) pair of the kernel `stmt` under `loop` that two different iterations
    of `loop` may share. `fixed` loops have the same value in both iterations; every other loop
    around the accesses may differ."""
    sites = [site for site in _sites(stmt) if any(l.same_as(loop) for l in site.loops)]
    pinned = {l.loop_var.__chandle__() for l in fixed}
    found: list[Dependence] = []
    reported: set[tuple[str, str, str]] = set()
    for write in (s for s in sites if s.access.is_store):
        for other in (s for s in sites if s.access.name == write.access.name):
            if _is_reduction_update(write, other, loop) or _is_online_read(write, other, loop):
                continue
            key = (write.access.name, write.describe(), other.describe())
            if key in reported:
                continue
            if not _independent(loop, write, other, pinned):
                reported.add(key)
                blocks = (write.realize.block.name_hint, other.realize.block.name_hint)
                found.append(
                    Dependence(loop.loop_var.name, write.access.name, write.describe(), other.describe(), blocks)
                )
    return found
