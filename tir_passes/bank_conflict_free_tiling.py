"""BankConflictFreeTiling: pad the rows of shared-memory staging tiles so that the bank-conflict
model (bank_conflicts.py) reports no conflicts, at the smallest shared-memory cost.

Why: a warp reading a column of a 32-wide fp32 tile hits one bank 32 times (32 wavefronts
instead of 1). Padding each row by one bank word makes the column walk every bank once.
What it rewrites: for each block that stages a buffer into `shared` scope (cache_read), it tries
row paddings of 0, 1, 2, 4, ... elements (`storage_align` on the row axis: stride = 32 words * k
+ pad), lowers each candidate as TVM's CUDA build would, counts wavefronts, and keeps the
smallest padding with the fewest conflicts (none, when one exists). The chosen padding is kept
only when proven on the layout TVM actually builds (padded_layout_problems): the staged tile's
strides after TVM's buffer compaction give a one-to-one address map (floordiv/floormod by the
strides recover every index, so a row stride shorter than the row is caught), and the shared
allocation of TVM's CUDA build holds the highest address (an allocation not enlarged for the
padding is caught). The choice, its numbers and what was proven are recorded as the block
annotation "bank.decision".
On the Triton path there is nothing to do: Triton allocates and swizzles shared memory itself,
and the Tiling pass's square tiles for transposed accesses are what this path controls there.
Assumes: a CUDA-style schedule (thread bindings, shared staging blocks); functions without
shared buffers come back unchanged.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .bank_conflicts import BANK_BYTES, BANKS, analyze, lower_for_cuda
from .layout_proofs import injection_problems
from .nest import element_bytes
from .pass_util import s_tir_pass

# the prefix of TVM's s_tir pipeline (tvm/s_tir/pipeline.py) that places shared buffers and
# compacts them, applying storage_align: after it a staged buffer carries the strides TVM uses
_COMPACTION = (s_tir.transform.PlanAndUpdateBufferAllocationLocation, s_tir.transform.ConvertBlocksToOpaque,
               s_tir.transform.CompactBufferAllocation)


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


def _conflicts(mod: tvm.IRModule, buffer: str) -> tuple[int, int]:
    """(weighted conflicts, worst wavefronts per request) over the buffer's shared accesses."""
    accesses = [a for a in analyze(mod) if a.buffer == buffer]
    return sum(a.conflicts * a.executions for a in accesses), max((a.wavefronts for a in accesses), default=0)


def _padded(func: tirx.PrimFunc, block: str, buf, pad: int) -> tvm.IRModule:
    sch = s_tir.Schedule(func)
    if pad:
        elem = element_bytes(buf.dtype)
        factor = BANKS * BANK_BYTES // elem
        sch.storage_align(sch.get_sblock(block), 0, axis=len(buf.shape) - 2, factor=factor, offset=pad)
    return sch.mod


def _candidate_pads(buf) -> list[int]:
    elem = element_bytes(buf.dtype)
    per_word = max(1, BANK_BYTES // elem)
    pads, pad = [0], per_word
    while pad <= BANKS * BANK_BYTES // elem // 2:
        pads.append(pad)
        pad *= 2
    return pads


def _compacted_buffer(mod: tvm.IRModule, name: str):
    """The staged buffer as TVM lays it out: the tile's shape and its (padded) strides."""
    compacted = tvm.transform.Sequential([make() for make in _COMPACTION])(mod)
    found: list = []
    tvm_ffi.structural_walk(compacted["main"].body,
                            (s_tir.SBlock, lambda block: found.extend(b for b in block.alloc_buffers if b.name == name)))
    return found[0]


def _allocated_elements(mod: tvm.IRModule, name: str) -> int | None:
    """Elements of the shared allocation that TVM's CUDA build makes for buffer `name`; None when
    there is no such single flat allocation (e.g. merged with another buffer's)."""
    found: list = []
    for kernel in lower_for_cuda(mod):
        tvm_ffi.structural_walk(kernel.body, (tirx.AllocBuffer,
                                              lambda alloc: found.append(alloc.buffer) if alloc.buffer.name == name else None))
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
    address = tirx.IndexMap.from_func(lambda *index: (sum(i * s for i, s in zip(index, strides)),), ndim=len(shape),
                                      index_dtype="int32")
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


def choose_padding(func: tirx.PrimFunc, block: str, buf) -> tuple[int, str]:
    """The smallest row padding with the fewest conflicts, and the decision's description."""
    results = []
    for pad in _candidate_pads(buf):
        conflicts, worst = _conflicts(_padded(func, block, buf, pad), buf.name)
        results.append((conflicts, pad, worst))
        if conflicts == 0:
            break
    conflicts, pad, worst = min(results)
    before = results[0]
    if pad == 0:
        reason = "no padding needed" if before[0] == 0 else "no padding reduces the conflicts"
        return 0, f"{buf.name}: {reason} ({before[2]} wavefront(s) per request at worst)"
    shape, strides, allocated = padded_layout(_padded(func, block, buf, pad), buf.name)
    problems = padded_layout_problems(shape, strides, allocated)
    if problems:
        return 0, f"{buf.name}: kept unpadded: a padding of {pad} element(s) was not proven ({'; '.join(problems)})"
    elem = element_bytes(buf.dtype)
    highest = sum((extent - 1) * stride for extent, stride in zip(shape, strides))
    return pad, (f"{buf.name}: rows padded by {pad} element(s) ({pad * elem} bytes per row of the staged tile): "
                 f"{before[2]} -> {worst} wavefront(s) per request at worst, {before[0]} -> {conflicts} conflicts per warp; "
                 f"proven on TVM's layout of the {'x'.join(map(str, shape))} tile, strides {tuple(strides)}: one address "
                 f"per element, the highest ({highest}) inside the {allocated}-element allocation")


def bank_conflict_free_tiling(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if not _has_thread_bindings(func):
        return func
    staging = _staging_blocks(func)
    if not staging:
        return func
    current = func
    for block, buf in staging:
        pad, decision = choose_padding(current, block, buf)
        sch = s_tir.Schedule(_padded(current, block, buf, pad)["main"])
        sch.annotate(sch.get_sblock(block), "bank.decision", decision)
        current = sch.mod["main"]
    return current


def BankConflictFreeTiling():
    return s_tir_pass("BankConflictFreeTiling", bank_conflict_free_tiling)
