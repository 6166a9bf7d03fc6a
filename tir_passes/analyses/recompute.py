"""Recomputation for LoopFusion: a contraction read by several nests, whose rows cannot stay in
registers, is computed again where each nest needs it instead of going through memory.

Why: softmax(Q·Kᵀ) with its output written reads the scores twice, once for the row statistics
(OnlineSoftmax streams them tile by tile) and once to normalize. Holding a row of scores in
registers is out of budget for long rows, and writing them to memory and reading them back costs
2 · element_bytes per score; computing a score again costs 2 · K flops, which tensor cores do
faster than memory moves the bytes while 2 · K stays under the GPU's balance: its fp16 tensor-core
peak over its copy bandwidth (gpu_specs.py; H200: 989 TFLOP/s against 4.27 TB/s, 232 flops per
byte). So the producer's nest is copied, with its own buffer, in front of every later reader
nest, and each copy fuses into its reader like any single-reader producer.

What it rewrites: a top-level nest of one contraction block writing intermediate X, read by the
blocks of more than one later nest, when recomputing pays (`worth_recomputing`) and nothing
between the producer and its last reader writes what it reads (`clobbered_inputs`): the second and
later reader nests each get a copy `X_2 = ...` (fresh loop and block variables, TVM's RenewDefs)
right before them, and read X_2. The element values are identical, so the numerics check sees no
change; the dump shows the copies and LoopFusion's decision says why.
Assumes: HoistAllocations ran (intermediates are root allocations).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.analyses.nest import blocks_under, contraction_operands, perfect_nest, unique_name
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import static_int
from tir_passes.infra.pass_util import replace_block, root_block, top_level_statements, with_root_block


def flops_per_byte(spec: GpuSpec) -> float:
    """Tensor-core flops per byte of memory traffic at which both take equal time on `spec`."""
    return spec.fp16_tensor_tflops * 1e12 / (spec.model_copy_bandwidth_gbs * 1e9)


def worth_recomputing(block: s_tir.SBlock, buffer, spec: GpuSpec) -> str | None:
    """Why computing the contraction again is cheaper than a round trip of `buffer`, or None."""
    if contraction_operands(block) is None:
        return None
    depth = static_int(_reduction_extent(block))
    if depth is None:
        return None
    flops, traffic, balance = 2 * depth, 2 * element_bytes(buffer.dtype), flops_per_byte(spec)
    if flops > balance * traffic:
        return None
    return (f"{2 * depth} flops per element cost less than its {traffic}-byte round trip through memory "
            f"(up to {balance:.0f} flops per byte on the {spec.name})")


def _reduction_extent(block: s_tir.SBlock):
    extent = 1
    for iv in block.iter_vars:
        if iv.iter_type == tirx.IterVar.CommReduce:
            extent = extent * iv.dom.extent
    return extent


def _reads(stmt, buffer) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, (tvm.ir.TensorLoad, lambda l: found.append(l) if l.source.same_as(buffer) else None))
    return bool(found)


def reader_nests(func: tirx.PrimFunc, buffer) -> list[int]:
    """Indices of the top-level statements with a block that reads `buffer`."""
    return [index for index, stmt in enumerate(top_level_statements(func))
            if any(_reads(block.body, buffer) for block in blocks_under(stmt))]


def _written(stmt) -> set[str]:
    return {region.source.name for block in blocks_under(stmt) for region in block.writes}


def clobbered_inputs(func: tirx.PrimFunc, producer_index: int) -> str | None:
    """Why a copy in front of a later reader would compute other values (a statement between the
    producer and that reader writes what the producer reads), or None."""
    statements = top_level_statements(func)
    producer = blocks_under(statements[producer_index])[0]
    inputs = {region.source.name for region in producer.reads} - {r.source.name for r in producer.writes}
    last_reader = max(reader_nests(func, producer.writes[0].source))
    for stmt in statements[producer_index + 1:last_reader]:
        changed = sorted(_written(stmt) & inputs)
        if changed:
            names = ", ".join(b.name_hint for b in blocks_under(stmt))
            return f"{names} writes {', '.join(changed)}, which {producer.name_hint} reads, before its later readers"
    return None


def recompute_for_readers(func: tirx.PrimFunc, producer_index: int) -> tuple[tirx.PrimFunc, list[str]]:
    """Copy the producer nest in front of every reader nest after the first; returns the new
    function and the names of the copies' blocks."""
    statements = top_level_statements(func)
    loops, realize = perfect_nest(statements[producer_index])
    buffer = realize.block.writes[0].source
    readers = [i for i in reader_nests(func, buffer) if i != producer_index][1:]
    root = root_block(func)
    taken = {b.name for b in root.alloc_buffers} | {p.name for p in func.params if tirx.is_buffer_var(p)}
    block_names = {b.name_hint for b in blocks_under(root.body)}
    body, allocs, copies = [], list(root.alloc_buffers), []
    for index, stmt in enumerate(statements):
        if index in readers:
            copy = tirx.decl_buffer(buffer.shape, buffer.dtype, unique_name(buffer.name, taken), layout=None)
            name = unique_name(realize.block.name_hint, block_names)
            body.append(_copy_nest(statements[producer_index], buffer, copy, name, func))
            stmt = read_from(stmt, buffer, copy, func)
            allocs.append(copy)
            copies.append(name)
        body.append(stmt)
    block = replace_block(root, body=tirx.SeqStmt(body), alloc_buffers=allocs)
    return with_root_block(func, block), copies


def _buffers(func, extra) -> dict:
    root = root_block(func)
    return {b: b for b in [*func.params, *root.alloc_buffers, *extra] if tirx.is_buffer_var(b)}


def _with_regions(block: s_tir.SBlock, buffers: dict) -> s_tir.SBlock:
    reads, writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
    return replace_block(block, reads=reads, writes=writes)


def _copy_nest(stmt, buffer, copy, name: str, func) -> tirx.Stmt:
    """The nest with fresh variables, writing `copy` instead of `buffer`, its block named `name`."""
    fresh = s_tir.renew_defs(tirx.PrimFunc([], stmt)).body
    buffers = _buffers(func, [copy])

    def retarget(block: s_tir.SBlock) -> s_tir.SBlock:
        swapped = tvm_ffi.structural_map(block.body, [(tirx.BufferStore, lambda s: _store_to(s, buffer, copy)),
                                                      (tvm.ir.TensorLoad, lambda l: _load_from(l, buffer, copy))])
        init = block.init
        if init is not None:
            init = tvm_ffi.structural_map(init, (tirx.BufferStore, lambda s: _store_to(s, buffer, copy)))
        return _with_regions(replace_block(block, body=swapped, init=init, name_hint=name), buffers)

    return tvm_ffi.structural_map(fresh, (s_tir.SBlock, retarget))


def _store_to(store: tirx.BufferStore, buffer, copy) -> tirx.BufferStore:
    if not store.buffer.same_as(buffer):
        return store
    return tirx.BufferStore(copy, store.value, list(store.indices))


def _load_from(load, buffer, copy):
    if not load.source.same_as(buffer):
        return load
    return tirx.BufferLoad(copy, list(load.indices))


def read_from(stmt, buffer, copy, func) -> tirx.Stmt:
    """`stmt` with its blocks reading `copy` where they read `buffer`."""
    buffers = _buffers(func, [copy])

    def retarget(block: s_tir.SBlock) -> s_tir.SBlock:
        if not _reads(block.body, buffer):
            return block
        body = tvm_ffi.structural_map(block.body, (tvm.ir.TensorLoad, lambda l: _load_from(l, buffer, copy)))
        return _with_regions(replace_block(block, body=body), buffers)

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, retarget))
