"""LoopFusion's streaming (rewrite 1c) and the leading loops a producer and its consumer share.

Streaming: a contraction whose rows do not fit in registers, read by a block that reduces along the
axis it produces (analyses/streaming.py says when and in which loop order), is moved under that
reduction loop, one element per iteration (TVM's compute_at), and Tiling walks the loop in tiles
(fusion step "stream", read back by `fusion_record.streaming_blocks`): attention backward's
recomputed Q·Kᵀ and dO·Vᵀ inside the row statistics, dQ's pass over the keys and dK/dV's pass over
the queries. A reader that reduces along an earlier axis of the intermediate (dK's reader of S[i, j]
sums over i) gets the intermediate, its own recomputed copy, transposed first.
Why here and not in loop_fusion.py: its line budget; LoopFusion calls `stream_one` before fusing
over shared axes (which would put the reader's epilogue under its row loops).
Assumes: HoistAllocations ran (intermediates are root allocations).
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.schedule import ScheduleError

from tir_passes.analyses.nest import SPATIAL, block_accesses, contraction_operands, loop_kind
from tir_passes.analyses.streaming import stream_order
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import STREAM, FusionStep, saved_bytes
from tir_passes.contracts.online_contract import online_rescale, online_shift
from tir_passes.errors import first_line
from tir_passes.infra.pass_util import static_int


def _writes(block) -> list:
    return [region.source for region in block.writes]


def _reads_of(block: s_tir.SBlock, buf) -> list:
    loads: list = []
    tvm_ffi.structural_walk(
        block.body, (tvm.ir.TensorLoad, lambda l: loads.append(l) if l.source.same_as(buf) else None)
    )
    return loads


def identity_var(realize: s_tir.SBlockRealize, loop_var, streams: bool = False, unit: bool = False) -> tirx.Var | None:
    """The block variable bound to exactly `loop_var`, if any: a spatial one, or with `streams` (a block of an
    online nest, which folds its reduction axis tile by tile) a reduction one too; with `unit` (a loop of one
    iteration) one of extent 1 bound to 0 too (TVM's compute_at binds so under a unit loop: a batch of one)."""
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        bound = isinstance(value, tirx.Var) and value.same_as(loop_var)
        at_zero = unit and isinstance(value, tirx.IntImm) and value.value == 0 and static_int(iv.dom.extent) == 1
        if (bound or at_zero) and (iv.iter_type == tirx.IterVar.DataPar or streams):
            return iv.var
    return None


def _streams(block: s_tir.SBlock) -> bool:
    """A block of an online nest (OnlineSoftmax): a producer may move under its reduction loop,
    computing one element of the row per iteration."""
    return online_shift(block) is not None or online_rescale(block) is not None


def realize_of(sch: s_tir.Schedule, name: str) -> s_tir.SBlockRealize:
    found: list = []
    tvm_ffi.structural_walk(
        sch.mod["main"].body, (s_tir.SBlockRealize, lambda r: found.append(r) if r.block.name_hint == name else None)
    )
    return found[0]


def shared_depth(sch: s_tir.Schedule, producer: str, consumer: str, buf, streams: bool = False) -> tuple[int, str]:
    """How many leading loops the consumer can share with the producer, and why not more; with
    `streams`, a loop of the consumer's reduction counts too (streaming.py)."""
    p_real, c_real = realize_of(sch, producer), realize_of(sch, consumer)
    p_loops = [sch.get(rv) for rv in sch.get_loops(sch.get_sblock(producer))]
    c_loops = [sch.get(rv) for rv in sch.get_loops(sch.get_sblock(consumer))]
    stores = [a.node for a in block_accesses(p_real.block) if a.is_store and a.buffer.same_as(buf)]
    if len(stores) != 1:
        return 0, f"{producer} is not a single store to {buf.name}"
    store = stores[0]
    reads = _reads_of(c_real.block, buf)
    depth, reason = 0, f"{producer} and {consumer} share no leading spatial axis"
    for axis in range(min(len(store.indices), len(p_loops), len(c_loops))):
        unit = static_int(p_loops[axis].extent) == 1 and static_int(c_loops[axis].extent) == 1
        p_var = identity_var(p_real, p_loops[axis].loop_var, unit=unit)
        c_var = identity_var(c_real, c_loops[axis].loop_var, streams or _streams(c_real.block), unit=unit)
        if p_var is None or c_var is None or not store.indices[axis].same_as(p_var):
            break
        mismatch = next(
            (r for r in reads if not (isinstance(r.indices[axis], tirx.Var) and r.indices[axis].same_as(c_var))), None
        )
        if mismatch is not None:
            index = ", ".join(str(i) for i in mismatch.indices)
            reason = (
                f"{consumer} reads {buf.name}[{index}], not the element of the shared axis it computes "
                f"({c_var.name}): fusing would need values another program computes"
            )
            break
        if not tvm_ffi.structural_equal(p_loops[axis].extent, c_loops[axis].extent):
            reason = (
                f"the axis has extent {p_loops[axis].extent} in {producer} but {c_loops[axis].extent} in {consumer}"
            )
            break
        depth += 1
    return (depth, "") if depth else (0, reason)


def stream_one(sch, producer: s_tir.SBlock, consumer: str, decisions: list[FusionStep], limits: BackendLimits) -> str:
    """A contraction over the register budget whose reader reduces along the axis it produces
    (streaming.py): order the reader's loops so that they carry the produced element first, and move
    the producer under them, one element per step of the reduction. '' or why not."""
    written = _writes(producer)
    if contraction_operands(producer) is None or len(written) != 1:
        return f"{producer.name_hint} is not a contraction writing one intermediate"
    rvs = sch.get_loops(sch.get_sblock(consumer))
    loops = [sch.get(rv) for rv in rvs]
    axes, order, why = stream_order(loops, realize_of(sch, consumer), written[0])
    if not order:
        return why
    rest = [static_int(l.extent) for l in order[len(axes):] if loop_kind(l, realize_of(sch, consumer)) == SPATIAL]
    if not limits.row_fits_in_registers(None if None in rest else math.prod(rest), contraction=True):
        # a matmul chain's second product over a wide N: its accumulator row would not fit beside the walk
        return f"{consumer}'s accumulator row ({' x '.join(str(r) for r in rest)}) is over the register budget"
    if axes != sorted(axes):
        why = _transpose_for_reader(sch, producer.name_hint, written[0], axes)
        if why:
            return why
        written = _writes(sch.get(sch.get_sblock(producer.name_hint)))
        rvs = sch.get_loops(sch.get_sblock(consumer))
        loops = [sch.get(rv) for rv in rvs]
        axes, order, why = stream_order(loops, realize_of(sch, consumer), written[0])
    if any(not a.same_as(b) for a, b in zip(order, loops)):  # a second producer streamed in finds them ordered
        try:
            sch.reorder(*[rvs[next(i for i, l in enumerate(loops) if l.same_as(o))] for o in order])
        except ScheduleError as err:
            return f"TVM refuses to reorder {consumer}'s loops ({first_line(err, 160)})"
    depth, reason = shared_depth(sch, producer.name_hint, consumer, written[0], streams=True)
    if depth < len(written[0].shape):
        return reason or f"{consumer} does not read {written[0].name} at its loops"
    try:
        sch.compute_at(sch.get_sblock(producer.name_hint), sch.get_loops(sch.get_sblock(consumer))[depth - 1],
                       preserve_unit_loops=False)
    except ScheduleError as err:
        return f"TVM refuses ({first_line(err, 160)})"
    decisions.append(FusionStep(STREAM, (producer.name_hint,), (consumer,), (written[0].name,),
                                bytes_saved=saved_bytes(written[0]), depth=depth))
    return ""


def _transpose_for_reader(sch, producer: str, buf, axes: list[int]) -> str:
    """Lay out the producer's intermediate (read by one reader nest) in the order `axes` and put the
    producer's loops in that order, so that its store follows its loops again. '' or why not."""
    index_map = tirx.IndexMap.from_func(lambda *ix: tuple(ix[a] for a in axes), ndim=len(axes), index_dtype="int32")
    realize = realize_of(sch, producer)
    rvs = sch.get_loops(sch.get_sblock(producer))
    loops = [sch.get(rv) for rv in rvs]
    store = next(a.node for a in block_accesses(realize.block) if a.is_store and a.buffer.same_as(buf))
    bound = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    by_axis = [next((n for n, l in enumerate(loops) if l.loop_var.same_as(bound.get(i))), None) for i in store.indices]
    if None in by_axis:
        return f"{producer} does not store {buf.name} at its loops"
    try:
        sch.transform_layout(sch.get_sblock(producer), buf.name, index_map)
        sch.reorder(*[rvs[by_axis[a]] for a in axes])
    except ScheduleError as err:
        return f"TVM refuses to transpose {buf.name} ({first_line(err, 160)})"
    return ""
