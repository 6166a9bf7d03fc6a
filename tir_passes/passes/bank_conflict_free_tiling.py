"""BankConflictFreeTiling: choose the layout of every shared-memory staging tile so that the
bank-conflict model (bank_conflicts.py) reports no conflicts, at the smallest cost.

Why: a warp reading a column of a 32-wide fp32 tile hits one bank 32 times (32 wavefronts
instead of 1). Padding each row by one bank word, or XOR-permuting 16-byte chunks of each row by
the row number, makes the column walk every bank once.
What it decides: for each block that stages a buffer into `shared` scope (cache_read), it counts
the model's wavefronts over every access of the buffer under each candidate layout the backend
can build (`layouts`) and keeps the one with the fewest conflicts (`_rank` breaks ties by memory
and simplicity). TVM's CUDA build realizes paddings only (`storage_align`: row stride = 32 words
* k + pad), the default; the Gluon backend also realizes XOR swizzles and the tensor-core (NVMMA)
layout (GLUON_LAYOUTS), and issues each thread's consecutive elements as one vector, so then the
accesses are counted that way and a padding must keep the vectors aligned. A padding is kept only
when proven on the layout TVM actually builds (padded_layout_problems): the staged tile's strides
after TVM's buffer compaction give a one-to-one address map (floordiv/floormod by the strides
recover every index, so a row stride shorter than the row is caught), and the shared allocation of
TVM's CUDA build holds the highest address (an allocation not enlarged for the padding is caught).
The decision is a typed SharedLayoutDecision (shared_layout.py), recorded as the staging block's
annotation "bank.decision": the Gluon backend's shared layouts are read from it.
On the Triton path there is nothing to do: Triton allocates and swizzles shared memory itself,
and the Tiling pass's square tiles for transposed accesses are what this path controls there.
Assumes: a CUDA-style schedule (thread bindings, shared staging blocks); functions without
shared buffers come back unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.bank_conflicts import (
    BANK_BYTES,
    BANKS,
    SharedAccess,
    analyze,
    count_wavefronts,
    lower_for_cuda,
    tensor_core_reads,
    wavefronts_under,
)
from tir_passes.analyses.layout_proofs import injection_problems
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import replace_block, s_tir_pass
from tir_passes.contracts.shared_layout import (
    KEY,
    KINDS,
    NVMMA,
    NVMMA_SWIZZLES,
    PADDED,
    SWIZZLED,
    UNCHANGED,
    Counts,
    SharedLayoutDecision,
)

GLUON_LAYOUTS = (PADDED, SWIZZLED, NVMMA)
MAX_PADDING_OVERHEAD = 16  # a padding above 1/16 of the tile's memory ranks below an XOR swizzle
ALIGN_KEY = "buffer_dim_align"  # where s_tir's storage_align records a padding on the block

# the prefix of TVM's s_tir pipeline (tvm/s_tir/pipeline.py) that places shared buffers and
# compacts them, applying storage_align: after it a staged buffer carries the strides TVM uses
_COMPACTION = (
    s_tir.transform.PlanAndUpdateBufferAllocationLocation,
    s_tir.transform.ConvertBlocksToOpaque,
    s_tir.transform.CompactBufferAllocation,
)


def _staging_blocks(func: tirx.PrimFunc) -> list[tuple[str, object]]:
    """(block name, shared buffer) for blocks that write a shared buffer they do not allocate."""
    found: list = []

    def visit(block):
        for region in block.writes:
            if region.source.scope().startswith("shared") and len(region.source.shape) >= 2:
                found.append((block.name_hint, region.source))

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return found


def _has_thread_bindings(func: tirx.PrimFunc) -> bool:
    kinds: list = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: kinds.append(f.kind == tirx.ForKind.THREAD_BINDING)))
    return any(kinds)


def _padded(func: tirx.PrimFunc, block: str, buf, pad: int) -> tvm.IRModule:
    sch = s_tir.Schedule(func)
    if pad:
        elem = element_bytes(buf.dtype)
        factor = BANKS * BANK_BYTES // elem
        sch.storage_align(sch.get_sblock(block), 0, axis=len(buf.shape) - 2, factor=factor, offset=pad)
    return sch.mod


def _compacted_buffer(mod: tvm.IRModule, name: str):
    """The staged buffer as TVM lays it out: the tile's shape and its (padded) strides."""
    compacted = tvm.transform.Sequential([make() for make in _COMPACTION])(mod)
    found: list = []
    tvm_ffi.structural_walk(
        compacted["main"].body,
        (s_tir.SBlock, lambda block: found.extend(b for b in block.alloc_buffers if b.name == name)),
    )
    return found[0]


def _allocated_elements(mod: tvm.IRModule, name: str) -> int | None:
    """Elements of the shared allocation that TVM's CUDA build makes for buffer `name`; None when
    there is no such single flat allocation (e.g. merged with another buffer's)."""
    found: list = []
    for kernel in lower_for_cuda(mod):
        tvm_ffi.structural_walk(
            kernel.body,
            (tirx.AllocBuffer, lambda alloc: found.append(alloc.buffer) if alloc.buffer.name == name else None),
        )
    if len(found) != 1 or len(found[0].shape) != 1:
        return None
    return int(found[0].shape[0])


def padded_layout(mod: tvm.IRModule, name: str) -> tuple[list[int], list[int], int | None]:
    """(tile shape, strides, allocated elements) of a staged buffer, as TVM builds it."""
    buf = _compacted_buffer(mod, name)
    return [int(d) for d in buf.shape], [int(s) for s in buf.strides], _allocated_elements(mod, name)


def padded_layout_problems(shape: list[int], strides: list[int], allocated: int | None) -> list[str]:
    """What is not proven of the layout `sum(index * stride)`: that it is one to one over the tile
    and that an allocation of `allocated` elements holds every address."""
    if len(strides) != len(shape):
        return [f"TVM's layout of the {tuple(shape)} tile has no padded strides"]
    if allocated is None:
        return ["TVM's CUDA build has no single shared allocation of the tile to check"]
    address = tirx.IndexMap.from_func(
        lambda *index: (sum(i * s for i, s in zip(index, strides)),), ndim=len(shape), index_dtype="int32"
    )
    index = tirx.IndexMap.from_func(lambda flat: _unflatten(flat, strides), ndim=1, index_dtype="int32")
    return injection_problems(address, index, shape, [allocated])


def _unflatten(address, strides: list[int]) -> list:
    """The indices of an address, outermost stride first; the left inverse of a layout whose every
    stride exceeds the span of the axes inside it (exactly what injectivity needs)."""
    indices = []
    for stride in strides:
        indices.append(tirx.floordiv(address, stride))
        address = tirx.floormod(address, stride)
    return indices


# --- candidates ------------------------------------------------------------------------------------
def _candidates(base: SharedLayoutDecision, layouts: tuple[str, ...], tensor_core: bool) -> list[SharedLayoutDecision]:
    """Every layout worth counting for the tile: paddings that keep the vector alignment, XOR
    swizzles whose chunks hold a whole vector, and for a tensor-core operand the NVMMA swizzles."""
    elem, row = base.element_bytes, base.row
    found = [base]
    if tensor_core:
        if NVMMA in layouts and len(base.tile) == 2:
            found += [
                replace(base, kind=NVMMA, swizzle_bytes=width)
                for width in NVMMA_SWIZZLES
                if width and width <= row * elem and (row * elem) % width == 0 and base.rows >= 8
            ]
        return found
    bank_row = BANKS * BANK_BYTES // elem  # elements in one pass over the 32 banks
    if PADDED in layouts:
        pad = max(base.vector, BANK_BYTES // elem)  # one bank word, or a whole vector
        while pad <= bank_row // 2:
            found.append(replace(base, kind=PADDED, pad=pad))
            pad *= 2
    if SWIZZLED in layouts and len(base.tile) == 2:  # Gluon swizzles the rows of a 2-D tile
        for vec in _powers_of_two(base.vector, row // 2):
            for max_phase in _powers_of_two(2, row // vec):
                for per_phase in _powers_of_two(1, 8):
                    found.append(replace(base, kind=SWIZZLED, vec=vec, per_phase=per_phase, max_phase=max_phase))
    return found


def _powers_of_two(low: int, high: int) -> list[int]:
    values, value = [], low
    while value <= high:
        values.append(value)
        value *= 2
    return values


def _counts(accesses: list[SharedAccess], layout: SharedLayoutDecision) -> Counts:
    wavefronts = conflicts = worst = 0
    for access in accesses:
        waves, ideal = wavefronts_under(access, layout)
        wavefronts += waves * access.executions
        conflicts += (waves - ideal) * access.executions
        worst = max(worst, waves)
    return Counts(wavefronts, conflicts, worst)


def _rank(layout: SharedLayoutDecision):
    """Fewest conflicts first; then a padding within the memory budget, then an XOR swizzle (no
    memory), then a wasteful padding; among equals the least memory and the simplest layout."""
    waste = layout.allocated_elements - layout.rows * layout.row
    wasteful = waste * MAX_PADDING_OVERHEAD > layout.rows * layout.row
    order = {UNCHANGED: 0, PADDED: 1 if not wasteful else 3, NVMMA: 2, SWIZZLED: 2}[layout.kind]
    return (
        layout.after.conflicts,
        order,
        waste,
        layout.swizzle_bytes and -layout.swizzle_bytes,
        layout.vec * layout.max_phase,
        layout.per_phase,
    )


# --- consumers -------------------------------------------------------------------------------------
def _is_tensor_core_operand(func: tirx.PrimFunc, buffer) -> bool:
    """The buffer is read by a multiply-accumulate reduction whose operands are both 16-bit floats
    staged in shared memory: the contraction a tensor core computes (the Gluon backend lowers
    exactly these to warpgroup_mma)."""
    found: list = []

    def visit(block):
        if any(region.source.same_as(buffer) for region in block.reads) and contraction_operands(block) is not None:
            found.append(block)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return bool(found) and str(buffer.dtype) in ("float16", "bfloat16")


def contraction_operands(block: s_tir.SBlock):
    """(A load, B load) of a block `C[..] = C[..] + f(A[..]) * f(B[..])` (f: casts) reducing over
    at least one axis with both operands in shared memory, else None."""
    if not any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
        return None
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return None
    acc, product = store.value.a, store.value.b
    if not (isinstance(acc, tvm.ir.TensorLoad) and acc.source.same_as(store.buffer) and isinstance(product, tirx.Mul)):
        return None
    operands = [_uncast(product.a), _uncast(product.b)]
    if all(isinstance(x, tvm.ir.TensorLoad) and x.source.scope().startswith("shared") for x in operands):
        return tuple(operands)
    return None


def _uncast(expr):
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return expr


# --- the decision ----------------------------------------------------------------------------------
def as_issued(access: SharedAccess, element: int) -> SharedAccess:
    """The access as a backend that vectorizes each thread's consecutive elements issues it (Gluon
    does, through its register layouts: up to 16 bytes per lane, one request per vector)."""
    vector = min(access.run, 16 // element)
    if vector <= access.vector or access.executions % (vector // access.vector):
        return access
    wavefronts, ideal = count_wavefronts([e * element for e in access.elements], element * vector)
    return replace(
        access,
        bytes_per_lane=element * vector,
        wavefronts=wavefronts,
        ideal=ideal,
        vector=vector,
        executions=access.executions // (vector // access.vector),
    )


def choose_layout(
    func: tirx.PrimFunc, block: str, buf, layouts: tuple[str, ...] = (PADDED,), vectorize_runs: bool = False
) -> SharedLayoutDecision:
    """The staged tile's layout with the fewest conflicts (the model's count over every access of
    the buffer, on the row-major tile of TVM's build), ranked as `_rank` says. With
    `vectorize_runs`, accesses are counted as the Gluon backend issues them (as_issued), and a
    layout must keep their alignment."""
    mod = tvm.IRModule({"main": func})
    tile = tuple(int(d) for d in _compacted_buffer(mod, buf.name).shape)
    accesses = [a for a in analyze(mod) if a.buffer == buf.name]
    if vectorize_runs:
        accesses = [as_issued(a, element_bytes(buf.dtype)) for a in accesses]
    tensor_core = _is_tensor_core_operand(func, buf)
    elem = element_bytes(buf.dtype)
    if tensor_core:  # the warps read it through the tensor cores, not with the loads TVM would emit
        accesses = [a for a in accesses if a.kind == "store"] + [tensor_core_reads(buf.name, tile, elem)]
    vector = max((a.vector for a in accesses), default=1)
    base = SharedLayoutDecision(buf.name, str(buf.dtype), tile, vector=vector)
    base = replace(base, before=_counts(accesses, base), after=_counts(accesses, base))
    scored = [replace(c, after=_counts(accesses, c)) for c in _candidates(base, layouts, tensor_core)]
    best = min(scored, key=_rank)
    return replace(best, why=_why(best, tensor_core))


def _why(layout: SharedLayoutDecision, tensor_core: bool) -> str:
    before, after = layout.before, layout.after
    numbers = (
        f"{before.worst} -> {after.worst} wavefront(s) per request at worst, {before.conflicts} -> "
        f"{after.conflicts} conflicts per warp"
    )
    reader = "read by tensor cores (modelled as ldmatrix.x4)" if tensor_core else "read and written by the threads"
    vector = f"; accesses of {layout.vector} elements per lane keep their alignment" if layout.vector > 1 else ""
    if layout.kind == UNCHANGED:
        reason = "no layout needed" if before.conflicts == 0 else "no layout reduces the conflicts"
        return f"{layout.buffer}: {reason} ({reader}; {before.worst} wavefront(s) per request at worst)"
    extra = layout.allocated_elements - layout.rows * layout.row
    cost = f"{extra * layout.element_bytes} extra bytes" if extra else "no extra memory"
    return f"{layout.buffer}: {layout.describe()} ({reader}, {cost}): {numbers}{vector}"


def _proven_padding(
    func: tirx.PrimFunc, block: str, buf, layout: SharedLayoutDecision
) -> tuple[tvm.IRModule, bool, str]:
    """The function with the padding applied (storage_align), whether TVM's layout of it is proven
    one address per element inside the allocation, and the proof or what is not proven."""
    padded = _padded(func, block, buf, layout.pad)
    shape, strides, allocated = padded_layout(padded, buf.name)
    problems = padded_layout_problems(shape, strides, allocated)
    if problems:
        return padded, False, "; ".join(problems)
    highest = sum((extent - 1) * stride for extent, stride in zip(shape, strides))
    return padded, True, (
        f"proven on TVM's layout of the {'x'.join(map(str, shape))} tile, strides {tuple(strides)}: one "
        f"address per element, the highest ({highest}) inside the {allocated}-element allocation"
    )


def _decide(func: tirx.PrimFunc, block: str, buf, layouts: tuple[str, ...]) -> tirx.PrimFunc:
    func, replaced = _without_storage_align(func, block)
    layout = choose_layout(func, block, buf, layouts, vectorize_runs=layouts == GLUON_LAYOUTS)
    current = func
    if layout.kind == PADDED:
        padded, proven, proof = _proven_padding(func, block, buf, layout)
        if proven:
            current, layout = padded["main"], replace(layout, why=f"{layout.why}; {proof}")
        else:
            layout = replace(
                layout,
                kind=UNCHANGED,
                pad=0,
                after=layout.before,
                why=f"{buf.name}: kept unpadded: a padding of {layout.pad} element(s) was not proven ({proof})",
            )
    if replaced:
        layout = replace(layout, why=f"{layout.why}; replaces the schedule's storage_align {replaced}")
    return _annotated(current, block, layout)


def _without_storage_align(func: tirx.PrimFunc, block: str) -> tuple[tirx.PrimFunc, str | None]:
    """The function with the schedule's own `storage_align` of the staging block removed, and what
    it was. The pass owns the tile's layout: the model counts candidates on the row-major tile, and
    a layout stacked on the schedule's padding would be counted on the wrong addresses."""
    found: list = []

    def strip(node: s_tir.SBlock) -> s_tir.SBlock:
        if node.name_hint != block or ALIGN_KEY not in node.annotations:
            return node
        found.append(str([[int(x) for x in entry] for entry in node.annotations[ALIGN_KEY]]))
        kept = {key: value for key, value in node.annotations.items() if key != ALIGN_KEY}
        return replace_block(node, annotations=kept)

    stripped = func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, strip)))
    return (stripped, found[0]) if found else (func, None)


def _annotated(func: tirx.PrimFunc, block: str, layout: SharedLayoutDecision) -> tirx.PrimFunc:
    """`func` with the staging block carrying the decision (the contract's only writer)."""

    def annotate(node: s_tir.SBlock) -> s_tir.SBlock:
        if node.name_hint != block:
            return node
        return replace_block(node, annotations={**dict(node.annotations), KEY: layout.to_annotation()})

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, annotate)))


def bank_conflict_free_tiling(func: tirx.PrimFunc, layouts: tuple[str, ...] = (PADDED,)) -> tirx.PrimFunc:
    if not _has_thread_bindings(func):
        return func
    current = func
    for block, buf in _staging_blocks(func):
        current = _decide(current, block, buf, layouts)
    return current


def BankConflictFreeTiling(layouts: tuple[str, ...] = (PADDED,)):
    """The pass. `layouts`: what the backend can build. TVM's CUDA build realizes paddings only
    (storage_align), the default; the Gluon backend also realizes XOR swizzles and tensor-core
    (NVMMA) layouts (GLUON_LAYOUTS), and vectorizes each thread's consecutive elements, so then
    accesses are counted as it issues them and paddings keep their alignment (Triton emits
    ld.shared.v4 through a PaddedSharedLayout whose rows are not 16-byte aligned: misaligned)."""
    unknown = [kind for kind in layouts if kind not in KINDS]
    if unknown:
        raise ValueError(f"unknown shared layouts {unknown}; choose from {KINDS}")
    return s_tir_pass("BankConflictFreeTiling", lambda func: bank_conflict_free_tiling(func, tuple(layouts)))
