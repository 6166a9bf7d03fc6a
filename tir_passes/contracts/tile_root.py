"""Readers of Tiling's root-block records (tile_contract.write_decision writes them): its notes
("tile.decisions", a TileNote per reason: the kernel it is about and its line, for people, which
the report groups by the typed kernel) and the backend's limits it tiled under ("tile.limits",
backend_limits.py), which the contract check and the lowering read.
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.tile_contract import DECISIONS_KEY, LIMITS_KEY, ContractError, TileNote
from tir_passes.infra.pass_util import root_block, static_int


def tile_notes(func: tirx.PrimFunc) -> tuple[TileNote, ...]:
    """Tiling's reasons, each with the kernel it is about (empty before Tiling)."""
    where = f'root block "{DECISIONS_KEY}"'
    try:
        return tuple(TileNote(static_int(entry["kernel"]), str(entry["text"]))
                     for entry in root_block(func).annotations.get(DECISIONS_KEY, ()))
    except (KeyError, TypeError, IndexError):
        raise ContractError(where, "a note is a dict of kernel and text") from None


def backend_limits(func: tirx.PrimFunc) -> BackendLimits | None:
    """The backend's limits Tiling recorded (None: not tiled yet, or tiled by hand)."""
    raw = root_block(func).annotations.get(LIMITS_KEY)
    if raw is None:
        return None
    try:
        return BackendLimits.from_dict({str(k): static_int(v) for k, v in raw.items()})
    except (ValueError, TypeError, AttributeError) as err:
        raise ContractError(f'root block "{LIMITS_KEY}"', f"not a record of the backend's limits: {err}") from None
