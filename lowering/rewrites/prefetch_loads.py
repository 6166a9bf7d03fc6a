"""A walked loop's row loads, issued iterations ahead into registers: Tiling's prefetch, applied.

What it rewrites: a Loop whose Tiling record (tir_passes/contracts/prefetch_record.py, carried as
`prefetch_distance` and `prefetch_buffers`) names buffers to prefetch. Each load of those buffers in
the loop's own statements (not in a nested loop) whose address or mask uses the loop's index becomes
a register the body reads and a `Prefetch` on the loop (tile_ir.py): before the loop its slots load
iterations start .. start + d - 1, each iteration takes slot 0 and loads iteration var + d into the
last. The emitter (triton_codegen/emit_kernel.py) writes exactly that.
Why: the walk is latency bound (a norm backward's rows reduce before the iteration goes on); with the
next row's loads issued early they are in flight while this row reduces.
Bounds: every early row index is clamped to the walk's last iteration, `min(i, stop - 1)`, and the
load keeps its own mask, so it reads only what the loop reads at some iteration; the loop must run
at least once (static bounds, or `entered`), or the loads before it would read a row it never does.
Numerics: only loads move; every value and every order of arithmetic is the loop's own.
Assumes: invariant loads were hoisted first (hoist_loads.py); Tiling named only buffers the kernel
does not write and addresses that read no memory, so an address using a register the loop assigns,
or a store into a named buffer, contradicts the record (ContractError).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tir_passes.contracts.tile_contract import ContractError
from tir_passes.contracts.prefetch_record import LoopPrefetch
from lowering.rules.exprs import fold_binary
from lowering.rewrites.hoist_loads import assigned_names, read_names, runs_at_least_once, stored_buffers
from lowering.tile_ir import Binary, Const, Expr, Load, Loop, Prefetch, Reg, Scalar


def prefetch_fields(prefetch: LoopPrefetch | None) -> dict:
    """The Loop fields that carry Tiling's record into the tile IR."""
    return {} if prefetch is None else {"prefetch_distance": prefetch.distance, "prefetch_buffers": prefetch.buffers,
                                        "sums_together": prefetch.sums_together}


def prefetch_row_loads(body: tuple, fresh: Callable[[str], str]) -> tuple:
    """`body` with every prefetching loop's row loads issued ahead (inner loops first)."""
    out = []
    for stmt in body:
        if isinstance(stmt, Loop):
            stmt = dataclasses.replace(stmt, body=prefetch_row_loads(stmt.body, fresh))
            if stmt.prefetch_distance:
                stmt = _prefetched(stmt, fresh)
        out.append(stmt)
    return tuple(out)


def _prefetched(loop: Loop, fresh) -> Loop:
    where = f"loop {loop.var}"
    if not runs_at_least_once(loop):
        raise ContractError(where, "a prefetching walk must run at least once (its first rows load before it)")
    if set(loop.prefetch_buffers) & stored_buffers(loop.body):
        raise ContractError(where, f"it prefetches {', '.join(loop.prefetch_buffers)}, which the loop stores to")
    assigned = assigned_names(loop.body)
    found: dict[Load, Prefetch] = {}

    def visit(node):
        if isinstance(node, Load) and node.buffer in loop.prefetch_buffers and loop.var in read_names(node):
            if read_names(node) & assigned:
                raise ContractError(where, f"a load of {node.buffer} it prefetches has an address that reads "
                                    f"{', '.join(sorted(read_names(node) & assigned))}, which the loop assigns")
            if node not in found:
                found[node] = _prefetch(loop, node, fresh)
            return Reg(found[node].name, node.dtype, node.dims)
        return _map_children(node, visit)

    body = tuple(stmt if isinstance(stmt, Loop) else visit(stmt) for stmt in loop.body)
    return dataclasses.replace(loop, body=body, prefetched=tuple(found.values()))


def _prefetch(loop: Loop, load: Load, fresh) -> Prefetch:
    base = load.buffer
    slots = tuple(fresh(f"{base}_next") for _ in range(loop.prefetch_distance))
    last = fold_binary("-", loop.stop, Const(1, "int32"), "int32", ())
    first = tuple(_at(load, loop.var, _clamped(fold_binary("+", loop.start, Const(k, "int32"), "int32", ()), last))
                  for k in range(len(slots)))
    ahead = fold_binary("+", Scalar(loop.var, "int32"), Const(len(slots), "int32"), "int32", ())
    return Prefetch(fresh(f"{base}_row"), slots, first, _at(load, loop.var, _clamped(ahead, last)))


def _clamped(index: Expr, last: Expr) -> Expr:
    if isinstance(index, Const) and isinstance(last, Const):
        return Const(min(int(index.value), int(last.value)), "int32")
    return fold_binary("min", index, last, "int32", ())


def _at(load: Load, var: str, index: Expr) -> Load:
    """`load` with the loop index `var` replaced by `index`."""
    def visit(node):
        if isinstance(node, Scalar) and node.name == var:
            return index
        if isinstance(node, Binary):   # folded again: `t * 16 + 0` is `t * 16`
            return fold_binary(node.op, visit(node.a), visit(node.b), node.dtype, node.dims)
        return _map_children(node, visit)

    return visit(load)


def _map_children(node, visit):
    if isinstance(node, tuple):
        return tuple(visit(item) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: visit(getattr(node, f.name)) for f in dataclasses.fields(node)
                   if isinstance(getattr(node, f.name), tuple) or dataclasses.is_dataclass(getattr(node, f.name))}
        return dataclasses.replace(node, **changes) if changes else node
    return node
