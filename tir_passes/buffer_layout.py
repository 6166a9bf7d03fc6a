"""BufferLayout: permute the axes of intermediates that still go through global memory so that
the axis their accesses walk contiguously is the last (unit-stride) one.

Why: after LoopFusion, an intermediate shared by several kernels is written by one and read by
others. If its writer and readers all walk, say, its first axis in their innermost loop
(`X[j, i]` under `for i: for j:`), every tile load and store strides by a whole row; with the
axes swapped the same loops read and write unit-stride tiles that coalesce and vectorize.
What it rewrites: for each such intermediate, every access votes for the axis indexed by the
innermost loop (outward until one indexes the buffer directly); when the winning axis is not the
last, `transform_layout` moves it last. The permutation is proven a bijection (TVM builds its
inverse) and checked exhaustively on buffers of up to 4096 elements; the decision is recorded in
the root block's "layout.decisions" annotation, also when nothing changes.
Assumes: LoopFusion ran (what it kept in registers has no layout); intermediates are root
allocations with static shapes; parameters keep the layout the caller gives them.
"""

from __future__ import annotations

import itertools
from collections import Counter

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .pass_util import root_block, s_tir_pass, top_level_statements

EXHAUSTIVE_LIMIT = 4096


def _accesses(block: s_tir.SBlock, buf) -> list:
    found: list = []
    tvm_ffi.structural_walk(block.body, [
        (tirx.BufferStore, lambda s: found.append(s) if s.buffer.same_as(buf) else None),
        (tvm.ir.TensorLoad, lambda l: found.append(l) if l.source.same_as(buf) else None),
    ])
    return found


def _nest_accesses(stmt, buf) -> list[tuple[list[tirx.For], s_tir.SBlockRealize, object]]:
    """(enclosing loops, realize, access) for every access of `buf` in a nest."""
    found = []

    def walk(node, loops):
        if isinstance(node, tirx.For):
            walk(node.body, loops + [node])
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child, loops)
        elif isinstance(node, s_tir.SBlockRealize):
            found.extend((loops, node, access) for access in _accesses(node.block, buf))

    walk(stmt, [])
    return found


def _contiguous_axis(loops, realize, access) -> int | None:
    """The buffer axis indexed by the innermost loop that indexes it directly."""
    bound = {v.__chandle__(): iv.var for iv, v in zip(realize.block.iter_vars, realize.iter_values) if isinstance(v, tirx.Var)}
    for loop in reversed(loops):
        iter_var = bound.get(loop.loop_var.__chandle__())
        if iter_var is None:
            continue
        for axis, index in enumerate(access.indices):
            if isinstance(index, tirx.Var) and index.same_as(iter_var):
                return axis
    return None


def permutation_map(permutation: list[int]) -> tirx.IndexMap:
    # NOTE: int32 indices: the IndexMap default (int64) breaks transform_layout on int32 buffers
    return tirx.IndexMap.from_func(lambda *axes: tuple(axes[p] for p in permutation), ndim=len(permutation),
                                   index_dtype="int32")


def permutation_is_bijective(permutation: list[int], shape: list[int]) -> bool:
    """TVM's inverse of the map exists, and (small buffers) every index lands on its own slot."""
    permutation_map(permutation).inverse(shape)  # raises unless the map is bijective on the shape
    count = 1
    for extent in shape:
        count *= extent
    if count > EXHAUSTIVE_LIMIT:
        return True
    images = {tuple(index[p] for p in permutation) for index in itertools.product(*(range(e) for e in shape))}
    new_shape = [shape[p] for p in permutation]
    return len(images) == count and all(all(0 <= v < e for v, e in zip(image, new_shape)) for image in images)


def _decide(func: tirx.PrimFunc, buf, statements) -> tuple[list[int] | None, str]:
    shape = [int(d.value) for d in buf.shape if isinstance(d, tirx.IntImm)]
    if len(shape) != len(buf.shape) or len(shape) < 2:
        return None, f"{buf.name}: kept (symbolic or one-dimensional shape)"
    votes: Counter = Counter()
    writers = []
    for stmt in statements:
        for loops, realize, access in _nest_accesses(stmt, buf):
            axis = _contiguous_axis(loops, realize, access)
            if axis is not None:
                votes[axis] += 1
            if isinstance(access, tirx.BufferStore):
                writers.append(realize.block.name_hint)
    if not votes or len(set(writers)) != 1:
        return None, f"{buf.name}: kept (no single writer, or no access walks one axis contiguously)"
    axis, count = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    last = len(shape) - 1
    if axis == last:
        return None, f"{buf.name}: kept (its accesses already walk the last axis: {count} of {sum(votes.values())})"
    permutation = [a for a in range(len(shape)) if a != axis] + [axis]
    if not permutation_is_bijective(permutation, shape):
        return None, f"{buf.name}: kept (the permutation was not proven a bijection)"
    return permutation, (f"{buf.name}: axes permuted to {tuple(permutation)}: {count} of {sum(votes.values())} accesses "
                         f"walk axis {axis} in their innermost loop, which is now unit-stride (bijection proven)")


def layout_buffers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    statements = top_level_statements(func)
    shared = [b for b in root_block(func).alloc_buffers
              if sum(1 for stmt in statements if _nest_accesses(stmt, b)) >= 2 and str(b.scope()) == "global"]
    if not shared:
        return func
    sch = s_tir.Schedule(func)
    decisions = []
    for buf in shared:
        permutation, decision = _decide(sch.mod["main"], buf, top_level_statements(sch.mod["main"]))
        decisions.append(decision)
        if permutation is not None:
            writer = next(r.block.name_hint for stmt in top_level_statements(sch.mod["main"])
                          for _, r, a in _nest_accesses(stmt, buf) if isinstance(a, tirx.BufferStore))
            sch.transform_layout(sch.get_sblock(writer), buf.name, permutation_map(permutation))
    sch.annotate(sch.get_sblock("root"), "layout.decisions", decisions)
    return sch.mod["main"]


def BufferLayout():
    return s_tir_pass("BufferLayout", layout_buffers)
