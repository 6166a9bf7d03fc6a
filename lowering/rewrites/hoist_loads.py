"""Loads that no iteration of a serial loop changes are made once, before the loop.

Why: a tile read inside a loop is read again on every iteration, although nothing in the loop
changes it (attention's query tile, read once per step over the keys; a bias in a loop over
chunks). Holding it in registers across the loop saves that traffic, as hand-written flash
attention does.

What it moves: a Load inside a Loop's body (not inside a nested loop: those were considered for the
inner loop first, and a load they hoisted is now in this body) whose offset and mask use neither
the loop's index nor a register the loop assigns, from a buffer the loop does not store to. It
becomes a register assigned before the loop. Only loops that run at least once (static bounds),
or whose iterations are a window of a TIR loop every program enters (`Loop.entered`: causal
attention's key tiles up to the diagonal, whose bounds depend on the program id): a hoisted load
must not run where the TIR program would not run it. Its address is then the same in every
iteration and valid in the TIR loop, so reading it once before an empty window is safe.

A load already hoisted before an earlier loop of the same body (the window's segments: the tiles
inside it, then the diagonal ones) is not read again: the later loop uses that register, unless
a statement between them stores to its buffer or assigns a name its address reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lowering.tile_ir import Assign, Binary, CombineAssign, Comment, Const, Load, Loop, Reg, Scalar, Store


def hoist_invariant_loads(body: tuple, fresh: Callable[[str], str]) -> tuple:
    """`body` with every loop's invariant loads assigned before it (inner loops first)."""
    out = []
    available: dict[Load, Reg] = {}   # loads hoisted before an earlier loop of this body, still valid
    for stmt in body:
        if isinstance(stmt, Loop):
            loop = dataclasses.replace(stmt, body=hoist_invariant_loads(stmt.body, fresh))
            hoisted, loop = _hoist_from(loop, fresh, available) if _runs_at_least_once(loop) else ((), loop)
            comments = _trailing_comments(out)   # a comment before the loop stays with it
            out[len(out) - len(comments):] = [*hoisted, *comments]
            available.update({assign.value: Reg(assign.name, assign.dtype, assign.dims) for assign in hoisted})
            out.append(loop)
        else:
            out.append(stmt)
        available = _still_valid(available, stmt)
    return tuple(out)


def _trailing_comments(out: list) -> list:
    count = 0
    while count < len(out) and isinstance(out[len(out) - 1 - count], Comment):
        count += 1
    return out[len(out) - count:]


def _still_valid(available: dict, stmt) -> dict:
    stored, assigned = _stored(stmt), _assigned(stmt)
    return {load: reg for load, reg in available.items()
            if load.buffer not in stored and not (_names(load) & assigned)}


def _runs_at_least_once(loop: Loop) -> bool:
    if loop.entered:
        return True
    start, stop = _static(loop.start), _static(loop.stop)
    return start is not None and stop is not None and stop > start


def _static(expr) -> int | None:
    """The value of a constant bound, or of `cdiv(constant, BLOCK)` when the constant is positive
    (at least 1 for any block size)."""
    if isinstance(expr, Const):
        return int(expr.value)
    if isinstance(expr, Binary) and expr.op == "cdiv" and isinstance(expr.a, Const) and int(expr.a.value) > 0:
        return 1
    return None


def _hoist_from(loop: Loop, fresh, available: dict) -> tuple[tuple, Loop]:
    varying = {loop.var} | _assigned(loop.body)
    stored = _stored(loop.body)
    hoisted: dict[Load, Reg] = {}

    def visit(node):
        if isinstance(node, Load) and node.buffer not in stored and not (_names(node) & varying):
            if node in available:
                return available[node]
            if node not in hoisted:
                hoisted[node] = Reg(fresh(f"{node.buffer}_tile"), node.dtype, node.dims)
            return hoisted[node]
        return _map_children(node, visit)

    body = tuple(stmt if isinstance(stmt, Loop) else visit(stmt) for stmt in loop.body)
    assigns = tuple(Assign(reg.name, load, load.dtype, load.dims) for load, reg in hoisted.items())
    return assigns, dataclasses.replace(loop, body=body)


def _map_children(node, visit):
    if isinstance(node, tuple):
        return tuple(visit(item) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: visit(getattr(node, f.name)) for f in dataclasses.fields(node)
                   if _holds_nodes(getattr(node, f.name))}
        return dataclasses.replace(node, **changes) if changes else node
    return node


def _holds_nodes(value) -> bool:
    return isinstance(value, tuple) or (dataclasses.is_dataclass(value) and not isinstance(value, type))


def walk_nodes(node, on_node) -> None:
    """`on_node` on `node` and every tile-IR node under it (tuples and dataclass fields), pre-order."""
    on_node(node)
    if isinstance(node, tuple):
        for item in node:
            walk_nodes(item, on_node)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            walk_nodes(getattr(node, f.name), on_node)


def _names(node) -> set[str]:
    """The scalars and registers an expression reads."""
    found: set[str] = set()
    walk_nodes(node, lambda n: found.add(n.name) if isinstance(n, (Scalar, Reg)) else None)
    return found


def _assigned(body) -> set[str]:
    found: set[str] = set()

    def note(node):
        if isinstance(node, Assign):
            found.add(node.name)
        elif isinstance(node, CombineAssign):
            found.update(node.names)
        elif isinstance(node, Loop):
            found.add(node.var)

    walk_nodes(body, note)
    return found


def _stored(body) -> set[str]:
    found: set[str] = set()
    walk_nodes(body, lambda n: found.add(n.buffer) if isinstance(n, Store) else None)
    return found


# the walks the prefetch of row loads shares (prefetch_loads.py)
runs_at_least_once, read_names, assigned_names, stored_buffers = _runs_at_least_once, _names, _assigned, _stored
