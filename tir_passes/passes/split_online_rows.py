"""SplitOnlineRows: split a long row walked by an online softmax into chunks when its row tiles
alone leave the GPU idle: each chunk's statistics in a program of its own, then their combination,
then the row's readers (the normalize pass) on a grid of their own.

Rewrite: a fused nest (LoopFusion's) `for rows: {for j: <online max M and sums Y, OnlineSoftmax's
marks>; <readers of M and Y>}` whose sums are per-row statistics becomes three nests:

    for c, rows:  for j' in C:  M_part[c, r], Y_part[c, r] online over j = c*C + j'   (its own marks)
    for rows:     for c: M[r] = max(M[r], M_part[c, r])
                  for c: Y[r] = Y[r] + Y_part[c, r] * F(M_part[c, r], M[r])           (F: the sum's rescale)
    for rows:     <the readers, unchanged>

By the online identity (online_contract.py) each Y_part[c]·exp(c·M_part[c]) is the chunk's sum of
u·exp(c·x), so the combination gives the unsplit M and Y. Tiling makes c and the row tiles program
ids of the first kernel (the max block's OnlineSplit mark says so), the combination a small kernel
over row tiles, and the readers' nest a 2-D grid where they are a contraction with an epilogue
(softmax(Q·Kᵀ) with the scores written: the scores recomputed and stored tile by tile).

The decision is the max block's "online.split" annotation (OnlineSplit: splits, chunk, and the
combined buffer), with the reasons, taken or refused, in the root block's "online.split_decisions".
The split count is online_split_sizes.online_splits: among powers of two that divide the row, keep at
least MIN_ONLINE_CHUNK elements a chunk and are needed for two waves of programs (at the online row tile,
tile_sizes.online_sizes), the one the price says is cheapest, if it saves a tenth of the unsplit walk's
price: the walk by Little's law per program (what a program streams per key over what it keeps in
flight, the GEMM price's terms) with its exponentials and dots added where a multiprocessor holds one
program, the split as the chunks' statistics, the readers at the copy bandwidth and two more kernels at
their measured cost. Where the row tiles already fill the GPU (many rows) nothing changes.

Why: a long row on few programs streams at one program's pace: 1024 queries over 65536 keys with their
scores written are 8 row tiles of 128 on 132 multiprocessors, each walking all the keys twice (558 µs by
the price; split 32 ways, 256 programs: 109 µs). softmax(Q·Kᵀ) 4096×4096×128 (the suite's) splits 8
ways: measured on an H100 (2026-12-07) its modules ran 66.1 µs whole, 60.6 split 8 ways and 69.2 split
4 ways (128 statistics programs, one a multiprocessor), the order the price gives on the H100's figures.
Why after LoopFusion: the stats loop with its scores fused under it, and the readers beside it, are the
form this splits; LoopFusion's record still says what it fused, and this pass's record says which rows
it then split apart (the readers read the combined statistics from memory: a few bytes per row).
Assumes: LoopFusion ran (a fused nest's shared loops are spatial for every block). Only static extents;
only sums whose outputs are indexed by the rows alone (attention's weighted sum of V, with a head axis,
is flash-decoding, not this); sums without the -inf restart only where every chunk's first element is
proven finite (analyses/leading_element.py at any chunk start: unmasked scores, and a causal mask, under
which a chunk masked at its first key is masked whole), the restarting form whatever its chunks;
deterministic=True splits nothing (the split count follows the number of rows, docs/determinism.md).
"""

from __future__ import annotations

import dataclasses
import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.leading_element import first_element_finite
from tir_passes.analyses.nest import (REDUCE, SPATIAL, block_accesses, blocks_under, contraction_operands, is_self_load,
                                     is_zero, loop_chain, loop_kind, loops_under, next_power_of_two, operands_dtype,
                                     realizes_under, select_parts, unique_name)
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.contracts.online_contract import (RESCALE_KEY, SHIFT_KEY, SPLIT_DECISIONS_KEY, SPLIT_KEY, OnlineRescale,
                                                  OnlineShift, OnlineSplit, online_rescale, online_shift,
                                                  rescale_value, shift_value, split_value)
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, static_int, top_level_statements
from tir_passes.infra.pass_util import with_root_block
from tir_passes.infra.dtypes import element_bytes
from tir_passes.passes.online_split_sizes import OnlineRow, online_splits
from tir_passes.passes.tile_sizes import PIPELINE_STAGES, key_tiles_widen, online_sizes, rows_filling_the_gpu


class _Refused(Exception):
    """Why a fused online nest keeps its rows whole."""


def _substitute(node, mapping: dict):
    return tvm_ffi.structural_map(node, (tvm.ir.Var, lambda var: mapping.get(var.__chandle__(), var)))


def _online_realizes(loop: tirx.For) -> tuple[s_tir.SBlockRealize, list[s_tir.SBlockRealize]]:
    """(the max's realize, the sums') directly under the online loop."""
    realizes = realizes_under(loop.body)
    shifts = [r for r in realizes if online_shift(r.block) is not None]
    sums = [r for r in realizes if online_rescale(r.block) is not None]
    if len(shifts) != 1 or not shifts[0].block.annotations.get(SHIFT_KEY) or not sums:
        raise _Refused("no online max with sums directly under the loop")
    return shifts[0], sums


def _check_rows(shift: s_tir.SBlockRealize, sums: list, loop: tirx.For) -> None:
    store = shift.block.body.seq[-1] if isinstance(shift.block.body, tirx.SeqStmt) else shift.block.body
    for realize in [shift, *sums]:
        if loop_kind(loop, realize) != REDUCE or not any(v.same_as(loop.loop_var) for v in realize.iter_values):
            raise _Refused(f"{realize.block.name_hint} does not reduce over loop {loop.loop_var.name} alone")
    for realize in sums:
        body = realize.block.body
        if not isinstance(body, tirx.BufferStore) or len(body.indices) != len(store.indices) or not all(
                _same_row(a, shift, b, realize) for a, b in zip(store.indices, body.indices)):
            raise _Refused(f"{realize.block.name_hint} keeps more than one value per row (a sum with other axes)")


def _same_row(index_a, realize_a, index_b, realize_b) -> bool:
    bound_a = _substitute(index_a, {iv.var.__chandle__(): v for iv, v in zip(realize_a.block.iter_vars,
                                                                             realize_a.iter_values)})
    bound_b = _substitute(index_b, {iv.var.__chandle__(): v for iv, v in zip(realize_b.block.iter_vars,
                                                                             realize_b.iter_values)})
    return tvm_ffi.structural_equal(bound_a, bound_b)


def _rescale_factor(block: s_tir.SBlock):
    """F of a sum `Y = Y * F + t`, or of its restarting form `Y = select(P == -inf, 0, Y * F) + t`
    (OnlineSoftmax's two forms)."""
    store = block.body
    value = store.value
    if isinstance(value, tirx.Add):
        for product in (value.a, value.b):
            parts = select_parts(product)
            if parts is not None and is_zero(parts[1]):
                product = parts[2]
            if isinstance(product, tirx.Mul) and is_self_load(product.a, store):
                return product.b
    raise _Refused(f"{block.name_hint} is not Y = Y * F + t")


def _splits(spec: GpuSpec, func, stmt, shared: list, loop: tirx.For) -> tuple[int, str]:
    """(splits, why) by online_split_sizes' price of this walk, or _Refused with the price."""
    extents = [static_int(l.extent) for l in shared]
    row = static_int(loop.extent)
    if None in extents or row is None:
        raise _Refused("symbolic extents")
    dots = [r for r in realizes_under(loop) if contraction_operands(r.block) is not None]
    dtype = operands_dtype(*contraction_operands(dots[0].block)) if dots else "float32"
    row_bytes = _row_bytes({p.name for p in func.params if tirx.is_buffer_var(p)}, stmt, loop, dots)
    depth = row_bytes[0] // element_bytes(dtype) if dots else None   # Tiling's tiles read the head dimension too
    rows, columns, _, stages = online_sizes(spec, dtype, extents[-1], row, bool(dots), spec.limits, depth, False)
    programs = math.prod(extents[:-1]) * -(-extents[-1] // rows)
    chunked = OnlineRow(programs, rows, row, *row_bytes, in_flight=0.0,  # the dots' flops: 2 × depth a key
                        dot_flops=2 * depth if dots else 0,
                        dot_tflops=spec.dot_tflops(dtype, "ieee") if dots else None)
    chunked = dataclasses.replace(chunked, in_flight=max(1, stages - 1) * columns * _per_key(chunked))
    whole = chunked
    if dots:  # unsplit, Tiling gives a contraction's rows fewer per program to fill one wave, wider key tiles
        fewer = rows_filling_the_gpu(rows, extents[-1], math.prod(extents[:-1]), spec)
        wide = min(columns * rows // fewer, next_power_of_two(row)) if key_tiles_widen(dtype) else columns
        whole = dataclasses.replace(chunked, rows=fewer, programs=math.prod(extents[:-1]) * -(-extents[-1] // fewer))
        whole = dataclasses.replace(whole, in_flight=(PIPELINE_STAGES - 1) * wide * _per_key(whole))
    price = online_splits(spec, whole, chunked)
    costs = f"{price.unsplit_seconds * 1e6:.1f} us unsplit"
    if price.splits == 1:
        raise _Refused(f"{programs} programs of {rows} rows over {row} elements: no split pays by the price "
                       f"({costs}; a split adds two kernels, {spec.multiprocessors} multiprocessors)")
    split = f"{price.seconds * 1e6:.1f} us by the price"
    return price.splits, f"{programs} programs of {rows} rows make fewer than 2 waves on {spec.multiprocessors} " \
        f"multiprocessors, {programs * price.splits} with the chunks ({split}, {costs})"


def _per_key(walk: OnlineRow) -> int:
    return walk.key_bytes + walk.rows * walk.element_bytes


def _row_bytes(params: set[str], stmt, loop: tirx.For, dots: list) -> tuple[int, int, int, int]:
    """(key bytes, element bytes, out bytes, walks) of the walk: a contraction's second operand per
    key (its depth × element size), the parameters the online blocks read per element, the
    parameters the readers write per element, and whether the readers walk the row again."""
    readers = [r for nest in list(loop_chain(stmt)[1].seq)[1:] for r in realizes_under(nest)]
    key_bytes = 0
    for realize in dots:
        depth = math.prod(static_int(l.extent) or 1 for l in loops_under(loop) if loop_kind(l, realize) == REDUCE)
        key_bytes += depth * element_bytes(operands_dtype(*contraction_operands(realize.block)))
    element = sum(element_bytes(str(a.buffer.dtype)) for r in realizes_under(loop) if contraction_operands(r.block)
                  is None for a in block_accesses(r.block) if not a.is_store and a.buffer.name in params)
    out = sum(element_bytes(str(a.buffer.dtype)) for r in readers for a in block_accesses(r.block)
              if a.is_store and a.buffer.name in params)
    return key_bytes, element, out, 2 if readers else 1


def _chunks_start_finite(func, shift: s_tir.SBlockRealize, loop: tirx.For) -> None:
    """A sum written without the -inf restart (the mark's first_finite) stays right per chunk only
    where every chunk's first element is finite; the restarting form is right for any chunk."""
    if not online_shift(shift.block).first_finite:
        return
    store = _last_store(shift.block)
    if not isinstance(store.value, tirx.Max):
        raise _Refused(f"{shift.block.name_hint} is not M = max(M, x)")
    element = store.value.b if is_self_load(store.value.a, store) else store.value.a
    axis = next(iv for iv, v in zip(shift.block.iter_vars, shift.iter_values) if v.same_as(loop.loop_var))
    start = tirx.Var("chunk_start", "int32")   # any chunk's start, unknown: only what holds everywhere is proven
    anywhere = tirx.IterVar(tvm.ir.Range(start, 1), axis.var, tirx.IterVar.CommReduce)
    proven, why = first_element_finite(func, shift.block, element, anywhere)
    if not proven:
        raise _Refused(f"a chunk's first element is not proven finite ({why})")


def _partial_block(realize, parts: dict, c, chunk_loop_var, chunk: int, splits: int, split_mark) -> tuple:
    """The online block over chunk `c`: writes its buffers' partials; (new realize)."""
    block = realize.block
    vc = tirx.IterVar(tvm.ir.Range(0, splits), tirx.Var("vc", "int32"), tirx.IterVar.DataPar)
    reduce_iv = next(iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce)
    inner = tirx.IterVar(tvm.ir.Range(0, chunk), tirx.Var(reduce_iv.var.name, "int32"), tirx.IterVar.CommReduce)
    mapping = {reduce_iv.var.__chandle__(): vc.var * chunk + inner.var}

    def to_part(node):
        node = _substitute(node, mapping)
        node = tvm_ffi.structural_map(node, (tvm.ir.TensorLoad, lambda l: tirx.BufferLoad(
            parts[l.source.name], [vc.var, *l.indices]) if l.source.name in parts else l))
        return tvm_ffi.structural_map(node, (tirx.BufferStore, lambda s: tirx.BufferStore(
            parts[s.buffer.name], s.value, [vc.var, *s.indices]) if s.buffer.name in parts else s))

    iter_vars = [vc] + [inner if iv.same_as(reduce_iv) else iv for iv in block.iter_vars]
    values = [c] + [chunk_loop_var if iv.same_as(reduce_iv) else v for iv, v in zip(block.iter_vars,
                                                                                    realize.iter_values)]
    annotations = dict(block.annotations)
    if (shift := online_shift(block)) is not None:
        annotations[SHIFT_KEY] = shift_value(OnlineShift(parts[shift.shift].name, parts[shift.previous].name,
                                                         shift.streamed, shift.first_finite))
        annotations[SPLIT_KEY] = split_value(split_mark)
    else:
        rescale = online_rescale(block)
        annotations[RESCALE_KEY] = rescale_value(OnlineRescale(parts[rescale.shift].name,
                                                               parts[rescale.previous].name))
    new = replace_block(block, iter_vars=iter_vars, body=to_part(block.body),
                        init=to_part(block.init) if block.init is not None else None, annotations=annotations)
    return s_tir.SBlockRealize(values, realize.predicate, new)


def _combine_nest(shift, sums, parts: dict, shared: list, splits: int, taken: set[str]) -> tirx.Stmt:
    """for rows: for c: M = max(M, M_part[c]); for each sum, for c: Y = Y + Y_part[c] * F(M_part[c], M)."""
    row_vars = [tirx.Var(loop.loop_var.name, "int32") for loop in shared]
    mark = online_shift(shift.block)
    shift_init = next(s for s in _stores(shift.block.init) if s.buffer.name == mark.shift)
    statements = [_combine_loop(shift, _last_store(shift.block), splits, shared, row_vars, taken, parts,
                                lambda own, part, vc, rows: tirx.Max(own, part), shift_init.value)]
    for realize in sums:
        factor = _rescale_factor(realize.block)

        def combined(own, part, vc, rows, factor=factor, realize=realize, mapping=None):
            local = tvm_ffi.structural_map(factor, (tvm.ir.TensorLoad, lambda l: tirx.BufferLoad(
                parts[mark.shift], [vc, *l.indices]) if l.source.name == mark.previous else l))
            # a chunk whose maximum stayed -inf adds nothing (its partial sum may be NaN: exp(-inf + inf))
            empty = tirx.EQ(tirx.BufferLoad(parts[mark.shift], [vc, *rows]), tirx.const(float("-inf"), "float32"))
            return tirx.Add(own, tirx.if_then_else(empty, tirx.const(0.0, part.ty.dtype), tirx.Mul(part, local)))
        statements.append(_combine_loop(realize, realize.block.body, splits, shared, row_vars, taken, parts,
                                        combined, realize.block.init.value))
    stmt = tirx.SeqStmt(statements)
    for loop, var in reversed(list(zip(shared, row_vars))):
        stmt = tirx.For(var, loop.min, loop.extent, tirx.ForKind.SERIAL, stmt)
    return stmt


def _stores(stmt) -> list:
    found: list = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, found.append))
    return found


def _last_store(block: s_tir.SBlock) -> tirx.BufferStore:
    return block.body.seq[-1] if isinstance(block.body, tirx.SeqStmt) else block.body


def _combine_loop(realize, store, splits: int, shared: list, row_vars: list, taken: set[str], parts: dict,
                  combine, init):
    """for c: `store`'s buffer at the row = combine(its value, the part at chunk c, c), in a block of
    its own variables: the rows (spatial, bound to the combine nest's row loops) and the chunk."""
    c = tirx.Var("c", "int32")
    fresh = {loop.loop_var.__chandle__(): tirx.IterVar(tvm.ir.Range(loop.min, loop.extent),
                                                        tirx.Var(f"v{loop.loop_var.name}", "int32"),
                                                        tirx.IterVar.DataPar) for loop in shared}
    mapping = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.iter_type != tirx.IterVar.CommReduce:
            mapping[iv.var.__chandle__()] = fresh[value.__chandle__()].var
    vc = tirx.IterVar(tvm.ir.Range(0, splits), tirx.Var("vc", "int32"), tirx.IterVar.CommReduce)
    rows = [_substitute(index, mapping) for index in store.indices]
    own = tirx.BufferLoad(store.buffer, rows)
    part = tirx.BufferLoad(parts[store.buffer.name], [vc.var, *rows])
    value = _substitute(combine(own, part, vc.var, rows), mapping)
    block = s_tir.SBlock(iter_vars=[*fresh.values(), vc], reads=[], writes=[],
                         name_hint=unique_name(f"{realize.block.name_hint}_combine", taken),
                         body=tirx.BufferStore(store.buffer, value, rows),
                         init=tirx.BufferStore(store.buffer, init, rows))
    return tirx.For(c, 0, splits, tirx.ForKind.SERIAL, s_tir.SBlockRealize([*row_vars, c], True, block))


def _check_bindings(realizes: list, shared: list) -> None:
    handles = {loop.loop_var.__chandle__() for loop in shared}
    for realize in realizes:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type != tirx.IterVar.CommReduce and not (
                    isinstance(value, tirx.Var) and value.__chandle__() in handles):
                raise _Refused(f"{realize.block.name_hint}'s row {iv.var.name} is not bound to a row loop")


def _plan(func, stmt, spec: GpuSpec):
    """(shared loops, online loop, max, sums, splits) of a fused online nest worth splitting."""
    shared, inner = loop_chain(stmt)
    if not shared or not isinstance(inner, tirx.SeqStmt) or not isinstance(inner.seq[0], tirx.For):
        return None
    loop = inner.seq[0]
    if not any(online_shift(b) is not None for b in blocks_under(loop)):
        return None
    every = realizes_under(stmt)
    if any(loop_kind(l, r) != SPATIAL for l in shared for r in every):
        raise _Refused("a shared loop is not spatial for every block")
    shift, sums = _online_realizes(loop)
    if online_shift(shift.block).shift in {p.name for p in func.params if tirx.is_buffer_var(p)}:
        raise _Refused("the running maximum is an output")
    _check_rows(shift, sums, loop)
    _check_bindings([shift, *sums], shared)
    for realize in sums:
        _rescale_factor(realize.block)
    _chunks_start_finite(func, shift, loop)
    return shared, loop, shift, sums, _splits(spec, func, stmt, shared, loop)


def _split(func, stmt, plan, taken_buffers: set[str], taken_blocks: set[str]) -> tuple[list, list, str]:
    """(the nests replacing `stmt`, the partial buffers, the decision's text)."""
    shared, loop, shift, sums, (splits, programs) = plan
    row = static_int(loop.extent)
    chunk = row // splits
    mark = online_shift(shift.block)
    written = [mark.shift, mark.previous] + [_last_store(r.block).buffer.name for r in sums]
    buffers = {b.name: b for b in [*root_block(func).alloc_buffers, *func.params] if tirx.is_buffer_var(b)}
    parts = {name: tirx.decl_buffer([splits, *buffers[name].shape], buffers[name].dtype,
                                    unique_name(f"{name}_part", taken_buffers), layout=None) for name in written}
    c, inner = tirx.Var("c", "int32"), tirx.Var(loop.loop_var.name, "int32")
    split_mark = OnlineSplit(splits, chunk, mark.shift)
    online = {r.block.name_hint for r in [shift, *sums]}
    body = tvm_ffi.structural_map(loop.body, (s_tir.SBlockRealize, lambda r: _partial_block(
        r, parts, c, inner, chunk, splits, split_mark) if r.block.name_hint in online else r))
    rows = [tirx.Var(l.loop_var.name, "int32") for l in shared]
    body = _substitute(body, {loop.loop_var.__chandle__(): c * chunk + inner,
                              **{l.loop_var.__chandle__(): v for l, v in zip(shared, rows)}})
    partial = tirx.For(inner, 0, chunk, tirx.ForKind.SERIAL, body)
    for l, v in reversed(list(zip(shared, rows))):
        partial = tirx.For(v, l.min, l.extent, tirx.ForKind.SERIAL, partial)
    partial = tirx.For(c, 0, splits, tirx.ForKind.SERIAL, partial)
    nests = [partial, _combine_nest(shift, sums, parts, shared, splits, taken_blocks)]
    rest = list(loop_chain(stmt)[1].seq)[1:]
    if rest:
        readers = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
        for l in reversed(shared):
            readers = tirx.For(l.loop_var, l.min, l.extent, l.kind, readers, l.thread_binding, l.annotations)
        nests.append(readers)
    why = (f"{shift.block.name_hint}: split {splits} ways over {loop.loop_var.name} (chunks of {chunk} of {row}): "
           f"{programs}; partials in {', '.join(p.name for p in parts.values())}, "
           f"combined into {', '.join(written[:1] + written[2:])} by their own nest, whose readers run on a grid "
           "of their own")
    undone = [step for step in fusion_steps(func) if step.taken and mark.shift in step.buffers]
    if undone:
        why += "; this undoes LoopFusion's " + ", ".join(f"{s.action} of {', '.join(s.blocks)}" for s in undone)
    return nests, list(parts.values()), why


def _with_regions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Every block's read and write regions as the parser would fill them (the rewritten blocks')."""
    root = root_block(func)
    buffers = {b: b for b in [*func.params, *root.alloc_buffers] if tirx.is_buffer_var(b)}

    def regions(block: s_tir.SBlock) -> s_tir.SBlock:
        if block.name_hint == "root":
            return block
        reads, writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
        return replace_block(block, reads=reads, writes=writes)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, regions)))


def split_online_rows(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    root = root_block(func)
    taken_buffers = {b.name for b in root.alloc_buffers} | {p.name for p in func.params if tirx.is_buffer_var(p)}
    taken_blocks = {b.name_hint for b in blocks_under(func.body)}
    statements, allocs, decisions = [], list(root.alloc_buffers), []
    for stmt in top_level_statements(func):
        try:
            plan = _plan(func, stmt, spec)
        except _Refused as why:
            name = next((b.name_hint for b in blocks_under(stmt) if online_shift(b) is not None), "?")
            decisions.append(f"{name}: not split: {why}")
            plan = None
        if plan is None:
            statements.append(stmt)
            continue
        nests, parts, why = _split(func, stmt, plan, taken_buffers, taken_blocks)
        statements += nests
        allocs += parts
        decisions.append(why)
    if not decisions:
        return func
    annotations = dict(root.annotations)
    annotations[SPLIT_DECISIONS_KEY] = decisions
    new_root = replace_block(root, body=tirx.SeqStmt(statements) if len(statements) > 1 else statements[0],
                             alloc_buffers=allocs, annotations=annotations)
    return _with_regions(with_root_block(func, new_root))


def SplitOnlineRows(gpu: str = "H200", deterministic: bool = False, limits=None):
    """deterministic=True splits nothing: the split count follows the number of rows (how many row
    tiles fill the GPU), so a row's sum order would change with the batch (docs/determinism.md)."""
    spec = gpu_spec(gpu, limits)
    if deterministic:
        return s_tir_pass("SplitOnlineRows", lambda func: func)
    return s_tir_pass("SplitOnlineRows", lambda func: split_online_rows(func, spec))
