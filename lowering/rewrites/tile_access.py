"""Which loads and stores touch a rectangle of their buffer: the TileAccess of each Load and Store.

An access is a rectangular tile when every buffer axis p is indexed either by
`origin_p + arange(BLOCK)` of a tile axis that indexes no other buffer axis, or by a scalar
`origin_p` (one index: a block of 1 along p), and its own tile axes are exactly the ones its
indices use. Of its mask's conjuncts, those that only say "inside the buffer along axis p"
(`index_p < extent_p`, `index_p >= 0`) are implied by any access that drops out-of-bounds
elements; the others are the `residual`. This module states that fact once; the code generator
decides from it, alone, how the access is made (a tensor descriptor or pointers;
triton_codegen/descriptors.py).

It reads the lowered TileProgram, so any lowering of an access gives it the same answer.
Assumes offsets come from accesses.offset_expr: a sum of `index_p * stride_p` terms (a zero index
folds its term away; 64-bit offsets widen each index with a cast) plus, for broadcasting, a zero
over axes the indices lack.
"""

from __future__ import annotations

import dataclasses

from tir_passes.infra.names import python_name, stride_name
from lowering.rules.exprs import fold_binary
from lowering.tile_ir import Arange, Binary, Cast, Const, Expr, Load, Scalar, Store, TileAccess, TileKernel, TileProgram


def with_tile_accesses(program: TileProgram) -> TileProgram:
    """The program with the TileAccess of every rectangular load and store filled in."""
    extents = _buffer_extents(program)
    kernels = tuple(_annotate(kernel, extents) for kernel in program.kernels)
    return dataclasses.replace(program, kernels=kernels)


def _annotate(kernel: TileKernel, extents: dict) -> TileKernel:
    ranks = {buf.name: buf.ndim for buf in kernel.buffers}

    def visit(node):
        if isinstance(node, tuple):
            return tuple(visit(item) for item in node)
        if not dataclasses.is_dataclass(node) or isinstance(node, TileAccess):
            return node
        changes = {f.name: visit(getattr(node, f.name)) for f in dataclasses.fields(node)}
        node = dataclasses.replace(node, **changes)
        if isinstance(node, (Load, Store)) and node.buffer in ranks:
            dims = node.dims if isinstance(node, Load) else node.offset.dims
            tile = tile_access(node.buffer, ranks[node.buffer], node.offset, node.mask, dims, extents.get(node.buffer))
            node = dataclasses.replace(node, tile=tile)
        return node

    return dataclasses.replace(kernel, body=visit(kernel.body))


def tile_access(
    buffer: str, rank: int, offset: Expr, mask: tuple[Expr, ...], dims: tuple[str, ...], extents: tuple | None
) -> TileAccess | None:
    """The rectangle an access of `buffer` touches, or None when it is not one."""
    indices = _indices(offset, buffer, rank)
    if indices is None:
        return None
    split = [_origin_and_axis(index) for index in indices]
    if any(part is None for part in split):
        return None
    axes = tuple(axis for _, axis in split)
    tiled = [axis for axis in axes if axis is not None]
    if len(set(tiled)) != len(tiled) or set(tiled) != set(dims):
        return None
    residual = tuple(c for c in mask if not _inside_buffer(c, indices, extents))
    return TileAccess(tuple(origin for origin, _ in split), axes, residual)


def _indices(offset: Expr, buffer: str, rank: int) -> list[Expr] | None:
    """The index of every buffer axis in an offset offset_expr wrote, or None."""
    strides = {stride_name(buffer, axis): axis for axis in range(rank)}
    indices: list[Expr | None] = [None] * rank
    for term in _terms(offset):
        if isinstance(term, Const) and term.value == 0:
            continue
        if not (isinstance(term, Binary) and term.op == "*" and isinstance(term.b, Scalar) and term.b.name in strides):
            return None
        axis = strides[term.b.name]
        if indices[axis] is not None:
            return None
        indices[axis] = _uncast(term.a)
    return [Const(0, "int32") if index is None else index for index in indices]


def _uncast(index: Expr) -> Expr:
    """The index before its widening for 64-bit offsets (an index is computed in its own type; the
    masks compare that one)."""
    while isinstance(index, Cast) and index.dtype.startswith("int") and index.x.dtype.startswith("int"):
        index = index.x
    return index


def _terms(expr: Expr) -> list[Expr]:
    if isinstance(expr, Binary) and expr.op == "+":
        return _terms(expr.a) + _terms(expr.b)
    return [expr]


def _origin_and_axis(index: Expr) -> tuple[Expr, str | None] | None:
    """`index` as origin + arange(BLOCK) along one tile axis (origin a scalar), or as a scalar."""
    if not index.dims:
        return index, None
    if isinstance(index, Arange):
        return Const(0, index.dtype), index.dim
    if not isinstance(index, Binary) or index.op not in ("+", "-") or len(index.dims) != 1:
        return None
    if index.op == "+" and not index.a.dims:
        scalar, tiled = index.a, index.b
    elif not index.b.dims:
        scalar, tiled = index.b, index.a
    else:
        return None
    inner = _origin_and_axis(tiled)
    if inner is None:
        return None
    origin, axis = inner
    return fold_binary(index.op, origin, scalar, index.dtype, ()), axis


def _inside_buffer(condition: Expr, indices: list[Expr], extents: tuple | None) -> bool:
    """`condition` says only that one index lies inside the buffer: `index < extent`, `index >= 0`."""
    if not isinstance(condition, Binary):
        return False
    op, a, b = condition.op, condition.a, condition.b
    if op in (">", "<="):  # read `b < a` as `a > b`, `0 <= i` as `i >= 0`
        op, a, b = {">": "<", "<=": ">="}[op], b, a
    for axis, index in enumerate(indices):
        if a != index:
            continue
        if op == ">=" and _is_zero(b):
            return True
        if op == "<" and extents is not None and _same_extent(b, extents[axis]):
            return True
    return False


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, Const) and not expr.dims and expr.value == 0


def _same_extent(bound: Expr, extent) -> bool:
    """`bound` is the buffer's extent: the same integer, or the same shape variable (the extents
    name it as the TIR does, the kernel's Scalars as python_name writes it)."""
    if isinstance(extent, (Const, Scalar)):
        extent = extent.value if isinstance(extent, Const) else extent.name
    if isinstance(bound, Const) and not bound.dims:
        return isinstance(extent, int) and not isinstance(bound.value, bool) and bound.value == extent
    if isinstance(bound, Scalar) and not bound.dims:
        return isinstance(extent, str) and bound.name == python_name(extent)
    return False


def _buffer_extents(program: TileProgram) -> dict[str, tuple]:
    """Each global buffer's extents: ints and shape-variable names (a derived extent never matches)."""
    extents = {p.name: tuple(p.shape) for p in program.params if p.kind == "buffer"}
    extents.update({s.name: tuple(s.shape) for s in program.scratch})
    return extents
