"""The prefetch record of a walked loop (LoopTile.prefetch): Tiling writes it (tiling_prefetch.py) on a
serial row walk whose iterations each load rows of buffers the kernel only reads and reduce them across
the program before using them (a norm's backward: mean, var, then the row sums); the lowering issues
those loads `distance` iterations ahead, held in registers (lowering/rewrites/prefetch_loads.py), so a
row's loads are in flight while the rows before it reduce; and with `sums_together` it reduces the
iteration's independent sums as one (lowering/rewrites/sums_together.py).

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
    # the iteration's independent sums reduced as one (lowering/rewrites/sums_together.py): the walk is latency
    # bound, its row reductions each a shared-memory round trip
    sums_together: bool = False


def prefetch_value(prefetch: LoopPrefetch) -> dict:
    value = {"distance": prefetch.distance, "buffers": list(prefetch.buffers), "registers": prefetch.registers}
    return {**value, "sums_together": True} if prefetch.sums_together else value


def prefetch_from(raw, error) -> LoopPrefetch:
    """The record of a "prefetch" entry; `error(why)` builds the exception a malformed one raises."""
    if not hasattr(raw, "items") or not set(dict(raw.items())) <= {"distance", "buffers", "registers", "sums_together"}:
        raise error(f'"prefetch" must be a dict of distance, buffers, registers and sums_together, not {raw!r}')
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
    raw_together = fields.get("sums_together", False)
    together = getattr(raw_together, "value", raw_together)   # an IntImm as the annotation holds it
    if together not in (0, 1):
        raise error(f"a prefetch's sums_together is a boolean, not {raw_together!r}")
    return LoopPrefetch(distance, buffers, registers, bool(together))
