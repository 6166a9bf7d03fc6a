"""HoistAllocations: turn `T.alloc_buffer` statements at the top of an S-TIR function into
allocations of the root block (`T.sblock_alloc_buffer`).

Why: users write `T.alloc_buffer` for intermediates; it parses and builds, but it is a TIRx
statement, and TVM's schedule (compute_inline, compute_at) then treats the buffer as an output.
Later passes and the lowering look for intermediates in the root block's `alloc_buffers`.
Assumes: nothing. Allocations nested inside loops or blocks are left where they are.
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, with_root_block


def _split_allocations(body: tirx.Stmt) -> tuple[list, list[tirx.Stmt]]:
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    buffers = [s.buffer for s in statements if isinstance(s, tirx.AllocBuffer)]
    rest = [s for s in statements if not isinstance(s, tirx.AllocBuffer)]
    return buffers, rest


def hoist_allocations(func: tirx.PrimFunc) -> tirx.PrimFunc:
    root = root_block(func)
    buffers, rest = _split_allocations(root.body)
    if not buffers:
        return func
    body = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
    block = replace_block(root, body=body, alloc_buffers=list(root.alloc_buffers) + buffers)
    return with_root_block(func, block)


def HoistAllocations():
    return s_tir_pass("HoistAllocations", hoist_allocations)
