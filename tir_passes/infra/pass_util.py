"""Helpers shared by our passes: a pass factory that keeps Python errors intact, IR utilities."""

from __future__ import annotations

import os
from collections.abc import Callable

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx.transform import prim_func_pass

# TVM turns exceptions raised inside a pass into RuntimeError; keep the original for the driver
_RAISED: list[BaseException] = []


def take_raised_error() -> BaseException | None:
    error = _RAISED[-1] if _RAISED else None
    _RAISED.clear()
    return error


def s_tir_pass(name: str, transform: Callable[[tirx.PrimFunc], tirx.PrimFunc]) -> tvm.transform.Pass:
    """A PrimFunc pass named `name` that applies `transform` to S-TIR functions only."""

    def run(func: tirx.PrimFunc, mod: tvm.IRModule, ctx) -> tirx.PrimFunc:
        if func.attrs is None or not bool(func.attrs.get("s_tir", False)):
            return func
        try:
            return transform(func)
        except BaseException as err:
            _RAISED.append(err)
            raise

    return prim_func_pass(run, opt_level=0, name=name)


def root_block(func: tirx.PrimFunc) -> s_tir.SBlock:
    return func.body.block


def with_root_block(func: tirx.PrimFunc, block: s_tir.SBlock) -> tirx.PrimFunc:
    realize = func.body
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, block))


def replace_block(block: s_tir.SBlock, **changes) -> s_tir.SBlock:
    fields = {
        "iter_vars": block.iter_vars, "reads": block.reads, "writes": block.writes,
        "name_hint": block.name_hint, "body": block.body, "init": block.init,
        "alloc_buffers": block.alloc_buffers, "match_buffers": block.match_buffers,
        "annotations": block.annotations,
    }
    fields.update(changes)
    return s_tir.SBlock(**fields)


def with_block_regions(stmt, buffers: dict):
    """`stmt` with every block's read and write regions computed again from its body (after a rewrite
    changed what the blocks access); `buffers` maps each buffer the blocks touch to itself."""
    def regions(block: s_tir.SBlock) -> s_tir.SBlock:
        if block.name_hint == "root":
            return block
        reads, writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
        return replace_block(block, reads=reads, writes=writes)

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, regions))


def pointwise_nest(target, value_at, reads: list, name: str, axes: list[tuple[str, str]] | None = None) -> tirx.For:
    """`for v..: target[v..] = value_at(v..)`, one spatial block over the target's shape that reads the
    buffers `reads` at the same element; its loops and block variables named by `axes` ((loop, variable)
    per axis; default `i0, v0`, ...)."""
    shape = target.shape
    axes = axes or [(f"i{axis}", f"v{axis}") for axis in range(len(shape))]
    loops = [tirx.Var(loop, str(dim.ty.dtype)) for (loop, _), dim in zip(axes, shape)]
    ivs = [tirx.IterVar(tvm.ir.Range.from_min_extent(tirx.const(0, str(dim.ty.dtype)), dim),
                        tirx.Var(var, str(dim.ty.dtype)), tirx.IterVar.DataPar) for (_, var), dim in zip(axes, shape)]
    here = [iv.var for iv in ivs]
    regions = [tirx.BufferRegion(buf, [tvm.ir.Range.from_min_extent(v, 1) for v in here]) for buf in [*reads, target]]
    block = s_tir.SBlock(ivs, regions[:-1], regions[-1:], name, tirx.BufferStore(target, value_at(here), here))
    nest = s_tir.SBlockRealize(loops, True, block)
    for loop, dim in reversed(list(zip(loops, shape))):
        nest = tirx.For(loop, tirx.const(0, str(dim.ty.dtype)), dim, tirx.ForKind.SERIAL, nest)
    return nest


def top_level_statements(func: tirx.PrimFunc) -> list[tirx.Stmt]:
    """The statements directly under the root block (each one a kernel after tiling)."""
    body = root_block(func).body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def source_line(node) -> str | None:
    """`file.py:line` of a node parsed from TVMScript, when TVM kept its span. The file's name
    alone: generated modules must not depend on the folder they were built in."""
    span = getattr(node, "span", None)
    if span is None or not getattr(span, "line", 0):
        return None
    return f"{os.path.basename(span.source_name.name)}:{span.line}"


def static_int(expr) -> int | None:
    """The value of a constant extent (TIR IntImm or a Python int annotation value), else None."""
    if isinstance(expr, bool):
        return None
    if isinstance(expr, int):
        return expr
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None
