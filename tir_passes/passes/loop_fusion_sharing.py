"""LoopFusion's sharing (rewrite 1d): two nests that recompute one contraction in the same walk become one
nest that computes it once.

    for b, h, j:                                    for b, h, j:
      for i: S_3 = K·Qᵀ;  dK += f(S_3)·Q              for i: S_3 = K·Qᵀ;  dK += f(S_3)·Q;  dV += g(S_3)·dO
      d_K = dK                                  ->    d_K = dK
    for b, h, j:                                      d_V = dV
      for i: S_4 = K·Qᵀ;  dV += g(S_4)·dO
      d_V = dV

Why: recompute (1b) copies a contraction in front of each reader nest and streaming (1c) walks each copy
inside its reader. Two reader nests over the same grid and the same walk (attention backward's dK and
dV: rows j, walking the queries i) then each compute the same tile per step, and each loads its operands:
FlashAttention-2 has one kernel for both, the scores computed once per step, beside both accumulators.
When: the two copies come from one recompute step of the record (so they compute the same values), the
dropped copy's buffer is read only inside its own nest (else its readers elsewhere would lose it), the
nests' loops down to the copies have equal headers (start, extent, kind, no annotations or bindings), the
second copy is the first once the second nest's loop variables and buffer are the first's, the nests touch
no common buffer except through the copy (neither writes what the other reads or writes), no statement
between them touches what the second nest writes or writes what it reads, and the accumulators beside the
walk (the outermost merged loop a block reduces over) fit the register budget together
(`BackendLimits.row_fits_in_registers`, as streaming checks one).
The merged nest keeps the first nest's loops and order; the second nest's statements follow the first's at
each level. The step is recorded as a "share" fusion step (dropped copy, kept copy, dropped buffer).
Assumes: LoopFusion's recompute, streaming and fusion ran (the nests are complete).
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import ir, s_tir, tirx

from tir_passes.analyses.nest import REDUCE, SPATIAL, block_accesses, loop_kind, realizes_under
from tir_passes.analyses.recompute import read_from
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import RECOMPUTE, SHARE, FusionStep
from tir_passes.infra.pass_util import replace_block, root_block, static_int, top_level_statements, with_root_block


def _items(stmt) -> list:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def _holds(stmt, name: str) -> bool:
    return any(r.block.name_hint == name for r in realizes_under(stmt))


def _same_header(a: tirx.For, b: tirx.For) -> bool:
    return (not a.annotations and not b.annotations and a.kind == b.kind == tirx.ForKind.SERIAL
            and tvm_ffi.structural_equal(a.min, b.min) and tvm_ffi.structural_equal(a.extent, b.extent))


def _rebound(stmt, bind: dict):
    return tvm_ffi.structural_map(stmt, (ir.Var, lambda v: bind.get(v, v))) if bind else stmt


def _written(realize: s_tir.SBlockRealize):
    return realize.block.writes[0].source


def _same_copy(kept: s_tir.SBlockRealize, dropped: s_tir.SBlockRealize, bind: dict) -> bool:
    """`dropped` computes what `kept` does once its loops and its buffer are `kept`'s."""
    old, new = _written(dropped), _written(kept)

    def store(s):
        return tirx.BufferStore(new, s.value, list(s.indices)) if s.buffer.same_as(old) else s

    def load(l):
        return tirx.BufferLoad(new, list(l.indices)) if l.source.same_as(old) else l

    moved = tvm_ffi.structural_map(_rebound(dropped, bind), [(tirx.BufferStore, store), (tvm.ir.TensorLoad, load)])
    block = replace_block(moved.block, name_hint=kept.block.name_hint, reads=kept.block.reads, writes=kept.block.writes)
    renamed = s_tir.SBlockRealize(list(moved.iter_values), moved.predicate, block)
    probe = replace_block(kept.block, reads=[], writes=[])
    return tvm_ffi.structural_equal(s_tir.SBlockRealize(list(kept.iter_values), kept.predicate, probe),
                                    s_tir.SBlockRealize(list(renamed.iter_values), renamed.predicate,
                                                        replace_block(renamed.block, reads=[], writes=[])))


def _lockstep(a, b, kept: str, dropped: str, bind: dict, merged_loops: list):
    """`a` and `b` merged along the path to the copies (None where their structure differs)."""
    if isinstance(a, tirx.For) and isinstance(b, tirx.For):
        if not _same_header(a, b):
            return None
        body = _lockstep(a.body, b.body, kept, dropped, {**bind, b.loop_var: a.loop_var}, merged_loops)
        if body is None:
            return None
        merged_loops.append(tirx.For(a.loop_var, a.min, a.extent, a.kind, body, a.thread_binding, a.annotations))
        return merged_loops[-1]
    items_a, items_b = _items(a), _items(b)
    at_a = next((k for k, s in enumerate(items_a) if _holds(s, kept)), None)
    at_b = next((k for k, s in enumerate(items_b) if _holds(s, dropped)), None)
    if at_a is None or at_b is None:
        return None
    one, other = items_a[at_a], items_b[at_b]
    if isinstance(one, s_tir.SBlockRealize) and isinstance(other, s_tir.SBlockRealize):
        merged = one if _same_copy(one, other, bind) else None
    elif isinstance(one, tirx.For) and isinstance(other, tirx.For):
        merged = _lockstep(one, other, kept, dropped, bind, merged_loops)
    else:
        merged = None
    if merged is None:
        return None
    before, after = [_rebound(s, bind) for s in items_b[:at_b]], [_rebound(s, bind) for s in items_b[at_b + 1:]]
    parts = [*items_a[:at_a], *before, merged, *items_a[at_a + 1:], *after]
    return parts[0] if len(parts) == 1 else tirx.SeqStmt(parts)


def _touched(stmt, skip=()) -> tuple[set[str], set[str]]:
    written, read = set(), set()
    for realize in realizes_under(stmt):
        for access in block_accesses(realize.block, include_init=True):
            if access.name not in skip:
                (written if access.is_store else read).add(access.name)
    return written, read


def _independent(a, b, skip=()) -> bool:
    written_a, read_a = _touched(a, skip)
    written_b, read_b = _touched(b, skip)
    return not (written_a & (written_b | read_b)) and not (written_b & read_a)


def _walk(merged_loops: list[tirx.For]) -> tirx.For | None:
    """The outermost merged loop that a block reduces over: the walk the copies were streamed into
    (`merged_loops` lists the inner loops first)."""
    for loop in reversed(merged_loops):
        if any(loop_kind(loop, realize) == REDUCE for realize in realizes_under(loop.body)):
            return loop
    return None


def _accumulator_row(walk: tirx.For) -> int | None:
    """Elements per walked row that the blocks reducing over `walk` keep beside it: for each, the product of
    its spatial loops under the walk (None: a symbolic extent)."""
    total = 0
    for realize in realizes_under(walk.body):
        if loop_kind(walk, realize) != REDUCE:
            continue
        name = realize.block.name_hint
        inner = [static_int(loop.extent) for loop in _loops(walk.body)
                 if _holds(loop, name) and loop_kind(loop, realize) == SPATIAL]
        if None in inner:
            return None
        total += math.prod(inner)
    return total


def _loops(stmt) -> list[tirx.For]:
    loops: list = []
    tvm_ffi.structural_walk(stmt, (tirx.For, lambda l: loops.append(l)))
    return loops


def share_recomputed_walks(func: tirx.PrimFunc, decisions: list[FusionStep], limits: BackendLimits) -> tirx.PrimFunc:
    """Merge every pair of nests that recompute one contraction in the same walk (see the module doc)."""
    families = [(step.blocks[0], *step.copies) for step in list(decisions) if step.action == RECOMPUTE and step.taken]
    for family in families:
        shared = _share_one(func, family, decisions, limits)
        while shared is not None:
            func = shared
            shared = _share_one(func, family, decisions, limits)
    return func


def _share_one(func, family, decisions: list[FusionStep], limits: BackendLimits) -> tirx.PrimFunc | None:
    statements = top_level_statements(func)
    where = {name: k for name in family for k, stmt in enumerate(statements) if _holds(stmt, name)}
    members = sorted(where, key=lambda name: where[name])
    for position, kept in enumerate(members):
        for dropped in members[position + 1:]:
            if where[kept] == where[dropped] or _considered(decisions, kept, dropped):
                continue
            merged, why = _merge(func, statements, where[kept], where[dropped], kept, dropped, limits)
            if merged is not None:
                decisions.append(FusionStep(SHARE, (dropped,), (kept,), (why[0],), depth=why[1],
                                            reason=f"{dropped} computes what {kept} does, under the same loops: "
                                                   "one nest computes it once per step for the readers of both"))
                return merged
            decisions.append(FusionStep(SHARE, (dropped,), (kept,), taken=False, reason=why))
    return None


def _considered(decisions: list[FusionStep], kept: str, dropped: str) -> bool:
    return any(step.action == SHARE and step.blocks == (dropped,) and step.into == (kept,) for step in decisions)


def _merge(func, statements: list, at_kept: int, at_dropped: int, kept: str, dropped: str, limits: BackendLimits):
    """(the function with the two nests merged, (the dropped buffer, the shared loops)) or (None, why not)."""
    first, second = statements[at_kept], statements[at_dropped]
    copy = next(r for r in realizes_under(second) if r.block.name_hint == dropped)
    original = next(r for r in realizes_under(first) if r.block.name_hint == kept)
    old, new = _written(copy), _written(original)
    if any(old.name in _touched(stmt)[1] for k, stmt in enumerate(statements) if k != at_dropped):
        return None, f"{old.name} is read outside the nest that computes it (its readers would lose it)"
    if not _independent(first, second, skip=(old.name,)):
        return None, "the nests touch a common buffer besides the copy"
    if any(not _independent(statements[k], second) for k in range(at_kept + 1, at_dropped)):
        return None, "a nest between them touches what the second reads or writes"
    merged_loops: list = []
    merged = _lockstep(first, second, kept, dropped, {}, merged_loops)
    if merged is None:
        return None, "the copies do not compute the same values under loops with the same headers"
    walk = _walk(merged_loops)
    row = _accumulator_row(walk) if walk is not None else 0
    if not limits.row_fits_in_registers(row, contraction=True):
        return None, f"the accumulators beside the walk ({row} elements per row) are over the register budget"
    merged = read_from(merged, old, new, func)
    body = [merged if k == at_kept else stmt for k, stmt in enumerate(statements) if k != at_dropped]
    root = root_block(func)
    allocs = [buf for buf in root.alloc_buffers if not buf.same_as(old)]
    seq = body[0] if len(body) == 1 else tirx.SeqStmt(body)
    return with_root_block(func, replace_block(root, body=seq, alloc_buffers=allocs)), \
        (old.name, len(merged_loops))
