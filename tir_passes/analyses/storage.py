"""Where a kernel keeps a value it writes and then reads again: registers, or memory with a sync.

A value written by one block and read by later blocks of the same kernel stays in registers when
every read uses exactly the element the write produced, on the same tile axes: the write's and
each read's index, over the loops around them, are equal once loops that are one tile axis are
named by that axis. Loops around the write but not around a read must be whole tile axes (the
register holds the whole axis) or the writer's own reduction loops (an accumulator). Otherwise
the value goes through memory ("spilled"): the program syncs (a barrier) between the write and
the reads, which is correct because no other program touches those elements (program ids carry
no dependence).

Used by Tiling, for the plan it writes, and by the contract check, to verify that plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import REDUCE, block_accesses, block_sites, loop_kind, substitute_bindings


@dataclass
class Storage:
    registers: list[str] = field(default_factory=list)
    spilled: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Block:
    realize: s_tir.SBlockRealize
    loops: tuple[tirx.For, ...]
    order: int


def _blocks(stmt) -> list[_Block]:
    return [_Block(realize, loops, order) for order, (realize, loops) in enumerate(block_sites(stmt))]


def _canonical_indices(indices, block: _Block, axes: dict[int, str], axis_vars: dict[str, tirx.Var]) -> list:
    """Indices over loop variables, every whole-tile loop replaced by one variable per axis name."""

    def rename(var):
        axis = axes.get(var.__chandle__())
        return var if axis is None else axis_vars.setdefault(axis, tirx.Var(f"axis_{axis}", var.ty.dtype))

    analyzer = sym.Analyzer()
    return [analyzer.simplify(tvm_ffi.structural_map(substitute_bindings(i, block.realize), (tirx.Var, rename)))
            for i in indices]


def _conditional_stores(block: s_tir.SBlock) -> list:
    found: list = []
    tvm_ffi.structural_walk(block.body, (tirx.IfThenElse, lambda node: tvm_ffi.structural_walk(
        node, (tirx.BufferStore, found.append))))
    return found


def _register_problem(name: str, writer: _Block, readers: list[_Block], axes: dict[int, str]) -> str | None:
    """Why `name` cannot stay in registers between its writer and readers (None when it can)."""
    block = writer.realize.block
    stores = [a for a in block_accesses(block) if a.is_store and a.name == name]
    if len(stores) != 1:
        return f"{block.name_hint} writes {name} {len(stores)} times"
    store = stores[0]
    if any(node.same_as(store.node) for node in _conditional_stores(block)):
        return f"{block.name_hint} writes {name} under a condition"
    axis_vars: dict[str, tirx.Var] = {}
    written = _canonical_indices(store.indices, writer, axes, axis_vars)
    for reader in readers:
        if reader.order <= writer.order:
            return f"{reader.realize.block.name_hint} reads {name} before {block.name_hint} writes it"
        for load in (a for a in block_accesses(reader.realize.block) if not a.is_store and a.name == name):
            read = _canonical_indices(load.indices, reader, axes, axis_vars)
            if not all(tvm_ffi.structural_equal(w, r) for w, r in zip(written, read)):
                return (f"{reader.realize.block.name_hint} reads {name}[{', '.join(map(str, load.indices))}], "
                        f"another element than {block.name_hint} writes on these tiles")
        for loop in writer.loops:
            if any(loop.same_as(l) for l in reader.loops) or loop.loop_var.__chandle__() in axes:
                continue
            if loop_kind(loop, writer.realize) != REDUCE:
                return (f"loop {loop.loop_var.name} runs around {block.name_hint} but not around "
                        f"{reader.realize.block.name_hint}: only its last value would be in registers")
    return None


def decide_storage(stmt, whole_axes: dict[int, str]) -> Storage:
    """Registers or memory for every buffer that the kernel `stmt` writes and reads again.
    `whole_axes` maps the handles of loops that are whole tile axes to their axis names."""
    blocks = _blocks(stmt)
    storage = Storage()
    for name in _written_names(blocks):
        writers = [b for b in blocks if any(a.is_store and a.name == name for a in block_accesses(b.realize.block))]
        readers = [b for b in blocks if b not in writers
                   and any(not a.is_store and a.name == name for a in block_accesses(b.realize.block))]
        if not readers:
            continue
        problem = (f"{len(writers)} blocks write {name}" if len(writers) != 1
                   else _register_problem(name, writers[0], readers, whole_axes))
        if problem is None:
            storage.registers.append(name)
        else:
            storage.spilled.append(name)
            storage.notes.append(f"{name} goes through memory within the kernel (a sync after its write): {problem}")
    return storage


def _written_names(blocks: list[_Block]) -> list[str]:
    names: list[str] = []
    for block in blocks:
        for access in block_accesses(block.realize.block):
            if access.is_store and access.name not in names:
                names.append(access.name)
    return names
