"""Which forward values the backward reads, and where each comes from: passed in (an input), saved (an
output of the forward, or an intermediate that a training forward writes) or recomputed (an intermediate:
its blocks copied into the backward, with the intermediates they read in turn). The decision is recorded as
ForwardValue (tir_passes/contracts/autodiff.py).

Why: the adjoints read forward values (a softmax's exponentials, a norm's statistics). The forward kernel
writes only its outputs, so by default an intermediate has nothing that saved it and is recomputed: the one
choice that needs no second forward. With `save`, chosen intermediates are instead written by a *training
forward* (`training_forward.py`: the forward with them promoted to extra outputs) and passed to the
backward, which then copies no block computing them (FlashAttention-2's forward saves its row statistics,
so its backward has no forward walk).

The cost rule (`save="auto"`): save an intermediate that a reduction writes when it is smaller than what
recomputing it reads: its element count below that of the largest buffer its block reads (a row
statistic, attention's acc of S x D against the S x S weights, a norm's mean and variance against the rows).
Everything else is recomputed: intermediates as large as or larger than their inputs (attention's S x S
scores, S x S x D products of Q and K rows, and its weights), and elementwise values, which cost one
read of their operands to recompute and as much to save and load. Only intermediates the backward would
otherwise recompute are candidates; `save=[names]` picks them by name, and naming anything else is refused.
Assumes: forward.py's blocks; the backward's own buffers are the handles in `made`.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from tvm import tirx

from ...contracts.autodiff import INPUT, RECOMPUTED, SAVED, ForwardValue
from ...errors import NotDifferentiableError
from ...infra.reduction_kinds import MAX, MIN, PROD, SUM
from .build import loads_in
from .forward import ForwardBlock, ForwardProgram

AUTO = "auto"
SYMBOLIC_EXTENT = 1 << 31
REDUCTIONS = (SUM, PROD, MAX, MIN)


@dataclass(frozen=True)
class ForwardValuesPlan:
    recomputed: tuple    # ForwardBlock per nest to copy, in program order
    buffers: tuple       # the intermediates those nests write (the backward allocates them)
    saved: tuple         # the intermediates the training forward writes (backward parameters), in program order
    read: frozenset      # handles of every forward buffer the backward reads
    values: tuple        # ForwardValue records


def plan_forward_values(forward: ForwardProgram, statements: list, made: set, save=None) -> ForwardValuesPlan:
    """What the backward's `statements` read, and where each value comes from (`save`: None, "auto" or
    a list of intermediate names; see the module doc)."""
    candidates = _needed_intermediates(forward, statements, made, stop=set())
    chosen = _with_nest_siblings(forward, _chosen_to_save(forward, candidates, save), candidates)
    needed = _needed_intermediates(forward, statements, made, stop=chosen)
    saved = [b for b in _distinct_outputs(forward) if b.__chandle__() in needed & chosen]
    _refuse_unreached(forward, save, chosen, needed)
    recomputed = _distinct_nests([b for b in forward.blocks if b.output.__chandle__() in needed - chosen])
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
    for buffer in saved:
        block = forward.writer(buffer)
        values.append(ForwardValue(buffer.name, SAVED, (block.name,), _saving_reason(forward, block, save),
                                   training_output=True))
    for buffer in buffers:
        values.append(ForwardValue(buffer.name, RECOMPUTED, (forward.writer(buffer).name,),
                                   "an intermediate of the forward (not one of its outputs): its block is copied "
                                   "into the backward"))
    return ForwardValuesPlan(tuple(recomputed), tuple(buffers), tuple(saved), frozenset(read), tuple(values))


def _needed_intermediates(forward: ForwardProgram, statements: list, made: set, stop: set) -> set:
    """Handles of the intermediates the statements read, with those their writers read in turn (not
    looking past the handles in `stop`: those are passed in)."""
    needed, work = set(), _forward_reads(statements, made)
    while work:
        handle = work.pop()
        block = next((b for b in forward.blocks if b.output.__chandle__() == handle), None)
        if handle in needed or block is None or _is_param(forward, block.output):
            continue
        needed.add(handle)
        if handle not in stop:
            work |= _forward_reads([block.stmt], made)
    return needed


def _chosen_to_save(forward: ForwardProgram, candidates: set, save) -> set:
    if save is None:
        return set()
    if save == AUTO:
        return {b.output.__chandle__() for b in forward.blocks
                if b.output.__chandle__() in candidates and _cheaper_to_save(forward, b)}
    if isinstance(save, str):
        save = [save]
    by_name = {b.output.name: b.output for b in forward.blocks}
    chosen = set()
    for name in save:
        buffer = by_name.get(name)
        if buffer is None or buffer.__chandle__() not in candidates:
            raise NotDifferentiableError(
                f"PrimFunc {forward.name}: save names {name!r}, which is not an intermediate the backward reads "
                f"(those it reads: {', '.join(_names(forward, candidates)) or 'none'}); "
                "only intermediates the backward would recompute can be saved")
        chosen.add(buffer.__chandle__())
    return chosen


def _with_nest_siblings(forward: ForwardProgram, chosen: set, candidates: set) -> set:
    """A block writing several buffers (a sum and a sum of squares) is one nest: saving one of its outputs
    saves every other one the backward reads, so no copy of the nest is left to recompute them."""
    nests = [b.stmt for b in forward.blocks if b.output.__chandle__() in chosen]
    return chosen | {b.output.__chandle__() for b in forward.blocks
                     if b.output.__chandle__() in candidates and any(b.stmt.same_as(n) for n in nests)}


def _refuse_unreached(forward: ForwardProgram, save, chosen: set, needed: set) -> None:
    """An explicitly named intermediate read only to recompute another saved one is not read at all."""
    if save is None or save == AUTO:
        return
    unread = chosen - needed
    if unread:
        raise NotDifferentiableError(
            f"PrimFunc {forward.name}: save names {', '.join(_names(forward, unread))}, which the backward does not "
            "read once the other saved values are passed in (it is read only to recompute them)")


def _cheaper_to_save(forward: ForwardProgram, block: ForwardBlock) -> bool:
    """A reduction's output smaller than the largest buffer its block reads (the module doc's rule)."""
    return block.kind in REDUCTIONS and _elements(block.output) < _largest_read(forward, block)


def _saving_reason(forward: ForwardProgram, block: ForwardBlock, save) -> str:
    how = ("chosen by save=" + repr(save) if save != AUTO else
           f"a {block.kind} reduction's output of {_elements(block.output)} elements, smaller than the "
           f"{_largest_read(forward, block)} of the largest buffer its block reads")
    return (f"an intermediate of the forward, {how}: written by the training forward (an extra output) and "
            "passed in, not recomputed")


def _largest_read(forward: ForwardProgram, block: ForwardBlock) -> int:
    return max((_elements(load.source) for load in loads_in(block.stmt)
                if not load.source.same_as(block.output)), default=0)


def _elements(buffer) -> int:
    """The buffer's element count; a symbolic axis (RMSNorm's `rows`) counts as SYMBOLIC_EXTENT, larger than any
    static one, so that shapes sharing it compare by their static axes."""
    return prod(int(e) if isinstance(e, (int, tirx.IntImm)) else SYMBOLIC_EXTENT for e in buffer.shape)


def _distinct_outputs(forward: ForwardProgram) -> list:
    """Every buffer a block writes, in program order, once."""
    buffers = []
    for block in forward.blocks:
        if not any(block.output.same_as(b) for b in buffers):
            buffers.append(block.output)
    return buffers


def _names(forward: ForwardProgram, handles: set) -> list:
    return [b.name for b in _distinct_outputs(forward) if b.__chandle__() in handles]


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
