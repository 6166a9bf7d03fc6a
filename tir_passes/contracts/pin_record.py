"""A deterministic kernel's record of what no config may change (KernelTile.pins, floors):
Tiling writes it (tiling_pins.pin, the policy in analyses/determinism.py), the contract check
verifies it (checks/verify_determinism.py), and the module's configs and the tuner keep it.

- a Pin keeps a setting (a BLOCK constexpr or num_warps) at one value in every config: what an
  element's reduction order follows (a float sum's tile, tl.dot's K tile, the warps tl.sum runs over);
- a Floor keeps a setting at or above a minimum: above it the setting is free, since it does not
  enter any element's arithmetic. A kernel whose only order-sensitive sums are tl.dots floors
  BLOCK_M and num_warps at what keeps Triton's MMA instruction family (PIN_MMA).

Stored in the kernel's "tile.kernel" annotation as `"pins": [{"name", "size", "why"}]` and
`"floors": [{"name", "minimum", "why"}]`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.infra.pass_util import static_int

# why a deterministic kernel keeps a setting in every config (determinism.py says what each one fixes)
PIN_REDUCTION = "reduction"   # a float sum's tile along its reduction axis: the association of its partial sums
PIN_DOT = "dot"               # a tl.dot's tile: its K steps (and, in a kernel with other sums, their layout)
PIN_LAYOUT = "layout"         # a tile beside a reduction along a non-contiguous axis: how threads split that axis
PIN_SCAN = "scan"             # a float scan's tile: the tree of tl.associative_scan
PIN_WARPS = "warps"           # num_warps: the lanes and warps tl.sum's tree runs across
PIN_MMA = "mma"               # a floor: BLOCK_M and num_warps that keep the MMA instruction (wgmma on sm_90)
PIN_REASONS = (PIN_REDUCTION, PIN_DOT, PIN_LAYOUT, PIN_SCAN, PIN_WARPS, PIN_MMA)
WARPS = "num_warps"


@dataclass(frozen=True)
class Pin:
    """A setting every config of a deterministic kernel keeps: a BLOCK constexpr (or num_warps), its value and why."""

    name: str
    size: int
    why: str


@dataclass(frozen=True)
class Floor:
    """A setting every config of a deterministic kernel keeps at or above `minimum`, and why."""

    name: str
    minimum: int
    why: str


def pin_value(pin: Pin) -> dict:
    return {"name": pin.name, "size": pin.size, "why": pin.why}


def floor_value(floor: Floor) -> dict:
    return {"name": floor.name, "minimum": floor.minimum, "why": floor.why}


def pin_from(raw, error) -> Pin:
    """A Pin from its annotation; `error(why)` builds the exception a malformed one raises."""
    name, size, why = _fields(raw, "pin", "size", error)
    return Pin(name, size, why)


def floor_from(raw, error) -> Floor:
    name, minimum, why = _fields(raw, "floor", "minimum", error)
    return Floor(name, minimum, why)


def _fields(raw, what: str, number_key: str, error) -> tuple[str, int, str]:
    if not hasattr(raw, "items"):
        raise error(f"a {what} must be a dict, not {raw!r}")
    fields = dict(raw.items())
    name, why, given = fields.get("name"), fields.get("why"), fields.get(number_key)
    if not isinstance(name, str) or not isinstance(why, str):
        raise error(f"a {what}'s name and why must be strings, not {name!r} and {why!r}")
    if why not in PIN_REASONS:
        raise error(f"{what} reason must be one of {', '.join(PIN_REASONS)}, not {why!r}")
    number = None if isinstance(given, bool) else static_int(given)
    if number is None or number < 1:
        raise error(f"{what} {number_key} must be a positive integer, not {given!r}")
    return str(name), number, str(why)
