"""CanonicalBlockOrder: the top-level nests in one order that follows the data flow, whatever
order the user wrote independent nests in.

Why: two nests that neither read nor write what the other writes may be written in either
order, and the later passes read the order (LoopFusion fuses neighbours, the kernels are launched
and listed in program order). Without one order, swapping two independent blocks swaps their
kernels, and the kernel plan depends on how the user happened to write the program
(tests/plan_invariance, family `independent_nests_swapped`).

What it rewrites: the statements under the root block, put in a topological order of their
dependences (a nest that reads, or writes, what an earlier one writes, or writes what an earlier
one reads, stays after it), choosing among the nests whose dependences are placed the one with
the smallest key:
  1. the first parameter, in signature order, that the nest writes or that a nest depending on
     it (transitively) writes: the nests that compute the first output come first;
  2. the positions of the parameters it writes, then of those it reads;
  3. its structural hash with free variables mapped by first use, which names do not enter
     (loop, buffer and block names are not part of TVM's structural equality);
  4. the written order, only between nests equal in all of these (structurally the same nest
     reading and writing the same parameters: either order gives the same plan).
Along the order the first key never decreases (a nest's dependents feed no earlier output than
it), so each output's nests stay together, producers before consumers. Only the order changes:
every nest runs over the same values as before, so the result is bit for bit the same.

Assumes: HoistAllocations ran (intermediates are root allocations, not statements).
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, top_level_statements, with_root_block


def _accesses(stmt) -> tuple[set[int], set[int]]:
    """(read, written) handles of a statement: the buffers of its loads, stores and blocks' regions,
    and the scalar variables it reads (a scalar parameter is read, never written)."""
    reads: set[int] = set()
    writes: set[int] = set()

    def block(node: s_tir.SBlock) -> None:
        reads.update(region.source.__chandle__() for region in node.reads)
        writes.update(region.source.__chandle__() for region in node.writes)

    tvm_ffi.structural_walk(stmt, [
        (tirx.BufferStore, lambda node: writes.add(node.buffer.__chandle__())),
        (tvm.ir.TensorLoad, lambda node: reads.add(node.source.__chandle__())),
        (s_tir.SBlock, block),
        (tirx.Var, lambda node: None if tirx.is_buffer_var(node) else reads.add(node.__chandle__())),
    ])
    return reads, writes


def _parameter_positions(func: tirx.PrimFunc) -> dict[int, int]:
    """buffer or scalar parameter handle -> the parameter's position in the signature."""
    return {param.__chandle__(): position for position, param in enumerate(func.params)}


def _dependences(accesses: list[tuple[set[int], set[int]]]) -> list[set[int]]:
    """For each statement, the earlier statements it must stay after."""
    before: list[set[int]] = []
    for index, (reads, writes) in enumerate(accesses):
        before.append({earlier for earlier in range(index)
                       if accesses[earlier][1] & (reads | writes) or accesses[earlier][0] & writes})
    return before


def _first_outputs(written: list[tuple[int, ...]], before: list[set[int]]) -> list[float]:
    """For each statement, the first parameter position it or any statement after it that depends
    on it (transitively) writes; inf where none does."""
    first = [float(min(positions)) if positions else math.inf for positions in written]
    for index in reversed(range(len(first))):
        for earlier in before[index]:
            first[earlier] = min(first[earlier], first[index])
    return first


def canonical_order(func: tirx.PrimFunc, statements: list[tirx.Stmt]) -> list[int]:
    """The canonical order of `statements` (new position -> written index)."""
    positions = _parameter_positions(func)
    accesses = [_accesses(stmt) for stmt in statements]
    before = _dependences(accesses)
    written = [tuple(sorted(positions[h] for h in writes if h in positions)) for _, writes in accesses]
    read = [tuple(sorted(positions[h] for h in reads if h in positions)) for reads, _ in accesses]
    first = _first_outputs(written, before)
    keys = [(first[i], written[i], read[i], tvm_ffi.structural_hash(stmt, map_free_vars=True), i)
            for i, stmt in enumerate(statements)]
    placed: list[int] = []
    while len(placed) < len(statements):
        ready = [i for i in range(len(statements)) if i not in placed and before[i] <= set(placed)]
        placed.append(min(ready, key=lambda i: keys[i]))
    return placed


def canonical_block_order(func: tirx.PrimFunc) -> tirx.PrimFunc:
    statements = top_level_statements(func)
    if len(statements) < 2:
        return func
    order = canonical_order(func, statements)
    if order == list(range(len(statements))):
        return func
    body = tirx.SeqStmt([statements[i] for i in order])
    return with_root_block(func, replace_block(root_block(func), body=body))


def CanonicalBlockOrder():
    return s_tir_pass("CanonicalBlockOrder", canonical_block_order)
