"""BufferLayout: permute the axes of intermediates that still go through global memory so that
the axis their accesses walk contiguously is the last (unit-stride) one.

Why: after LoopFusion, an intermediate shared by several kernels is written by one and read by
others. If its writer and readers all walk, say, its first axis in their innermost loop
(`X[j, i]` under `for i: for j:`), every tile load and store strides by a whole row; with the
axes swapped the same loops read and write unit-stride tiles that coalesce and vectorize.
What it rewrites: for each such intermediate, every access votes for the axis indexed by the
innermost loop (outward until one indexes the buffer directly); when the winning axis is not the
last, `transform_layout` moves it last. The rewrite is kept only when proven (layout_problems):
the new shape is the permutation of the old; the map is a bijection between the two index
spaces (for symbolic indices in range, the analyzer proves that the map lands in the new shape,
TVM's inverse lands in the old one, inverse(map(x)) == x and map(inverse(y)) == y); and every
rewritten access indexes the map of its old indices. The decision, with what was proven or why
the buffer was kept, is recorded in the root block's "layout.decisions" record (LayoutDecision,
layout_record.py), also when nothing changes.
Assumes: LoopFusion ran (what it kept in registers has no layout); intermediates are root
allocations with static shapes; parameters keep the layout the caller gives them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.errors import first_line
from tir_passes.analyses.layout_proofs import bijection_problems, equal_indices
from tir_passes.analyses.nest import block_sites
from tir_passes.contracts.layout_record import LayoutDecision, write_layout
from tir_passes.infra.pass_util import root_block, s_tir_pass, top_level_statements

PROOF = ("proven: the new shape is the permutation of the old, the map is a bijection between the index "
         "spaces (in range both ways, inverse(map(x)) == x, map(inverse(y)) == y), and all {count} rewritten "
         "accesses index the map of their old indices")


def _accesses(block: s_tir.SBlock, buf) -> list:
    found: list = []
    tvm_ffi.structural_walk(block.body, [
        (tirx.BufferStore, lambda s: found.append(s) if s.buffer.same_as(buf) else None),
        (tvm.ir.TensorLoad, lambda l: found.append(l) if l.source.same_as(buf) else None),
    ])
    return found


def _nest_accesses(stmt, buf) -> list[tuple[tuple[tirx.For, ...], s_tir.SBlockRealize, object]]:
    """(enclosing loops, realize, access) for every access of `buf` in a nest."""
    return [
        (loops, realize, access) for realize, loops in block_sites(stmt) for access in _accesses(realize.block, buf)
    ]


def _contiguous_axis(loops, realize, access) -> int | None:
    """The buffer axis indexed by the innermost loop that indexes it directly."""
    bound = {
        v.__chandle__(): iv.var
        for iv, v in zip(realize.block.iter_vars, realize.iter_values)
        if isinstance(v, tirx.Var)
    }
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
    return tirx.IndexMap.from_func(
        lambda *axes: tuple(axes[p] for p in permutation), ndim=len(permutation), index_dtype="int32"
    )


def _block_accesses(func: tirx.PrimFunc, name: str) -> list[tuple[s_tir.SBlock, list]]:
    """(block, indices) of every access of the buffer called `name`, block by block in walk order."""
    blocks: list = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, blocks.append))
    found = []
    for block in blocks:

        def record(node, visitor, block=block):
            buf = node.buffer if isinstance(node, tirx.BufferStore) else node.source
            if buf.name == name:
                found.append((block, list(node.indices)))
            visitor.default_visit(node)

        # a nested block's accesses belong to that block: do not descend into it here
        for part in (block.init, block.body):
            if part is not None:
                tvm_ffi.structural_visit(
                    part,
                    [
                        ((tvm.ir.TensorLoad, tirx.BufferStore), record),
                        (s_tir.SBlockRealize, lambda realize, visitor: None),
                    ],
                )
    return found


def rewrite_problems(before: tirx.PrimFunc, after: tirx.PrimFunc, name: str, forward: tirx.IndexMap) -> list[str]:
    """Accesses of `name` whose indices in `after` are not `forward` of their indices in `before`."""
    old, new = _block_accesses(before, name), _block_accesses(after, name)
    if len(old) != len(new):
        return [f"{len(old)} accesses of {name} before the rewrite, {len(new)} after"]
    analyzer = sym.Analyzer()
    problems = []
    for (old_block, old_indices), (new_block, new_indices) in zip(old, new):
        rename = {n.var.__chandle__(): o.var for n, o in zip(new_block.iter_vars, old_block.iter_vars)}
        renamed = [tvm_ffi.structural_map(i, (tirx.Var, lambda v: rename.get(v.__chandle__(), v))) for i in new_indices]  # noqa: B023 - used in this iteration
        expected = forward.map_indices(old_indices)
        if not equal_indices(analyzer, renamed, expected):
            problems.append(
                f"block {old_block.name_hint}: {name}[{_text(old_indices)}] was rewritten to "
                f"{name}[{_text(renamed)}], not {name}[{_text(expected)}]"
            )
    return problems


def _text(indices) -> str:
    return ", ".join(str(i) for i in indices)


def layout_problems(before: tirx.PrimFunc, after: tirx.PrimFunc, name: str, permutation: list[int]) -> list[str]:
    """Everything not proven of `after` being `before` with buffer `name`'s axes permuted."""
    old_shape, new_shape = _static_shape(before, name), _static_shape(after, name)
    problems = []
    if new_shape != [old_shape[p] for p in permutation]:
        problems.append(
            f"the new shape {tuple(new_shape)} is not the permutation {tuple(permutation)} of {tuple(old_shape)}"
        )
    forward = permutation_map(permutation)
    try:
        inverse = forward.inverse(old_shape)
    except tvm.error.InternalError as err:  # TVM refuses to invert what it sees is not a bijection
        return problems + [f"TVM cannot invert the map: {first_line(err)}"]
    return (
        problems
        + bijection_problems(forward, inverse, old_shape, new_shape)
        + rewrite_problems(before, after, name, forward)
    )


def _root_buffer(func: tirx.PrimFunc, name: str):
    return next(b for b in root_block(func).alloc_buffers if b.name == name)


def _static_shape(func: tirx.PrimFunc, name: str) -> list[int]:
    return [int(d.value) for d in _root_buffer(func, name).shape]


def _decide(func: tirx.PrimFunc, buf, statements) -> LayoutDecision:
    shape = [int(d.value) for d in buf.shape if isinstance(d, tirx.IntImm)]
    if len(shape) != len(buf.shape) or len(shape) < 2:
        return LayoutDecision(buf.name, None, reason="symbolic or one-dimensional shape")
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
        return LayoutDecision(buf.name, None, reason="no single writer, or no access walks one axis contiguously")
    axis, count = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    last = len(shape) - 1
    if axis == last:
        walked = f"its accesses already walk the last axis: {count} of {sum(votes.values())}"
        return LayoutDecision(buf.name, None, reason=walked)
    permutation = tuple(a for a in range(len(shape)) if a != axis) + (axis,)
    return LayoutDecision(
        buf.name,
        permutation,
        tuple(shape),
        f"{count} of {sum(votes.values())} accesses walk axis {axis} in their innermost loop, which is now unit-stride",
    )


def _transformed(func: tirx.PrimFunc, name: str, index_map: tirx.IndexMap) -> tirx.PrimFunc:
    """`func` with buffer `name` laid out by `index_map` (TVM rewrites its allocation and accesses)."""
    sch = s_tir.Schedule(func)
    writer = next(
        r.block.name_hint
        for stmt in top_level_statements(func)
        for _, r, a in _nest_accesses(stmt, _root_buffer(func, name))
        if isinstance(a, tirx.BufferStore)
    )
    sch.transform_layout(sch.get_sblock(writer), name, index_map)
    return sch.mod["main"]


def _relayout(func: tirx.PrimFunc, name: str) -> tuple[tirx.PrimFunc, LayoutDecision]:
    """`func` with buffer `name` permuted when that helps and is proven, and the decision."""
    decision = _decide(func, _root_buffer(func, name), top_level_statements(func))
    if decision.permutation is None:
        return func, decision
    permutation = list(decision.permutation)
    after = _transformed(func, name, permutation_map(permutation))
    problems = layout_problems(func, after, name, permutation)
    if problems:
        return func, LayoutDecision(name, None, reason=f"the permuted layout was not proven: {'; '.join(problems)}")
    proof = PROOF.format(count=len(_block_accesses(after, name)))
    return after, dataclasses.replace(decision, reason=f"{decision.reason} ({proof})")


def layout_buffers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    statements = top_level_statements(func)
    shared = [
        b.name
        for b in root_block(func).alloc_buffers
        if sum(1 for stmt in statements if _nest_accesses(stmt, b)) >= 2 and str(b.scope()) == "global"
    ]
    if not shared:
        return func
    decisions = []
    for name in shared:
        func, decision = _relayout(func, name)
        decisions.append(decision)
    return write_layout(func, decisions)


def BufferLayout():
    return s_tir_pass("BufferLayout", layout_buffers)
