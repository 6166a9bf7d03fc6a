"""The prefetch record of a walked loop (LoopTile.prefetch): Tiling writes it (tiling_prefetch.py) on a
serial row walk whose iterations each load rows of buffers the kernel only reads and reduce them across
the program before using them (a norm's backward: mean, var, then the row sums); the lowering issues
those loads `distance` iterations ahead, held in registers (lowering/rewrites/prefetch_loads.py), so a
row's loads are in flight while the rows before it reduce.

Stored as `"prefetch": {"distance": d, "buffers": [...]}` in the loop's "tile" annotation. It moves
loads only: every value and every reduction order is the unprefetched kernel's (deterministic=True
keeps it), and each early load reads a row the loop itself reads (the row index clamped to the walk's
last, under the load's own mask).
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.infra.pass_util import static_int

MAX_DISTANCE = 4   # iterations ahead a walk may load: each one more register tile per prefetched load


@dataclass(frozen=True)
class LoopPrefetch:
    distance: int                 # iterations ahead the loads are issued (1: the next row's, double-buffered)
    buffers: tuple[str, ...]      # the buffers whose row loads are issued early (sorted)
    registers: int = 0            # registers per thread the early tiles hold (Tiling's estimate, for the dump)


def prefetch_value(prefetch: LoopPrefetch) -> dict:
    return {"distance": prefetch.distance, "buffers": list(prefetch.buffers), "registers": prefetch.registers}


def prefetch_from(raw, error) -> LoopPrefetch:
    """The record of a "prefetch" entry; `error(why)` builds the exception a malformed one raises."""
    if not hasattr(raw, "items") or not set(dict(raw.items())) <= {"distance", "buffers", "registers"}:
        raise error(f'"prefetch" must be a dict of distance, buffers and registers, not {raw!r}')
    fields = dict(raw.items())
    distance = static_int(fields.get("distance"))
    if distance is None or not 1 <= distance <= MAX_DISTANCE:
        raise error(f"a prefetch distance is an integer from 1 to {MAX_DISTANCE}, not {fields.get('distance')!r}")
    buffers = tuple(str(name) for name in fields.get("buffers", ()))
    if not buffers or any(not isinstance(name, str) for name in fields.get("buffers", ())):
        raise error(f"a prefetch names the buffers it loads early, not {fields.get('buffers')!r}")
    if list(buffers) != sorted(set(buffers)):
        raise error(f"a prefetch's buffers are sorted and distinct, not {list(buffers)}")
    registers = static_int(fields.get("registers", 0))
    if registers is None or registers < 0:
        raise error(f"a prefetch's registers are a non-negative integer, not {fields.get('registers')!r}")
    return LoopPrefetch(distance, buffers, registers)
