"""ShareContractionLoops: adjacent reduction loops of independent contractions become one loop.

    for k in range(K): G[i, j] += X[i, k] * Wg[j, k]          for k in range(K):
    for k in range(K): U[i, j] += X[i, k] * Wu[j, k]    ->        G[i, j] += X[i, k] * Wg[j, k]
                                                                  U[i, j] += X[i, k] * Wu[j, k]

Why: LoopFusion leaves SwiGLU's two projections (and a gated MLP's, or two scores over the same
keys) as sibling loops over K under the shared (i, j) loops. Tiling gives a kernel one K tile
axis, so only one of two sibling loops could be a tl.dot and the other stayed a loop over single
elements of K. As one loop, every contraction under it is a tl.dot over the same K tiles, and the
loads of a common operand (X above) are one load per step.
Merged only when it changes nothing: the loops are neighbours in one sequence, start and extent
are structurally equal, neither carries annotations or a thread binding, every block under each
is a contraction whose reduction the loop walks (the loop binds no spatial axis), and no buffer
written under one loop is read or written under the other (so interleaving their iterations is
the same computation). The root block's "contraction.decisions" records each merge.
Assumes: LoopFusion ran (it builds the shared loops the siblings sit under).
"""

from __future__ import annotations

import tvm_ffi
from tvm import ir, tirx

from tir_passes.analyses.nest import REDUCE, block_accesses, contraction_operands, loop_kind, realizes_under
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, with_root_block

DECISIONS_KEY = "contraction.decisions"


def _contraction_loop(loop: tirx.For) -> bool:
    """Every block under `loop` is a contraction whose reduction axis the loop walks, and only that."""
    if loop.annotations or loop.kind != tirx.ForKind.SERIAL:
        return False
    realizes = realizes_under(loop.body)
    return bool(realizes) and all(contraction_operands(r.block) is not None and loop_kind(loop, r) == REDUCE
                                  for r in realizes)


def _buffers(loop: tirx.For) -> tuple[set[str], set[str]]:
    """(written, read) buffer names under `loop` (by name: the function's buffers are unique)."""
    written, read = set(), set()
    for realize in realizes_under(loop.body):
        for access in block_accesses(realize.block, include_init=True):
            (written if access.is_store else read).add(access.name)
    return written, read


def _independent(a: tirx.For, b: tirx.For) -> bool:
    written_a, read_a = _buffers(a)
    written_b, read_b = _buffers(b)
    return not (written_a & (written_b | read_b)) and not (written_b & read_a)


def _mergeable(a: tirx.Stmt, b: tirx.Stmt) -> bool:
    return (isinstance(a, tirx.For) and isinstance(b, tirx.For) and _contraction_loop(a) and _contraction_loop(b)
            and tvm_ffi.structural_equal(a.min, b.min) and tvm_ffi.structural_equal(a.extent, b.extent)
            and _independent(a, b))


def _merged(a: tirx.For, b: tirx.For) -> tirx.For:
    bind = {b.loop_var: a.loop_var}
    body_b = tvm_ffi.structural_map(b.body, (ir.Var, lambda v: bind.get(v, v)))
    parts = [*(a.body.seq if isinstance(a.body, tirx.SeqStmt) else [a.body]), body_b]
    return tirx.For(a.loop_var, a.min, a.extent, a.kind, tirx.SeqStmt(parts), a.thread_binding, a.annotations)


def _block_names(loop: tirx.For) -> str:
    return ", ".join(r.block.name_hint for r in realizes_under(loop.body))


def _merge_siblings(seq: tirx.SeqStmt, decisions: list[str]) -> tirx.Stmt:
    merged: list[tirx.Stmt] = []
    for stmt in seq.seq:
        if merged and _mergeable(merged[-1], stmt):
            decisions.append(f"one loop {merged[-1].loop_var.name} walks the reduction of {_block_names(merged[-1])} "
                             f"and {_block_names(stmt)}: each contraction a tl.dot over the same K tiles, "
                             "common operands loaded once")
            merged[-1] = _merged(merged[-1], stmt)
        else:
            merged.append(stmt)
    if len(merged) == len(seq.seq):
        return seq
    return merged[0] if len(merged) == 1 else tirx.SeqStmt(merged)


def share_contraction_loops(func: tirx.PrimFunc) -> tirx.PrimFunc:
    decisions: list[str] = []
    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, lambda seq: _merge_siblings(seq, decisions)))
    if not decisions:
        return func
    func = func.with_body(body)
    root = root_block(func)
    return with_root_block(func, replace_block(root, annotations={**dict(root.annotations), DECISIONS_KEY: decisions}))


def ShareContractionLoops():
    return s_tir_pass("ShareContractionLoops", share_contraction_loops)
