"""BankConflictFreeTiling: pad the rows of shared-memory staging tiles so that the bank-conflict
model (bank_conflicts.py) reports no conflicts, at the smallest shared-memory cost.

Why: a warp reading a column of a 32-wide fp32 tile hits one bank 32 times (32 wavefronts
instead of 1). Padding each row by one bank word makes the column walk every bank once.
What it rewrites: for each block that stages a buffer into `shared` scope (cache_read), it tries
row paddings of 0, 1, 2, 4, ... elements (`storage_align` on the row axis: stride = 32 words * k
+ pad), lowers each candidate as TVM's CUDA build would, counts wavefronts, and keeps the
smallest padding with the fewest conflicts (none, when one exists). The choice and its numbers
are recorded as the block annotation "bank.decision". A padded row stride is at least the row
length, so the layout stays a bijection onto its image (checked, not assumed).
On the Triton path there is nothing to do: Triton allocates and swizzles shared memory itself,
and the Tiling pass's square tiles for transposed accesses are what this path controls there.
Assumes: a CUDA-style schedule (thread bindings, shared staging blocks); functions without
shared buffers come back unchanged.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .bank_conflicts import BANK_BYTES, BANKS, analyze
from .pass_util import s_tir_pass


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
        elem = tvm.DataType(str(buf.dtype)).bits // 8
        factor = BANKS * BANK_BYTES // elem
        sch.storage_align(sch.get_sblock(block), 0, axis=len(buf.shape) - 2, factor=factor, offset=pad)
    return sch.mod


def _candidate_pads(buf) -> list[int]:
    elem = tvm.DataType(str(buf.dtype)).bits // 8
    per_word = max(1, BANK_BYTES // elem)
    pads, pad = [0], per_word
    while pad <= BANKS * BANK_BYTES // elem // 2:
        pads.append(pad)
        pad *= 2
    return pads


def _is_injective(row_length: int, stride: int) -> bool:
    return stride >= row_length


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
    elem = tvm.DataType(str(buf.dtype)).bits // 8
    row = int(buf.shape[-1]) if isinstance(buf.shape[-1], tirx.IntImm) else None
    if pad == 0:
        reason = "no padding needed" if before[0] == 0 else "no padding reduces the conflicts"
        return 0, f"{buf.name}: {reason} ({before[2]} wavefront(s) per request at worst)"
    if row is not None:
        assert _is_injective(row, row + pad), "a padded row stride shorter than the row would alias elements"
    return pad, (f"{buf.name}: rows padded by {pad} element(s) ({pad * elem} bytes per row of the staged tile): "
                 f"{before[2]} -> {worst} wavefront(s) per request at worst, {before[0]} -> {conflicts} conflicts per warp")


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
