"""The persistent tile scheduler's record (KernelTile.persistent, programs_per_sm): Tiling writes
it (tiling._persistent) on a contraction kernel over a grouped grid of more tiles than SMs; the
lowering writes the kernel as a loop over its tiles, pid, pid + programs, ... in GROUP_M order
(triton_codegen/persistent.py), and the launch sizes the grid: programs_per_sm × the SMs, or one
program a tile for 0 (the config setting PROGRAMS_PER_SM overrides it; the tuner searches it).

Stored as `"persistent": {"programs_per_sm": n}` in the kernel's "tile.kernel" annotation.
"""

from __future__ import annotations

from tir_passes.infra.pass_util import static_int


def persistent_fields(raw, grouped: bool, error) -> tuple[bool, int]:
    """(persistent, programs per SM) of a "tile.kernel" annotation's "persistent" entry (None: not
    persistent); `error(why)` builds the exception a malformed entry raises."""
    if raw is None:
        return False, 0
    if not hasattr(raw, "items") or set(dict(raw.items())) != {"programs_per_sm"}:
        raise error(f'"persistent" must be a dict with programs_per_sm only, not {raw!r}')
    if not grouped:
        raise error("a persistent kernel walks a grouped tile grid: it needs group_m")
    given = dict(raw.items())["programs_per_sm"]
    programs = None if isinstance(given, bool) else static_int(given)
    if programs is None or programs < 0:
        raise error(f"programs_per_sm must be a non-negative integer, not {given!r}")
    return True, programs
