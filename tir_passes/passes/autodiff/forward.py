"""The forward program as differentiation reads it: its blocks in program order, each a typed
`ForwardBlock` (the buffer it writes, its domain, the value it stores or accumulates).

Why: reverse mode walks the blocks backwards and asks each the same questions (what does it
write, at which index, from what); reading them once, with every refusal here, keeps the rules
and the builder free of TIR pattern matching.
Assumes: the program as users write it (unscheduled S-TIR): every block alone under loops that
bind its iteration variables one to one from 0, writing one buffer at its spatial variables.
Anything else is refused with the block's name and the reason (NotDifferentiableError).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ...analyses.scans import scan_form
from ...errors import NotDifferentiableError
from ...infra.pass_util import root_block, source_line, top_level_statements
from ...infra.reduction_kinds import MAX, MIN, PROD, SUM, combiner_nodes
from .arg_reduction import ARG_INDEX, arg_reduction, stores_of

SPATIAL = "spatial"
SCAN = "scan"   # a running sum along one spatial variable (analyses/scans.py's form)


@dataclass(frozen=True)
class ForwardBlock:
    name: str
    stmt: tirx.Stmt          # the whole loop nest, copied when the backward recomputes it
    iter_vars: tuple         # tirx.IterVar, the block's domain
    kind: str                # SPATIAL, SCAN, SUM, PROD, MAX, MIN or ARG_INDEX (a tuple reduction's index)
    output: object           # the buffer Var written
    out_indices: tuple       # the iteration Vars it is written at (one per axis)
    value: object            # SPATIAL: the stored value; SCAN: the element summed in; reductions: the term
    init: object | None      # reductions: the T.init value
    scan_var: object | None = None   # SCAN: the IterVar the running sum walks
    # a tuple reduction's value: (its index buffer, the reduction Var it takes, whether an index never set can
    # name an element: its T.init is not a constant outside the variable's range)
    arg_index: tuple | None = None

    def reduce_vars(self) -> tuple:
        return tuple(iv.var for iv in self.iter_vars if iv.iter_type == tirx.IterVar.CommReduce)

    def where(self) -> str:
        line = source_line(self.stmt)
        return f"block {self.name}" + (f" ({line})" if line else "")


@dataclass(frozen=True)
class ForwardProgram:
    func: tirx.PrimFunc
    name: str
    inputs: tuple            # parameters no block writes (buffer Vars and scalars)
    outputs: tuple           # parameters a block writes
    blocks: tuple            # ForwardBlock, in program order

    def writer(self, buffer) -> ForwardBlock | None:
        return next((b for b in self.blocks if b.output.same_as(buffer)), None)


def read_forward(func: tirx.PrimFunc) -> ForwardProgram:
    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "main"
    if root_block(func).init is not None or not isinstance(func.body, s_tir.SBlockRealize):
        raise NotDifferentiableError(f"PrimFunc {name}: expected an S-TIR function (@T.prim_func(s_tir=True))")
    blocks = tuple(block for stmt in top_level_statements(func) for block in _read_nest(stmt, name))
    _check_single_writers(blocks, name)
    written = [b.output for b in blocks]
    outputs = tuple(p for p in func.params if any(p.same_as(w) for w in written))
    inputs = tuple(p for p in func.params if not any(p.same_as(o) for o in outputs))
    _check_read_after_written(blocks)
    return ForwardProgram(func, name, inputs, outputs, blocks)


def _read_nest(stmt, func_name: str) -> list:
    """The nest's block as one ForwardBlock per buffer it writes (a block folding several
    reductions, such as a sum and a sum of squares, is several independent ones)."""
    loops = []
    while isinstance(stmt, tirx.For):
        loops.append(stmt)
        stmt = stmt.body
    if not isinstance(stmt, s_tir.SBlockRealize):
        what = "several statements under shared loops" if isinstance(stmt, tirx.SeqStmt) else type(stmt).__name__
        where = source_line(loops[0]) if loops else None
        raise NotDifferentiableError(f"PrimFunc {func_name}{f' ({where})' if where else ''}: a loop nest holds {what}; "
                                     "differentiate the program before it is scheduled (one block per loop nest)")
    top = loops[0] if loops else stmt
    block = stmt.block
    where = f"block {block.name_hint}" + (f" ({source_line(top)})" if source_line(top) else "")
    _check_bindings(stmt, loops, where)
    if block.alloc_buffers or block.match_buffers:
        raise NotDifferentiableError(f"{where}: allocates buffers inside the block; declare them at the root")
    stores = stores_of(block.body, where)
    inits = _stores(block.init, where) if block.init is not None else []
    reduce_vars = tuple(iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce)
    pair = arg_reduction(stores, reduce_vars, where) if reduce_vars else None
    read_blocks = []
    for store in stores:
        out_indices = _plain_indices(block, store, where)
        arg_index = None
        if pair is not None and store is pair.index:
            kind, value, scan_var = ARG_INDEX, store.value, None
        elif pair is not None:
            kind, value, scan_var = pair.kind, pair.term, None
            start = next((i.value for i in inits if i.buffer.same_as(pair.index.buffer)), None)
            arg_index = (pair.index.buffer, pair.position, not _outside(start, pair.position, block))
        else:
            kind, value, scan_var = _kind_and_value(block, store, where)
        for other in stores:
            if pair is None and other is not store and _reads(value, other.buffer):
                raise NotDifferentiableError(f"{where}: the value stored in {store.buffer.name} reads "
                                             f"{other.buffer.name}, which the same block writes")
        init = None
        if kind not in (SPATIAL, SCAN):
            init = next((i.value for i in inits if i.buffer.same_as(store.buffer)), None)
            if init is None:
                raise NotDifferentiableError(f"{where}: a reduction without T.init of {store.buffer.name} accumulates "
                                             "into what it held before, which the adjoint cannot see")
        read_blocks.append(ForwardBlock(block.name_hint, top, tuple(block.iter_vars), kind, store.buffer, out_indices,
                                        value, init, scan_var, arg_index))
    return read_blocks


def _stores(body, where: str) -> list:
    stores = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for store in stores:
        if not isinstance(store, tirx.BufferStore):
            raise NotDifferentiableError(f"{where}: the body holds a {type(store).__name__}, not only stores (a "
                                         "tuple reduction such as an arg-max, or lets): not differentiated")
    return stores


def _check_bindings(realize: s_tir.SBlockRealize, loops: list, where: str) -> None:
    block = realize.block
    loop_of = {loop.loop_var.__chandle__(): loop for loop in loops}
    bound = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        loop = loop_of.get(value.__chandle__()) if isinstance(value, tirx.Var) else None
        ok = (loop is not None and loop.loop_var.__chandle__() not in bound and _is_zero(loop.min)
              and _is_zero(iv.dom.min) and _equal(loop.extent, iv.dom.extent)
              and loop.kind == tirx.ForKind.SERIAL and int(getattr(loop, "step", None) or 1) == 1)
        if not ok:
            raise NotDifferentiableError(f"{where}: iteration variable {iv.var.name} is not bound to its own loop "
                                         "over its whole domain (a schedule was applied); differentiate the "
                                         "unscheduled program")
        bound.add(loop.loop_var.__chandle__())
        if iv.iter_type not in (tirx.IterVar.DataPar, tirx.IterVar.CommReduce):
            raise NotDifferentiableError(f"{where}: iteration variable {iv.var.name} is neither spatial nor reduction")
    if len(bound) != len(loops):
        raise NotDifferentiableError(f"{where}: a loop around the block binds none of its iteration variables")
    if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate.value) == 1):
        raise NotDifferentiableError(f"{where}: the block has a predicate (T.where); write the condition as "
                                     "T.if_then_else in the value")


def _plain_indices(block: s_tir.SBlock, store: tirx.BufferStore, where: str) -> tuple:
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    indices = tuple(store.indices)
    plain = all(isinstance(i, tirx.Var) for i in indices) and len({i.__chandle__() for i in indices}) == len(indices)
    covers = plain and {i.__chandle__() for i in indices} == {v.__chandle__() for v in spatial}
    if not covers:
        raise NotDifferentiableError(f"{where}: writes {store.buffer.name}[{', '.join(map(str, indices))}]; the "
                                     "adjoint needs each element written by exactly one iteration, at the block's "
                                     "spatial variables (overlapping or partial writes)")
    return indices


def _kind_and_value(block: s_tir.SBlock, store: tirx.BufferStore, where: str):
    value = store.value
    reduces = any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)
    if not reduces:
        if _reads(value, store.buffer):
            return _scan(block, store, where)
        return SPATIAL, value, None
    for node, kind in combiner_nodes(tirx, (SUM, PROD, MAX, MIN)).items():
        if isinstance(value, node):
            for acc, term in ((value.a, value.b), (value.b, value.a)):
                if _is_accumulator(acc, store) and not _reads(term, store.buffer):
                    return kind, term, None
    raise NotDifferentiableError(f"{where}: the update of {store.buffer.name} is not a sum, product, max or min of "
                                 "the accumulator and a term that does not read it")


def _scan(block: s_tir.SBlock, store: tirx.BufferStore, where: str):
    """(SCAN, the element summed in at each position, the IterVar walked) of a running sum."""
    forms = [form for form in (scan_form(block, iv) for iv in block.iter_vars) if form is not None]
    if not forms:
        raise NotDifferentiableError(f"{where}: reads {store.buffer.name}, which it writes (an in-place update, or "
                                     "a recurrence that is not a scan along one axis): the adjoint needs the "
                                     "values it overwrites")
    form = forms[0]
    if form.combiner != SUM:
        raise NotDifferentiableError(f"{where}: a {form.combiner} scan; of the scans only running sums (cumsum) are "
                                     "differentiated")
    position = form.iter_var.var
    same = tvm_ffi.structural_equal(form.first, form.rest)
    element = form.rest if same else tirx.if_then_else(position == form.iter_var.dom.min, form.first, form.rest)
    return SCAN, element, form.iter_var


def _is_accumulator(expr, store: tirx.BufferStore) -> bool:
    return (isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(store.buffer)
            and all(a.same_as(b) for a, b in zip(expr.indices, store.indices)))


def _reads(expr, buffer) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(load.source.same_as(buffer))))
    return any(found)


def _check_single_writers(blocks: tuple, func_name: str) -> None:
    for index, block in enumerate(blocks):
        earlier = next((b for b in blocks[:index] if b.output.same_as(block.output)), None)
        if earlier is not None:
            raise NotDifferentiableError(f"{block.where()}: writes {block.output.name}, which {earlier.where()} also "
                                         "writes (overlapping writes): the adjoint needs each value's one writer")


def _check_read_after_written(blocks: tuple) -> None:
    """A block reading a buffer that a later block writes would see the value before the write,
    which the backward (recomputing or passing in the written value) does not have."""
    for index, block in enumerate(blocks):
        for earlier in blocks[:index]:
            if earlier.stmt.same_as(block.stmt):
                continue  # one block's stores read the values before it (_read_nest refuses all but an arg-max's)
            if _reads(earlier.value, block.output) or (earlier.init is not None and _reads(earlier.init, block.output)):
                raise NotDifferentiableError(f"{earlier.where()}: reads {block.output.name} before "
                                             f"{block.where()} writes it (the value passed in is overwritten)")


def _outside(start, position, block) -> bool:
    """The index's T.init is a constant no iteration takes (topi's -1): an index never set names no element."""
    extent = next(iv.dom.extent for iv in block.iter_vars if iv.var.same_as(position))
    return isinstance(start, tirx.IntImm) and isinstance(extent, tirx.IntImm) and \
        not 0 <= int(start.value) < int(extent.value)


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 0


def _equal(a, b) -> bool:
    return bool(tvm.sym.Analyzer().can_prove_equal(a, b)) if not (isinstance(a, tirx.IntImm)
                                                                     and isinstance(b, tirx.IntImm)) \
        else int(a.value) == int(b.value)
