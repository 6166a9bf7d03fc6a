"""Formulas of the tile summary (tile_summary.py) evaluated for the hardware model: a shape or
block size, an (op, a, b) of them, and the trip counts of the loops around a site, averaged over
the programs where a loop bound depends on the program's position in the grid (a causal window's
key tiles: program i walks i + 1 of them), through the scalars the kernel assigns before its loops.
"""

from __future__ import annotations

import math

from triton_codegen.tile_summary import OPS

GRID_POINTS = 256    # program positions a trip count that depends on them is averaged over, at most


class UnknownValue(KeyError):
    """A formula names something neither the sizes nor the config give (a loop variable)."""


def evaluate(entry, names: dict[str, int]) -> int:
    """The value of a formula: an int, a name (shape variable or block size), or (op, a, b)."""
    if isinstance(entry, bool) or entry is None:
        raise UnknownValue(repr(entry))
    if isinstance(entry, int):
        return entry
    if isinstance(entry, str):
        if entry not in names:
            raise UnknownValue(entry)
        return names[entry]
    op, a, b = entry
    return OPS[op](evaluate(a, names), evaluate(b, names))


def trips_at(entries, names: dict[str, int]) -> int:
    """Iterations of the loops around a site (a loop bound that names a loop variable counts once)."""
    total = 1
    for entry in entries:
        try:
            total *= max(0, evaluate(entry, names))
        except UnknownValue:
            continue
    return total


def trip_counter(kernel: dict, names: dict[str, int]):
    """trips(entries): the loops' trip counts around a site, multiplied, averaged over the programs
    where a bound names a program-level scalar of the grid's variables (a causal window: program i
    walks i + 1 key tiles), by `GRID_POINTS` evenly spaced positions at most."""
    scalars = kernel.get("scalars") or {}
    grid = dict(zip(kernel.get("grid_vars") or (), kernel.get("grid", ())))

    def resolve(entry):
        if isinstance(entry, str) and entry in scalars and entry not in names:
            return resolve(scalars[entry])
        if isinstance(entry, (tuple, list)) and len(entry) == 3 and entry[0] in OPS:
            return (entry[0], resolve(entry[1]), resolve(entry[2]))
        return entry

    memo: dict = {}   # the tuner prices thousands of configs: each site's entries are averaged once a config

    def trips(entries) -> float:
        key = repr(entries)
        if key not in memo:
            memo[key] = averaged(entries)
        return memo[key]

    def averaged(entries) -> float:
        resolved = [resolve(entry) for entry in entries]
        free = sorted(var for var in grid if var not in names and any(_mentions(e, var) for e in resolved))
        if not free:
            return trips_at(resolved, names)
        positions = _grid_positions([evaluate(grid[var], names) for var in free])
        return sum(trips_at(resolved, {**names, **dict(zip(free, p))}) for p in positions) / len(positions)

    return trips


def _mentions(entry, name: str) -> bool:
    if isinstance(entry, str):
        return entry == name
    return isinstance(entry, (tuple, list)) and any(_mentions(part, name) for part in entry[1:])


def _grid_positions(counts: list[int]) -> list[tuple[int, ...]]:
    total = math.prod(max(1, c) for c in counts)
    positions = []
    for flat in range(0, total, max(1, total // GRID_POINTS)):
        point = []
        for count in reversed(counts):
            flat, index = divmod(flat, max(1, count))
            point.append(index)
        positions.append(tuple(reversed(point)))
    return positions
