"""CanonicalSplitAxes: an axis the program split by hand into two loops is one loop again.

Users who learned TVM's schedules, or who block a loop to mirror a hand-written kernel, write
`for i, j, ko, ki in T.grid(M, N, K // 8, 8)` and read `A[vi, vko * 8 + vki]`. The passes after this
one see two reduction variables where there is one axis: Tiling tiled the inner one (8 wide, padded to
a 16-deep tl.dot) and walked the outer one, 1.6 times the canonical GEMM's time by the hardware model
at 3000×5000×1000 (`benchmarks/gemm_forms_model.py`). One axis gets the canonical GEMM's tiles.

What it rewrites: in a top-level perfect nest of plain loops (T.grid and T.axis.remap) around one
block, two block variables of the same kind (both spatial or both reduction) bound to adjacent loops,
the outer u over [0, Eo) and the inner w over [0, Ei), Ei a constant, neither extent 1 (a unit loop is
no split: with it, `v // Ei` or `v % 1` simplifies away whatever the block reads), where every index, every
comparison and every other integer expression of the block reads them only as `u * Ei + w` (checked:
with u = v // Ei and w = v % Ei the block simplifies to one without a division or remainder of v). Then
u and w are one variable v over [0, Eo·Ei) bound to one loop, named by the two loops' common prefix
(`ko`, `ki`: `k`), and the block reads v. Repeated until no pair is left (three levels of splitting).

Soundness: (u, w) ↦ u·Ei + w is a bijection of [0, Eo) × [0, Ei) onto [0, Eo·Ei) that keeps the
loops' order (u outer): the block runs at the same points in the same order, bit for bit.

Assumes: nothing (it runs first among the canonical forms, on the nests as written).
"""

from __future__ import annotations

import os

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import perfect_nest, vars_of
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, static_int, top_level_statements, \
    with_block_regions, with_root_block

COMPARISONS = (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)


def _joined_name(outer: str, inner: str, taken: set[str]) -> str:
    """The two names' common prefix (`ko`, `ki`: `k`), else the outer one's."""
    prefix = os.path.commonprefix([outer, inner]).rstrip("_")
    return prefix if prefix and prefix not in taken else outer


def _simplified(node, analyzer: sym.Analyzer):
    """`node` (a block's body or init) with every index and integer comparison simplified."""
    def load(n):
        return tirx.BufferLoad(n.source, [analyzer.simplify(i) for i in n.indices])

    def store(n):
        return tirx.BufferStore(n.buffer, n.value, [analyzer.simplify(i) for i in n.indices], span=n.span)

    def compare(n):
        return type(n)(analyzer.simplify(n.a), analyzer.simplify(n.b)) if "int" in str(n.a.ty.dtype) else n

    handlers = [(tvm.ir.TensorLoad, load), (tirx.BufferStore, store)] + [(c, compare) for c in COMPARISONS]
    return tvm_ffi.structural_map(node, handlers) if node is not None else None


def _divides(node, var: tirx.Var) -> bool:
    """A division or remainder of an expression of `var` is left in `node`."""
    found: list = []

    def check(n):
        if any(x.same_as(var) for x in vars_of(n)):
            found.append(n)

    tvm_ffi.structural_walk(node, [((tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod), check)])
    return bool(found)


def _substituted(node, mapping: dict):
    return tvm_ffi.structural_map(node, (tirx.Var, lambda v: mapping.get(v.__chandle__(), v))) \
        if node is not None else None


def _joined_block(block: s_tir.SBlock, outer: tirx.IterVar, inner: tirx.IterVar, extent: int, name: str):
    """The block with `outer` and `inner` one variable, or None when it reads them otherwise."""
    dtype = str(outer.var.ty.dtype)
    joined = tirx.Var(name, dtype)
    total = outer.dom.extent * tirx.const(extent, dtype)
    analyzer = sym.Analyzer()
    analyzer.bind(joined, tvm.ir.Range.from_min_extent(tirx.const(0, dtype), total))
    mapping = {outer.var.__chandle__(): tirx.floordiv(joined, extent),
               inner.var.__chandle__(): tirx.floormod(joined, extent)}
    body = _simplified(_substituted(block.body, mapping), analyzer)
    init = _simplified(_substituted(block.init, mapping), analyzer)
    if _divides(body, joined) or (init is not None and _divides(init, joined)):
        return None
    iter_var = tirx.IterVar(tvm.ir.Range.from_min_extent(tirx.const(0, dtype), analyzer.simplify(total)), joined,
                            outer.iter_type)
    iter_vars = [iter_var if iv.same_as(outer) else iv for iv in block.iter_vars if not iv.same_as(inner)]
    return replace_block(block, iter_vars=iter_vars, body=body, init=init)


def _join_one(stmt):
    """The nest with one pair of split axes joined, or None."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    loops, realize = nest
    block = realize.block
    if not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value):
        return None
    if not all(isinstance(value, tirx.Var) for value in realize.iter_values) or \
            len({value.__chandle__() for value in realize.iter_values}) != len(realize.iter_values):
        return None   # a binding that computes, or a loop that binds two variables: not plain loops
    bound = {value.__chandle__(): iv for iv, value in zip(block.iter_vars, realize.iter_values)}
    for position in range(len(loops) - 1):
        outer_loop, inner_loop = loops[position], loops[position + 1]
        outer, inner = bound.get(outer_loop.loop_var.__chandle__()), bound.get(inner_loop.loop_var.__chandle__())
        extent = static_int(inner_loop.extent)
        if outer is None or inner is None or outer.iter_type != inner.iter_type or extent is None:
            continue
        if not all(static_int(x) == 0 for x in (outer.dom.min, inner.dom.min, outer_loop.min, inner_loop.min)):
            continue
        if static_int(inner.dom.extent) != extent or not tvm_ffi.structural_equal(outer.dom.extent, outer_loop.extent):
            continue
        if extent < 2 or static_int(outer_loop.extent) == 1:   # a unit loop is RemoveUnitLoops', not a split
            continue
        outer_extent = static_int(outer_loop.extent)
        if outer_extent is not None and outer_extent * extent >= 2 ** (outer.var.ty.dtype.bits - 1):
            continue   # the joined extent would not fit the variables' type
        taken = {iv.var.name for iv in block.iter_vars}
        new_block = _joined_block(block, outer, inner, extent, _joined_name(outer.var.name, inner.var.name, taken))
        if new_block is not None:
            return _rebuilt(loops, realize, position, new_block)
    return None


def _rebuilt(loops: list, realize: s_tir.SBlockRealize, position: int, block: s_tir.SBlock):
    """The nest with loops[position] and loops[position + 1] one loop binding the joined variable."""
    outer_loop, inner_loop = loops[position], loops[position + 1]
    dtype = str(outer_loop.loop_var.ty.dtype)
    taken = {loop.loop_var.name for loop in loops}
    loop_var = tirx.Var(_joined_name(outer_loop.loop_var.name, inner_loop.loop_var.name, taken), dtype)
    extent = outer_loop.extent * inner_loop.extent
    values = []
    for value in realize.iter_values:
        if value.same_as(outer_loop.loop_var):
            values.append(loop_var)
        elif not value.same_as(inner_loop.loop_var):
            values.append(value)
    stmt = s_tir.SBlockRealize(values, realize.predicate, block)
    kept = loops[:position] + [None] + loops[position + 2:]
    for loop in reversed(kept):
        if loop is None:
            stmt = tirx.For(loop_var, outer_loop.min, sym.Analyzer().simplify(extent), outer_loop.kind, stmt,
                            outer_loop.thread_binding, outer_loop.annotations, span=outer_loop.span)
        else:
            stmt = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, stmt, loop.thread_binding,
                            loop.annotations, span=loop.span)
    return stmt



def canonical_split_axes(func: tirx.PrimFunc) -> tirx.PrimFunc:
    statements, changed = [], False
    for stmt in top_level_statements(func):
        joined = _join_one(stmt)
        while joined is not None:
            stmt, changed = joined, True
            joined = _join_one(stmt)
        statements.append(stmt)
    if not changed:
        return func
    root = root_block(func)
    buffers = {b: b for b in [*func.params, *root.alloc_buffers] if tirx.is_buffer_var(b)}
    statements = [with_block_regions(stmt, buffers) for stmt in statements]
    body = statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)
    return with_root_block(func, replace_block(root, body=body))


def CanonicalSplitAxes():
    return s_tir_pass("CanonicalSplitAxes", canonical_split_axes)
