"""The layout record: BufferLayout's permutation of each intermediate, typed, stored in the IR.

BufferLayout (buffer_layout.py) writes one `LayoutDecision` per intermediate that crosses kernels,
permuted or kept, as the root block's "layout.decisions" annotation (a list of dicts); nothing else
writes it. The report shows it; the contract check verifies that each names a root allocation and
that a permuted buffer's shape is its old shape permuted (verify_contract.py). `text` is the line
a person reads; nobody parses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.pass_util import replace_block, root_block, with_root_block

LAYOUT_KEY = "layout.decisions"
_WRITER = "BufferLayout"


@dataclass(frozen=True)
class LayoutDecision:
    buffer: str
    permutation: tuple[int, ...] | None   # new axis k is old axis permutation[k]; None: kept
    old_shape: tuple[int, ...] = ()       # permuted: the shape before (static: BufferLayout needs it)
    reason: str = ""                      # why permuted (with what was proven) or kept

    @property
    def text(self) -> str:
        if self.permutation is None:
            return f"{self.buffer}: kept ({self.reason})"
        return f"{self.buffer}: axes permuted to {self.permutation}: {self.reason}"


def _value(decision: LayoutDecision) -> dict:
    value: dict = {"buffer": decision.buffer, "reason": decision.reason}
    if decision.permutation is not None:
        value["permutation"] = list(decision.permutation)
        value["old_shape"] = list(decision.old_shape)
    return value


def write_layout(func: tirx.PrimFunc, decisions: list[LayoutDecision]) -> tirx.PrimFunc:
    """`func` with the decisions as its root block's record (the only writer)."""
    root = root_block(func)
    annotations = {**dict(root.annotations), LAYOUT_KEY: [_value(d) for d in decisions]}
    return with_root_block(func, replace_block(root, annotations=annotations))


def _ints(value, where: str, what: str) -> tuple[int, ...]:
    if isinstance(value, str) or not hasattr(value, "__len__") or not all(isinstance(v, int) for v in value):
        raise ContractError(where, f"{what} must be a list of integers, not {value!r}", _WRITER)
    return tuple(int(v) for v in value)


def _decision(raw, where: str) -> LayoutDecision:
    if not hasattr(raw, "items"):
        raise ContractError(where, f"a layout decision must be a dict, not {raw!r}", _WRITER)
    fields = dict(raw.items())
    buffer, reason = fields.get("buffer"), fields.get("reason", "")
    if not isinstance(buffer, str) or not isinstance(reason, str):
        raise ContractError(where, f'a layout decision needs a "buffer" name and a text "reason", not {raw!r}', _WRITER)
    if fields.get("permutation") is None:
        return LayoutDecision(str(buffer), None, reason=str(reason))
    permutation = _ints(fields["permutation"], where, "permutation")
    old_shape = _ints(fields.get("old_shape"), where, "old_shape")
    if sorted(permutation) != list(range(len(permutation))) or len(old_shape) != len(permutation):
        raise ContractError(where, f"{permutation} is not a permutation of the {len(old_shape)} axes of {buffer}",
                            _WRITER)
    return LayoutDecision(str(buffer), permutation, old_shape, str(reason))


def layout_decisions(func: tirx.PrimFunc) -> tuple[LayoutDecision, ...]:
    """BufferLayout's decisions (empty when no intermediate crosses kernels)."""
    root = root_block(func)
    raw = root.annotations.get(LAYOUT_KEY) if root.annotations else None
    if raw is None:
        return ()
    if isinstance(raw, str) or not hasattr(raw, "__len__"):
        raise ContractError("the root block", f'"{LAYOUT_KEY}" must be a list of layout decisions, not {raw!r}',
                            _WRITER)
    return tuple(_decision(item, f"the root block's layout decision {index}") for index, item in enumerate(raw))
