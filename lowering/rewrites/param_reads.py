"""Whether a program's result depends on the values passed in for a parameter (`ParamSpec.read`).

Why: a PyTorch op made from the program (triton_codegen/torch_op_support.py) allocates and returns
the parameters that are outputs only; a parameter whose passed-in values matter stays an argument,
mutated in place. So a written parameter counts as unread only when two facts are proven:

- no kernel loads it. This looks at the lowered kernels, not the TIR: the old value a reduction's
  update reads after its `T.init`, or the previous element a scan reads, lives in registers and is
  never loaded;
- one block writes every element of it (or blocks each writing a slice of one axis tile it, from 0 to
  its dimension: RowPartials' whole tiles of rows, then the rows left). The store is unconditional
  in its block (the block's T.init,
  or a statement of its body), the block sits under loops only (no `if`), and the store's indices,
  in terms of those loops and under the block's predicate, map the loops onto the whole buffer
  (`detect_iter_map`, surjective, each index from 0 over its dimension). Loops the indices do not
  use must run at least once, except around a T.init: a kernel stores a reduction's value after its
  loop, however many steps it takes.

Anything not proven counts as read, which is never wrong (the op takes the tensor and writes into
it), only less convenient. Scalars and parameters that are never written are read by definition.
"""

from __future__ import annotations

import dataclasses

import tvm
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import substitute_bindings, uses_var
from tir_passes.infra.pass_util import root_block

from lowering.tile_ir import Load, ParamSpec, TileKernel


def with_reads(
    params: tuple[ParamSpec, ...], func: tirx.PrimFunc, kernels: tuple[TileKernel, ...]
) -> tuple[ParamSpec, ...]:
    """`params` with `read` false for each written buffer that no kernel loads and one block covers."""
    loaded = set()
    for kernel in kernels:
        _collect_loads(kernel.body, loaded)
    covered = _covered_buffers(func)
    return tuple(
        dataclasses.replace(p, read=False)
        if p.kind == "buffer" and p.written and p.name not in loaded and p.name in covered
        else p
        for p in params
    )


def _collect_loads(node, found: set[str]) -> None:
    """Names of the buffers loaded anywhere in a TileProgram node (statements, expressions)."""
    if isinstance(node, Load):
        found.add(node.buffer)
    if isinstance(node, tuple):
        for item in node:
            _collect_loads(item, found)
    elif dataclasses.is_dataclass(node):
        for field in dataclasses.fields(node):
            _collect_loads(getattr(node, field.name), found)


def _covered_buffers(func: tirx.PrimFunc) -> set[str]:
    covered, pieces, dims = set(), {}, {}
    for realize, loops in _unconditional_blocks(root_block(func).body):
        block = realize.block
        from_init = block.init is not None
        for store in _direct_stores(block.init if from_init else block.body):
            piece = _covers(store, realize, loops, from_init)
            if piece is True:
                covered.add(store.buffer.name)
            elif piece is not None:
                pieces.setdefault((store.buffer.name, piece[0]), []).append(piece[1:])
                dims[store.buffer.name] = store.buffer.shape
    return covered | {name for (name, axis), found in pieces.items() if _tile_the_axis(found, dims[name][axis])}


def _tile_the_axis(pieces: list, dim) -> bool:
    """Blocks each writing a slice [base, base + extent) of one axis (whole along the others) cover it
    together: from 0, each slice starting where another ends, up to the dimension (RowPartials' whole
    tiles of rows, then the rows left)."""
    analyzer, end, left = sym.Analyzer(), tirx.const(0, "int32"), list(pieces)
    while left:
        nxt = next((piece for piece in left if analyzer.can_prove_equal(piece[0], end)), None)
        if nxt is None:
            return False
        left.remove(nxt)
        end = end + nxt[1]
    return analyzer.can_prove_equal(end, dim)


def _unconditional_blocks(stmt, loops: tuple = ()) -> list:
    """(realize, loops around it) for every block reached through loops and sequences only."""
    if isinstance(stmt, tirx.For):
        return _unconditional_blocks(stmt.body, loops + (stmt,))
    if isinstance(stmt, tirx.SeqStmt):
        return [site for child in stmt.seq for site in _unconditional_blocks(child, loops)]
    if isinstance(stmt, s_tir.SBlockRealize):
        return [(stmt, loops)]
    return []


def _direct_stores(stmt) -> list[tirx.BufferStore]:
    """The stores a block statement always makes: a store, or a sequence's stores."""
    if isinstance(stmt, tirx.BufferStore):
        return [stmt]
    if isinstance(stmt, tirx.SeqStmt):
        return [child for child in stmt.seq if isinstance(child, tirx.BufferStore)]
    return []


def _covers(store: tirx.BufferStore, realize: s_tir.SBlockRealize, loops: tuple, from_init: bool):
    """True when the store covers the buffer; (axis, base, extent) when it covers the slice [base, base +
    extent) of one axis and the others whole; else None."""
    indices = [substitute_bindings(index, realize) for index in store.indices]
    ranges = {loop.loop_var: tvm.ir.Range.from_min_extent(loop.min, loop.extent) for loop in loops}
    mapped = sym.detect_iter_map(indices, ranges, realize.predicate, "surjective")
    if len(mapped.indices) != len(indices):
        return None
    analyzer = sym.Analyzer()
    runs = from_init or all(
        analyzer.can_prove(loop.extent > 0) for loop in loops if not uses_var(indices, loop.loop_var)
    )
    partial = [axis for axis, (sum_expr, dim) in enumerate(zip(mapped.indices, store.buffer.shape))
               if not _is_whole_dimension(sum_expr, dim, analyzer)]
    if not runs:
        return None
    if not partial:
        return True
    slice_ = _slice(mapped.indices[partial[0]], analyzer) if len(partial) == 1 else None
    return None if slice_ is None else (partial[0], *slice_)


def _slice(sum_expr, analyzer: sym.Analyzer):
    """(base, extent) when the index is one split of scale 1: the slice [base, base + extent) of its axis."""
    if len(sum_expr.args) != 1 or not analyzer.can_prove_equal(sum_expr.args[0].scale, 1):
        return None
    return sum_expr.base, sum_expr.args[0].extent


def _is_whole_dimension(sum_expr, dim, analyzer: sym.Analyzer) -> bool:
    """The index covers [0, dim): iter-map normal form is one split of scale 1, from base 0, over dim
    values (a surjective map of a fused loop nest takes that form; any other form counts as not). A
    dimension of 1 indexed by the constant 0 (a batch of one, its loop gone) is whole too."""
    if not sum_expr.args:
        return analyzer.can_prove_equal(sum_expr.base, 0) and analyzer.can_prove_equal(dim, 1)
    if len(sum_expr.args) != 1:
        return False
    split = sum_expr.args[0]
    return (
        analyzer.can_prove_equal(split.scale, 1)
        and analyzer.can_prove_equal(sum_expr.base, 0)
        and analyzer.can_prove_equal(split.extent, dim)
    )
