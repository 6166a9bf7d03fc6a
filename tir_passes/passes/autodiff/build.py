"""Building the backward's S-TIR: one block under its own loops, the function around them.

Why: every block the differentiation writes has the same shape (a domain, one store, an init for
sums), the same shape users write, so the pipeline treats the backward like any program.
Assumes: expressions are given over the forward block's iteration variables; each nest gets fresh
ones (a Var is defined once per function).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ...infra.pass_util import replace_block
from .adjoint_rules import dtype_of


def substitute(expr, mapping: dict):
    """`expr` with the Vars keyed (by handle) in `mapping` replaced."""
    return tvm_ffi.structural_map(expr, (tvm.ir.Var, lambda var: mapping.get(var.__chandle__(), var)))


def replace_loads(expr, mapping: dict):
    """`expr` with each load whose (buffer, indices) key is in `mapping` replaced (see load_key)."""
    return tvm_ffi.structural_map(expr, (tvm.ir.TensorLoad, lambda load: mapping.get(load_key(load), load)))


def load_key(load) -> tuple:
    return (load.source.__chandle__(), tuple(str(i) for i in load.indices))


def loads_in(expr) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, found.append))
    return found


def nest(name: str, iter_vars: list, reduce_handles: set, value, indices, target, init=None,
         fold=tirx.Add) -> tirx.Stmt:
    """`target[indices] = value` (or `= fold(target[indices], value)` after `init`, when some variable
    reduces: a sum unless told) over the domain of `iter_vars` (forward IterVars; those whose handle
    is in `reduce_handles` reduce)."""
    fresh, loops, mapping = [], [], {}
    for iv in iter_vars:
        var = tirx.Var(iv.var.name, dtype_of(iv.var))
        loop_var = tirx.Var(_loop_name(iv.var.name), dtype_of(iv.var))
        kind = tirx.IterVar.CommReduce if iv.var.__chandle__() in reduce_handles else tirx.IterVar.DataPar
        fresh.append(tirx.IterVar(tvm.ir.Range(0, iv.dom.extent), var, kind))
        loops.append((loop_var, iv.dom.extent))
        mapping[iv.var.__chandle__()] = var
    indices = [substitute(i, mapping) for i in indices]
    value = substitute(value, mapping)
    reduces = any(iv.iter_type == tirx.IterVar.CommReduce for iv in fresh)
    init_store = None
    if reduces:
        start = substitute(init, mapping) if init is not None else tirx.const(0.0, target.dtype)
        init_store = tirx.BufferStore(target, start, indices)
        value = fold(tirx.BufferLoad(target, indices), value)
    block = s_tir.SBlock(iter_vars=fresh, reads=[], writes=[], name_hint=name,
                         body=tirx.BufferStore(target, value, indices), init=init_store)
    stmt = s_tir.SBlockRealize(iter_values=[v for v, _ in loops], predicate=True, block=block)
    for loop_var, extent in reversed(loops):
        stmt = tirx.For(loop_var, 0, extent, tirx.ForKind.SERIAL, stmt)
    return stmt


def domain_of(buffer, prefix: str = "vi") -> list:
    """Spatial IterVars over every element of `buffer`, for blocks that combine whole buffers."""
    return [tirx.IterVar(tvm.ir.Range(0, extent), tirx.Var(f"{prefix}{axis}", "int32"), tirx.IterVar.DataPar)
            for axis, extent in enumerate(buffer.shape)]


def function(name: str, params: list, statements: list, allocs: list, annotations: dict) -> tirx.PrimFunc:
    """The PrimFunc, every block's read and write regions filled in as the parser would."""
    body = statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)
    buffers = {b: b for b in [*params, *allocs] if tirx.is_buffer_var(b)}

    def with_regions(block: s_tir.SBlock) -> s_tir.SBlock:
        reads, writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
        return replace_block(block, reads=reads, writes=writes)

    body = tvm_ffi.structural_map(body, (s_tir.SBlock, with_regions))
    root = s_tir.SBlock(iter_vars=[], reads=[], writes=[], name_hint="root", body=body, alloc_buffers=allocs,
                        annotations=annotations)
    func = tirx.PrimFunc(params, s_tir.SBlockRealize([], True, root))
    return func.with_attrs({"global_symbol": name, "s_tir": True})


def _loop_name(var_name: str) -> str:
    return var_name[1:] if var_name.startswith("v") and len(var_name) > 1 else f"{var_name}_loop"
