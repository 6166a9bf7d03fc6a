"""A walked loop's independent sums, reduced together: Tiling's `sums_together`, applied.

What it rewrites: in the body of a Loop whose Tiling record (prefetch_record.LoopPrefetch.sums_together,
carried as `Loop.sums_together`) says so, a run of float sums over one axis of operands of the same
axes (`Reduce("sum")` in the iteration's assignments) that do not read each other's results becomes one
CombineAssign of a SumsCombine, placed before the run's first assignment: `s0, s1 = _tir_sums2_0(x0, x1)`,
one tl.reduce of the tuple; each sum's place reads its register. A sum joins the run when its operand
reads no register assigned, and no buffer stored, since the run began (so it may be computed there);
anything else (a loop, a barrier, a selection) ends the run; at most MAX_SUMS sums a run.
Why: the walk is latency bound (a norm backward's rows: docs/autodiff.md): each block reduction is
a round trip through shared memory with its barriers, and the row's reductions, once FactorOutOfSums
took the statistics out of them, no longer wait for each other: one reduction of the tuple makes one
round trip of them. Measured on the H200 (benchmarks/norm_backward_chains_gpu.py, 16384×8192 fp16,
as an edit of the generated text): LayerNorm's backward 246.8 → 235.1 µs, RMSNorm's 221.8 → 220.6.
Numerics: each sum is tl.sum's own (the same combine over the same layout), so on the GPU the same
bits; in the interpreter the helper takes numpy's sums (kernel_helpers._sums).
Assumes: the body's prefetch was applied (its row tiles are registers); operands are pure expressions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lowering.rewrites.hoist_loads import assigned_names, read_names, stored_buffers, walk_nodes
from lowering.tile_ir import Assign, CombineAssign, Comment, Load, Loop, Reduce, Reg, Store, SumsCombine

FLOATS = ("float32", "float64")
MAX_SUMS, MAX_SUM_AXES = 4, 3   # sums a run, operand axes: the combine functions kernel_helpers.py writes


def sums_together(body: tuple, fresh: Callable[[str], str]) -> tuple:
    """`body` with every marked loop's independent sums reduced together (inner loops first)."""
    out = []
    for stmt in body:
        if isinstance(stmt, Loop):
            stmt = dataclasses.replace(stmt, body=sums_together(stmt.body, fresh))
            if stmt.sums_together:
                stmt = dataclasses.replace(stmt, body=_together(stmt.body, fresh))
        out.append(stmt)
    return tuple(out)


def _sums(node, found: list) -> list:
    """The sums in `node` (not inside another reduction), first seen first."""
    if isinstance(node, Reduce):
        if node.kind == "sum" and len(node.axes) == 1 and node.dtype in FLOATS and node.x.dtype == node.dtype \
                and node not in found:
            found.append(node)
        return found
    if isinstance(node, tuple):
        for item in node:
            _sums(item, found)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for item in dataclasses.fields(node):
            _sums(getattr(node, item.name), found)
    return found


def _key(reduce: Reduce):
    return reduce.x.dims, reduce.axes, reduce.dtype


def _loads(node) -> set:
    found: set = set()
    walk_nodes(node, lambda n: found.add(n.buffer) if isinstance(n, Load) else None)
    return found


def _runs(body: tuple) -> list[tuple[int, list[Reduce]]]:
    """(index of the run's first statement, its sums) for each run of independent sums."""
    runs: list[tuple[int, list[Reduce]]] = []
    start, key, members, names, stores = None, None, [], set(), set()
    for index, stmt in enumerate(body):
        if not isinstance(stmt, (Assign, Comment, Store)):
            start = None
            continue
        for reduce in _sums(stmt, []) if isinstance(stmt, Assign) else []:
            if start is not None and reduce in members:   # the same sum again: its register serves both
                continue
            joins = start is not None and _key(reduce) == key and len(members) < MAX_SUMS and \
                not read_names(reduce.x) & names and not _loads(reduce.x) & stores
            if not joins:
                start, key, members, names, stores = index, _key(reduce), [], set(), set()
                runs.append((index, members))
            members.append(reduce)
        if start is not None:
            names |= assigned_names((stmt,))
            stores |= stored_buffers((stmt,))
    return [(index, members) for index, members in runs if len(members) > 1]


def _together(body: tuple, fresh) -> tuple:
    runs = _runs(body)
    if not runs:
        return body
    registers: dict[Reduce, Reg] = {}
    placed: dict[int, CombineAssign] = {}
    for index, members in runs:
        dims, axes, dtype = _key(members[0])
        axis = list(dims).index(axes[0])
        if axis >= MAX_SUM_AXES:
            continue
        names = tuple(fresh("sums") for _ in members)
        registers.update({reduce: Reg(name, dtype, reduce.dims) for reduce, name in zip(members, names)})
        placed[index] = CombineAssign(names, SumsCombine(len(members), axis, dtype), (),
                                      tuple(reduce.x for reduce in members), dims)
    out = []
    for index, stmt in enumerate(body):
        if index in placed:
            out.append(placed[index])
        out.append(_replaced(stmt, registers))
    return tuple(out)


def _replaced(node, registers: dict):
    if isinstance(node, Reduce) and node in registers:
        return registers[node]
    if isinstance(node, tuple):
        return tuple(_replaced(item, registers) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type) and not isinstance(node, Loop):
        changes = {f.name: _replaced(getattr(node, f.name), registers) for f in dataclasses.fields(node)}
        return dataclasses.replace(node, **changes)
    return node
