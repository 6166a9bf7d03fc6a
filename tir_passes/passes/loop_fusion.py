"""LoopFusion: turn a multi-stage PrimFunc into fewer kernels, keeping intermediates on chip.

Three rewrites, with TVM's schedule where it has the primitive (so TVM checks the dependences):
  1. inline: a spatial block that writes an intermediate is inlined into its consumers
     (compute_inline): elementwise producers, exp in softmax, padding before a convolution.
  1b. recompute (recompute.py): a contraction read by several later nests, whose rows do not fit
     in registers and cost less to recompute than to store and load (softmax(Q·Kᵀ) with its
     output written), is copied in front of each later reader nest, unless something between
     writes what it reads; each copy then fuses like a single-reader producer.
  1c. stream (loop_fusion_streaming.py): a contraction whose rows do not fit in registers, read
     by a block that reduces along the axis it produces (attention backward's recomputed Q·Kᵀ in
     its row statistics, dQ and dK/dV), moves under that reduction loop, one element per step,
     which Tiling walks in tiles: flash attention's walk, with no online correction.
  1d. share (loop_fusion_sharing.py, after 2): two nests that recompute one contraction in the same walk
     (attention backward's dK and dV) become one nest that computes it once per step.
  2. fuse over shared axes: a block whose intermediates (one, or several written together, such
     as LayerNorm's two moments or an arg-max's value and index; outputs count too, so that a training
     forward's saved statistics still fuse: the consumer reads them where they are computed and they are
     stored as before, recorded as `stored`, not as kept in registers; such a producer stays whole and its
     consumer moves under it instead, as for a nest of several blocks below: compute_at would compute only
     the part of the output the consumer reads, and TVM refuses it for an output block) are read by one
     later nest is moved under that nest's leading loops (compute_at), when the consumer reads exactly the
     element of the shared axes it is computing (row `vi` of a row reduction; `(vi, vj)` of a
     matmul result in its epilogue), for every intermediate it reads. Each shared-axis iteration
     then computes the rows it needs once, and the intermediates stay in registers (the lowering
     checks this again). A producer whose nest holds several blocks (an online softmax's max and
     sums, OnlineSoftmax) stays whole: its one-block consumer moves under it instead
     (reverse_compute_at), or a consumer nest of several blocks is merged with it over the shared
     loops (TVM's merge, after checking every consumer block reads only the shared element and
     writes nothing the producer nest uses); a producer may move under the reduction loop of an
     online nest's block, computing one element of the row per iteration (flash attention's scores).

Every decision, taken or refused, is recorded with its reason and the global-memory bytes it
saves (the intermediate's write and read), as the root block's "fusion.decisions" record (FusionStep,
fusion_record.py: what, for whom, bytes saved, taken or refused and why).
Refused: a consumer reading a neighbour (`X[vi + 1]`) or a whole other axis of the producer's
output, an intermediate also read by a third nest, a fused row too large for registers, a
producer with a block predicate (compute_at would drop it), and anything TVM's schedule rejects
(its message is the reason).
Assumes: HoistAllocations ran (intermediates are root allocations).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.schedule import ScheduleError

from tir_passes.errors import first_line
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.analyses.nest import (blocks_under, contraction_operands, loop_chain,
                                      perfect_nest, realizes_under)
from tir_passes.infra.pass_util import root_block, s_tir_pass, top_level_statements
from tir_passes.passes.loop_fusion_streaming import identity_var as _identity_var, realize_of as _realize_of
from tir_passes.passes.loop_fusion_streaming import shared_depth, stream_one
from tir_passes.passes.loop_fusion_sharing import share_recomputed_walks
from tir_passes.analyses.recompute import clobbered_inputs, reader_nests, recompute_for_readers, worth_recomputing
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import (FUSE, INLINE, MERGE, MOVE, RECOMPUTE, FusionStep,
                                                fusion_steps, saved_bytes, step_bytes, write_fusion)


def _is_spatial(block: s_tir.SBlock) -> bool:
    return all(iv.iter_type == tirx.IterVar.DataPar for iv in block.iter_vars) and block.init is None


def _writes(block) -> list:
    return [region.source for region in block.writes]


def _reads_of(block: s_tir.SBlock, buf) -> list:
    loads: list = []
    tvm_ffi.structural_walk(
        block.body, (tvm.ir.TensorLoad, lambda l: loads.append(l) if l.source.same_as(buf) else None)
    )
    return loads


def inline_elementwise(sch: s_tir.Schedule, intermediates: set[str], decisions: list[FusionStep]) -> None:
    """Inline every spatial block that writes one intermediate into its consumers (TVM's compute_inline
    checks it may); also InlineElementwise's rewrite, at the front of the pipeline."""
    root = sch.get(sch.get_sblock("root"))
    for block in reversed(blocks_under(root.body)):
        written = _writes(block)
        if not _is_spatial(block) or len(written) != 1 or written[0].name not in intermediates:
            continue
        try:
            sch.compute_inline(sch.get_sblock(block.name_hint))
        except ScheduleError as err:
            decisions.append(
                FusionStep(
                    INLINE, (block.name_hint,), taken=False, reason=f"TVM cannot inline it ({first_line(err, 160)})"
                )
            )
            continue
        decisions.append(FusionStep(INLINE, (block.name_hint,), buffers=(written[0].name,),
                                    reason="elementwise producer", bytes_saved=saved_bytes(written[0])))


def _row_elements(buf, depth: int) -> int | None:
    count = 1
    for dim in list(buf.shape)[depth:]:
        if not isinstance(dim, tirx.IntImm):
            return None
        count *= int(dim.value)
    return count


def _nest_index(sch: s_tir.Schedule, name: str) -> int:
    for index, stmt in enumerate(top_level_statements(sch.mod["main"])):
        if any(b.name_hint == name for b in blocks_under(stmt)):
            return index
    return -1


def _readers(sch: s_tir.Schedule, buf, producer: str) -> list[str]:
    names = []
    for stmt in top_level_statements(sch.mod["main"]):
        for block in blocks_under(stmt):
            if block.name_hint != producer and _reads_of(block, buf):
                names.append(block.name_hint)
    return names


# why a producer is not fused (FusionCandidate.refusal), so that a caller reads a code, never the reason's words:
# a predicate compute_at would drop, an intermediate read by several nests (a merge may still join them), its
# intermediates read by different nests, rows over the register budget, no shared leading loops
PREDICATED, READ_BY_SEVERAL, READ_APART, OVER_BUDGET, NO_SHARED_LOOPS = (
    "predicated", "read-by-several-nests", "read-by-different-nests", "over-register-budget", "no-shared-loops")


@dataclass(frozen=True)
class FusionCandidate:   # a producer's consumer, the leading loops they share (0: not fusable), and why not
    consumer: str | None
    depth: int = 0
    reason: str = ""
    refusal: str | None = None


def _fusion_candidate(sch, producer: s_tir.SBlock, intermediates, limits: BackendLimits) -> FusionCandidate:
    """The candidate for a producer in a nest of its own that writes only intermediates (one, or
    several such as a block computing two moments), or outputs (`intermediates` names them too): an
    output read by several nests keeps its store, so its first reader nest is a candidate alone."""
    written = _writes(producer)
    if not written or any(buf.name not in intermediates for buf in written):
        return FusionCandidate(None)
    read = [(buf, readers) for buf in written if (readers := _readers(sch, buf, producer.name_hint))]
    nests = [{_nest_index(sch, r) for r in readers} for _, readers in read]
    if not read or set().union(*nests) == {_nest_index(sch, producer.name_hint)}:
        return FusionCandidate(None)
    consumer = read[0][1][0]
    stores_only_outputs = not _kept_and_stored(sch, written)[0]
    if stores_only_outputs:
        # outputs stay stored for their other readers: the first reader nest may move under the producer alone
        own = _nest_index(sch, producer.name_hint)
        if any(_nest_index(sch, r) < own for _, readers in read for r in readers):
            return FusionCandidate(None)   # a nest before it reads the output's old value
        consumer = next(r for _, readers in read for r in readers if _nest_index(sch, r) != own)
        read = [(buf, readers) for buf, readers in read if consumer in readers]
        nests = [{_nest_index(sch, consumer)} for _ in read]
    predicate = _realize_of(sch, producer.name_hint).predicate
    if not (isinstance(predicate, tirx.IntImm) and predicate.value == 1):
        # compute_at re-derives the producer's loops from the region the consumer reads and drops
        # a predicate that restricts more than that (fuzzer: tests/fuzz/found/reduction_predicate_fusion.py)
        return FusionCandidate(consumer, 0, f"{producer.name_hint} has the predicate `{predicate}`, which compute_at "
                               "would drop", PREDICATED)
    apart = _read_apart(read, nests)
    if apart is not None:
        return FusionCandidate(consumer, 0, apart[1], apart[0])
    depth, reason = min((shared_depth(sch, producer.name_hint, consumer, buf) for buf, _ in read), key=lambda d: d[0])
    too_large = _over_register_budget(producer, written, depth, limits) if depth else ""
    if too_large:
        return FusionCandidate(consumer, 0, too_large, OVER_BUDGET)
    return FusionCandidate(consumer, depth, reason, None if depth else NO_SHARED_LOOPS)


def _read_apart(read: list, nests: list[set[int]]) -> tuple[str, str] | None:
    """(refusal, why) when the intermediates are not all read by one nest; None when they are."""
    for (buf, readers), used in zip(read, nests):
        if len(used) > 1:
            return READ_BY_SEVERAL, f"{buf.name} is read by several nests ({', '.join(readers)})"
        if used != nests[0]:
            return READ_APART, f"{read[0][0].name} and {buf.name} are read by different nests"
    return None


def _over_register_budget(producer: s_tir.SBlock, written: list, depth: int, limits: BackendLimits) -> str:
    """Why the producer's rows would not fit in registers per shared-axis point ('' when they do)."""
    rows = [_row_elements(buf, depth) for buf in written]
    row = None if None in rows else sum(rows)
    contraction = contraction_operands(producer) is not None
    if limits.row_fits_in_registers(row, contraction):
        return ""
    # a tl.dot computes at least limits.dot_min_block rows of the result at once
    size = row * (limits.dot_min_block if contraction else 1) if row is not None else "a symbolic number of"
    return (
        f"{', '.join(buf.name for buf in written)} would keep {size} elements per shared-axis point in registers, "
        f"over the budget of {limits.register_row_elements}"
    )


def _fuse_one(sch, producer: s_tir.SBlock, consumer: str, depth: int, decisions: list[FusionStep]) -> str:
    """Move the producer under the consumer's leading `depth` loops; '' or TVM's refusal."""
    read = [buf for buf in _writes(producer) if _readers(sch, buf, producer.name_hint)]
    loop = sch.get_loops(sch.get_sblock(consumer))[depth - 1]
    try:
        sch.compute_at(sch.get_sblock(producer.name_hint), loop, preserve_unit_loops=False)
    except ScheduleError as err:
        return f"TVM refuses ({first_line(err, 160)})"
    kept, stored = _kept_and_stored(sch, read)
    decisions.append(FusionStep(FUSE, (producer.name_hint,), (consumer,), tuple(buf.name for buf in kept),
                                bytes_saved=step_bytes(kept, stored), depth=depth,
                                stored=tuple(buf.name for buf in stored)))
    return ""


def _kept_and_stored(sch, buffers: list) -> tuple[list, list]:
    """(the intermediates, which stay in registers; the outputs, which the consumer reads in registers and
    which are still stored)."""
    params = [p for p in sch.mod["main"].params if tirx.is_buffer_var(p)]
    stored = [buf for buf in buffers if any(buf.same_as(p) for p in params)]
    return [buf for buf in buffers if not any(buf.same_as(s) for s in stored)], stored


def _stream_contractions(sch, intermediates: set[str], decisions: list[FusionStep], limits: BackendLimits) -> None:
    """Before fusing over shared axes (which would put the reader's epilogue under its row loops),
    stream every contraction over the register budget into a reader that reduces along its axis."""
    progress = True
    while progress:
        progress = False
        for producer in blocks_under(sch.get(sch.get_sblock("root")).body):
            candidate = _fusion_candidate(sch, producer, intermediates, limits)
            if candidate.refusal == OVER_BUDGET and \
                    not stream_one(sch, producer, candidate.consumer, decisions, limits):
                progress = True
                break


def _nest_blocks(sch: s_tir.Schedule, name: str) -> list[str]:
    """The blocks of the top-level statement that holds block `name`."""
    statement = top_level_statements(sch.mod["main"])[_nest_index(sch, name)]
    return [b.name_hint for b in blocks_under(statement)]


def _consumer_under_nest(sch, producer: s_tir.SBlock, consumer: str, decisions: list[FusionStep]) -> str:
    """Move the consumer nest (one block) under the leading loops it shares with the producer's nest
    of several blocks (reverse_compute_at), which stays whole: its blocks may share loops for a
    reason (an online softmax's running maximum). A consumer nest of several blocks (a normalize
    with its recomputed scores) is merged with it instead: the shared loops become one (TVM's
    merge). '' or why not."""
    nest, consumers = _nest_blocks(sch, producer.name_hint), _nest_blocks(sch, consumer)
    overwritten = _overwritten(sch, nest, consumers) if consumers != [consumer] else ""
    if overwritten:  # TVM's reverse_compute_at checks this itself; its merge does not
        return overwritten
    # every block of the consumer nest reads the producer nest's values only at the shared axes
    read = [
        (name, reader, buf)
        for name in nest
        for buf in _writes(_realize_of(sch, name).block)
        for reader in consumers
        if _reads_of(_realize_of(sch, reader).block, buf)
    ]
    written = [(name, buf) for name, _, buf in read]
    depth, reason = min((shared_depth(sch, name, reader, buf) for name, reader, buf in read), key=lambda d: d[0])
    if not depth:
        return reason
    loop = sch.get_loops(sch.get_sblock(producer.name_hint))[depth - 1]
    try:
        if consumers == [consumer]:
            sch.reverse_compute_at(sch.get_sblock(consumer), loop, preserve_unit_loops=False)
        else:
            sch.merge(loop, sch.get_loops(sch.get_sblock(consumer))[depth - 1])
    except ScheduleError as err:
        return f"TVM refuses ({first_line(err, 160)})"
    kept, stored = _kept_and_stored(sch, list(dict.fromkeys(buf for _, buf in written)))
    decisions.append(FusionStep(MOVE if consumers == [consumer] else MERGE, tuple(consumers), tuple(nest),
                                tuple(buf.name for buf in kept), bytes_saved=step_bytes(kept, stored), depth=depth,
                                stored=tuple(buf.name for buf in stored)))
    return ""


def _overwritten(sch, nest: list[str], consumers: list[str]) -> str:
    """Why the consumer nest cannot run inside the producer's: it writes what the producer nest
    reads or writes ('' when it does not)."""
    touched = {
        buf.name
        for name in nest
        for region in (*_realize_of(sch, name).block.reads, *_realize_of(sch, name).block.writes)
        for buf in (region.source,)
    }
    for reader in consumers:
        clash = sorted({buf.name for buf in _writes(_realize_of(sch, reader).block)} & touched)
        if clash:
            return f"{reader} writes {', '.join(clash)}, which the nest of {', '.join(nest)} uses"
    return ""


def _touched(stmt) -> tuple[set[str], set[str]]:
    """(read, written) buffer names of the blocks under a statement."""
    reads = {r.source.name for b in blocks_under(stmt) for r in b.reads}
    writes = {w.source.name for b in blocks_under(stmt) for w in b.writes}
    return reads, writes


def _independent(a, b) -> bool:
    (read_a, write_a), (read_b, write_b) = _touched(a), _touched(b)
    return not (write_a & (read_b | write_b)) and not (write_b & read_a)


def _shared_row_loops(a, b) -> int:
    """How many leading loops two nests share: same extent, starting at 0, plain serial, and bound
    to a spatial variable of every block under them (rows, not a reduction walked by one of them)."""
    loops_a, loops_b = loop_chain(a)[0], loop_chain(b)[0]
    realizes = [r for stmt in (a, b) for r in realizes_under(stmt)]
    depth = 0
    for x, y in zip(loops_a, loops_b):
        plain = all(
            isinstance(loop.min, tirx.IntImm)
            and loop.min.value == 0
            and not loop.annotations
            and loop.kind == tirx.ForKind.SERIAL
            for loop in (x, y)
        )
        if not plain or not tvm_ffi.structural_equal(x.extent, y.extent):
            break
        rows = all(
            _identity_var(r, x.loop_var) is not None or _identity_var(r, y.loop_var) is not None for r in realizes
        )
        if not rows:
            break
        depth += 1
    return depth


def _read_at_loops(stmt, buf) -> int:
    """How many of the nest's leading loops index `buf` where its blocks read it (axis k by loop k)."""
    loops = loop_chain(stmt)[0]
    depth = len(loops)
    for realize in realizes_under(stmt):
        bound = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
        for read in _reads_of(realize.block, buf):
            k = 0
            while k < min(len(loops), len(read.indices)) and isinstance(bound.get(read.indices[k]), tirx.Var) \
                    and bound[read.indices[k]].same_as(loops[k].loop_var):
                k += 1
            depth = min(depth, k)
    return depth


def _merge_readers(sch: s_tir.Schedule, producer: s_tir.SBlock, decisions: list[FusionStep]) -> bool:
    """Merge the first two nests that read the producer's intermediates over their shared row loops
    (TVM's merge), when they are independent of each other and of every nest between them: the
    producer then has one reader nest and fuses into it, like softmax's statistics (int8 row
    quantization's absmax, read by the scale's and the quantized values' nests)."""
    own = _nest_index(sch, producer.name_hint)
    nests = sorted(
        {_nest_index(sch, r) for buf in _writes(producer) for r in _readers(sch, buf, producer.name_hint)} - {own}
    )
    if len(nests) < 2 or nests[0] < own:
        return False
    statements = top_level_statements(sch.mod["main"])
    first, second = statements[nests[0]], statements[nests[1]]
    between = statements[nests[0] + 1 : nests[1]]
    if not _independent(first, second) or not all(_independent(s, n) for s in between for n in (first, second)):
        return False
    depth = _shared_row_loops(first, second)
    at = {_read_at_loops(stmt, buf) for stmt in (first, second) for buf in _writes(producer)}
    if not depth or len(at) != 1:  # read at different rows (dQ's rows i, dK's rows j walking i): not one nest
        return False
    names = [blocks_under(stmt)[0].name_hint for stmt in (first, second)]
    loops = [sch.get_loops(sch.get_sblock(name))[depth - 1] for name in names]
    try:
        sch.merge(*loops)
    except ScheduleError:
        return False
    read = ", ".join(b.name for b in _writes(producer))
    decisions.append(FusionStep(MERGE, (names[1],), (names[0],), bytes_saved=0, depth=depth,
                                reason=f"both read {read} of {producer.name_hint}, independently"))
    return True


def _fuse_over_shared_axes(sch, intermediates: set[str], decisions: list[FusionStep], limits: BackendLimits) -> None:
    """Fuse until nothing changes (consumers first, so chains collapse), then record refusals."""
    refused: dict[str, FusionStep] = {}
    progress = True
    while progress:
        progress = False
        root = sch.get(sch.get_sblock("root"))
        for producer in reversed(blocks_under(root.body)):
            if producer.name_hint in ("root",) or producer.name_hint in refused:
                continue
            candidate = _fusion_candidate(sch, producer, intermediates, limits)
            consumer, depth = candidate.consumer, candidate.depth
            if candidate.refusal == READ_BY_SEVERAL and _merge_readers(sch, producer, decisions):
                progress = True
                break
            if consumer is None or not depth:
                continue
            if len(_nest_blocks(sch, producer.name_hint)) > 1 or _kept_and_stored(sch, _writes(producer))[1]:
                action = MOVE if _nest_blocks(sch, consumer) == [consumer] else MERGE
                failure = _consumer_under_nest(sch, producer, consumer, decisions)
            else:
                action, failure = FUSE, _fuse_one(sch, producer, consumer, depth, decisions)
            if failure:
                refused[producer.name_hint] = FusionStep(
                    action, (producer.name_hint,), (consumer,), taken=False, reason=failure
                )
                continue
            # a refusal may not stand once the nests changed (normalize under var's nest needs mean's there
            # first, for a training forward's statistics): try every producer again
            refused.clear()
            progress = True
            break
    root = sch.get(sch.get_sblock("root"))
    for producer in blocks_under(root.body):
        candidate = _fusion_candidate(sch, producer, intermediates, limits)
        if producer.name_hint in refused:
            decisions.append(refused[producer.name_hint])
        elif candidate.consumer is not None and not candidate.depth:
            decisions.append(FusionStep(FUSE, (producer.name_hint,), (candidate.consumer,), taken=False,
                                        reason=candidate.reason))


def _recompute_contractions(
    func: tirx.PrimFunc, intermediates: set[str], decisions: list[FusionStep], spec: GpuSpec
) -> tirx.PrimFunc:
    """A contraction read by several later nests whose rows do not fit in registers is copied in
    front of each later reader (recompute.py), where recomputing beats the memory round trip."""
    index = 0
    while index < len(top_level_statements(func)):
        nest = perfect_nest(top_level_statements(func)[index])
        written = _writes(nest[1].block) if nest is not None else []
        if len(written) == 1 and written[0].name in intermediates:
            buffer, block = written[0], nest[1].block
            readers = [i for i in reader_nests(func, buffer) if i > index]
            why = worth_recomputing(block, buffer, spec) if len(readers) > 1 else None
            if why and not spec.limits.row_fits_in_registers(_row_elements(buffer, 1), contraction=True):
                clobbered = clobbered_inputs(func, index)
                if clobbered:
                    decisions.append(FusionStep(RECOMPUTE, (block.name_hint,), taken=False, reason=clobbered))
                else:
                    statements = top_level_statements(func)
                    readers_blocks = tuple(
                        b.name_hint for i in readers for b in blocks_under(statements[i]) if _reads_of(b, buffer)
                    )
                    func, copies = recompute_for_readers(func, index)
                    decisions.append(
                        FusionStep(
                            RECOMPUTE,
                            (block.name_hint,),
                            readers_blocks,
                            (buffer.name,),
                            reason=f"its rows do not fit in registers, and {why}",
                            copies=tuple(copies),
                        )
                    )
        index += 1
    return func


def fuse_loops(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    intermediates = {b.name for b in root_block(func).alloc_buffers}
    if not _fusable(func) or len(top_level_statements(func)) < 2:
        return func
    sch = s_tir.Schedule(func)
    # InlineElementwise, at the front of the pipeline, may have inlined already: its steps come first
    decisions: list[FusionStep] = list(fusion_steps(func))
    inline_elementwise(sch, intermediates, decisions)
    func = _recompute_contractions(sch.mod["main"], intermediates, decisions, spec)
    sch = s_tir.Schedule(func)
    _stream_contractions(sch, {b.name for b in root_block(func).alloc_buffers}, decisions, spec.limits)
    _fuse_over_shared_axes(sch, _fusable(func), decisions, spec.limits)
    if not decisions:
        return func
    return write_fusion(share_recomputed_walks(sch.mod["main"], decisions, spec.limits), decisions)


def _fusable(func: tirx.PrimFunc) -> set[str]:
    """The buffers whose producers may fuse into their readers: the intermediates, and the outputs (a
    training forward's statistics: read where computed, still stored)."""
    return {b.name for b in root_block(func).alloc_buffers} | {p.name for p in func.params if tirx.is_buffer_var(p)}


def LoopFusion(gpu: str = "H200", limits: BackendLimits | None = None):
    spec = gpu_spec(gpu, limits)
    return s_tir_pass("LoopFusion", lambda func: fuse_loops(func, spec))
