"""Which forward values the backward reads, and where each comes from: passed in (an input),
saved (an output of the forward) or recomputed (an intermediate: its blocks copied into the
backward, with the intermediates they read in turn). The decision is recorded as ForwardValue
(tir_passes/contracts/autodiff.py).

Why: the adjoints read forward values (a softmax's exponentials, a norm's statistics). The forward
kernel writes only its outputs, so an intermediate has nothing that saved it: recomputing it is the
one choice that needs no second forward.
Assumes: forward.py's blocks; the backward's own buffers are the handles in `made`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from ...contracts.autodiff import INPUT, RECOMPUTED, SAVED, ForwardValue
from ...errors import NotDifferentiableError
from .build import loads_in
from .forward import ForwardProgram


@dataclass(frozen=True)
class ForwardValuesPlan:
    recomputed: tuple    # ForwardBlock per nest to copy, in program order
    buffers: tuple       # the intermediates those nests write (the backward allocates them)
    read: frozenset      # handles of every forward buffer the backward reads
    values: tuple        # ForwardValue records


def plan_forward_values(forward: ForwardProgram, statements: list, made: set) -> ForwardValuesPlan:
    needed, work = set(), _forward_reads(statements, made)
    while work:
        handle = work.pop()
        block = next((b for b in forward.blocks if b.output.__chandle__() == handle), None)
        if handle in needed or block is None or _is_param(forward, block.output):
            continue
        needed.add(handle)
        work |= _forward_reads([block.stmt], made)
    recomputed = _distinct_nests([b for b in forward.blocks if b.output.__chandle__() in needed])
    _refuse_recomputing_outputs(forward, recomputed)
    buffers = _recomputed_buffers(forward, recomputed)
    read = _forward_reads([b.stmt for b in recomputed] + statements, made)
    values = []
    for param in forward.func.params:
        if tirx.is_buffer_var(param) and param.__chandle__() in read:
            written = any(param.same_as(o) for o in forward.outputs)
            values.append(ForwardValue(param.name, SAVED if written else INPUT, (),
                                       "an output of the forward, saved and passed in" if written
                                       else "an input of the forward, passed in"))
    for buffer in buffers:
        values.append(ForwardValue(buffer.name, RECOMPUTED, (forward.writer(buffer).name,),
                                   "an intermediate of the forward (not one of its outputs): its block is copied "
                                   "into the backward"))
    return ForwardValuesPlan(tuple(recomputed), tuple(buffers), frozenset(read), tuple(values))


def _forward_reads(statements: list, made: set) -> set:
    return {load.source.__chandle__() for stmt in statements for load in loads_in(stmt)
            if load.source.__chandle__() not in made}


def _is_param(forward: ForwardProgram, buffer) -> bool:
    return any(buffer.same_as(p) for p in forward.func.params)


def _distinct_nests(blocks: list) -> list:
    """One ForwardBlock per nest: a block writing several buffers is copied once."""
    kept = []
    for block in blocks:
        if not any(k.stmt.same_as(block.stmt) for k in kept):
            kept.append(block)
    return kept


def _refuse_recomputing_outputs(forward: ForwardProgram, recomputed: list) -> None:
    for block in recomputed:
        written = next((b for b in forward.blocks if b.stmt.same_as(block.stmt) and _is_param(forward, b.output)),
                       None)
        if written is not None:
            raise NotDifferentiableError(f"{block.where()}: recomputing {block.output.name} would write the output "
                                         f"{written.output.name} too (one block writes both); write them in separate "
                                         "blocks")


def _recomputed_buffers(forward: ForwardProgram, recomputed: list) -> list:
    """Every intermediate the recomputed nests write (all of a multi-store block's outputs)."""
    return [b.output for b in forward.blocks if any(b.stmt.same_as(r.stmt) for r in recomputed)
            and not _is_param(forward, b.output)]
