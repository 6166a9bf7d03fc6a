"""The operand-rounding record: what RoundOperandsOnce decided, in one typed form stored in the IR.

RoundOperandsOnce (passes/round_operands_once.py) writes one `OperandRounding` per rounded operand
it found (a contraction operand `Cast(float16, X[...])` of a wider input X), taken or refused, as
the root block's "rounding.decisions" annotation; nothing else writes it. Readers: the dump (every
stage after the pass shows it) and the tests. The rewrite it
describes is visible in the IR itself (a nest writing `rounded`, the contractions reading it), so
no later stage needs the record to act.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.pass_util import replace_block, root_block, with_root_block

ROUNDING_KEY = "rounding.decisions"
_WRITER = "RoundOperandsOnce"


@dataclass(frozen=True)
class OperandRounding:
    buffer: str                  # the wider input the contractions round (d_C, fp32)
    dtype: str                   # what they round it to (float16)
    rounded: str                 # the buffer the rounding nest writes ("" when refused)
    readers: tuple[str, ...]     # the contraction blocks that read it rounded
    conversions: int             # elements rounded in registers by the contractions' programs, summed
    saved_seconds: float         # the model's price of those conversions
    cost_seconds: float          # the rounding nest's price (a pass over the input, and a launch)
    taken: bool
    reason: str


def _value(plan: OperandRounding) -> dict:
    return {"buffer": plan.buffer, "dtype": plan.dtype, "rounded": plan.rounded, "readers": list(plan.readers),
            "conversions": plan.conversions, "saved_seconds": plan.saved_seconds,
            "cost_seconds": plan.cost_seconds, "taken": plan.taken, "reason": plan.reason}


def write_roundings(func: tirx.PrimFunc, plans: list[OperandRounding]) -> tirx.PrimFunc:
    """`func` with the plans as its root block's record (the only writer)."""
    root = root_block(func)
    annotations = {**dict(root.annotations), ROUNDING_KEY: [_value(plan) for plan in plans]}
    return with_root_block(func, replace_block(root, annotations=annotations))


def roundings(func: tirx.PrimFunc) -> list[OperandRounding]:
    """The plans RoundOperandsOnce recorded on `func` (empty when it did not run or found none)."""
    raw = root_block(func).annotations.get(ROUNDING_KEY)
    if raw is None:
        return []
    plans = []
    for item in raw:
        fields = dict(item.items())
        if not isinstance(fields.get("taken"), bool) or not isinstance(fields.get("reason"), str):
            raise ContractError(ROUNDING_KEY, f'a plan needs a boolean "taken" and a text "reason", not {item!r}',
                                _WRITER)
        missing = [key for key in _FIELDS if key not in fields]
        if missing:
            raise ContractError(ROUNDING_KEY, f"a plan needs {', '.join(missing)}, not {item!r}", _WRITER)
        plans.append(OperandRounding(str(fields["buffer"]), str(fields["dtype"]), str(fields["rounded"]),
                                     tuple(str(name) for name in fields["readers"]), int(fields["conversions"]),
                                     float(fields["saved_seconds"]), float(fields["cost_seconds"]),
                                     fields["taken"], str(fields["reason"])))
    return plans


_FIELDS = ("buffer", "dtype", "rounded", "readers", "conversions", "saved_seconds", "cost_seconds")
REPLAY_ATTR = "tir_triton.rounding_replay"   # on a numerics copy: the full-size program's roundings


def replaying(module, full_func: tirx.PrimFunc):
    """`module` (a shape-reduced copy the numerics check runs) told to round what the full-size program
    rounded: RoundOperandsOnce decides from the sizes, and a copy small enough to check would never take
    the rounding, so it replays the decision instead of pricing it (what is verified is what is compiled)."""
    taken = [f"{plan.buffer}:{plan.dtype}" for plan in roundings(full_func) if plan.taken]
    if not taken:
        return module
    import tvm

    return tvm.IRModule({gvar: func.with_attr(REPLAY_ATTR, taken) if isinstance(func, tirx.PrimFunc) else func
                         for gvar, func in module.functions.items()}, attrs=module.attrs)


def replayed(func: tirx.PrimFunc) -> set[tuple[str, str]] | None:
    """The (buffer, dtype) roundings a numerics copy replays (None: not a copy, decide by the price)."""
    value = func.attrs.get(REPLAY_ATTR) if func.attrs is not None else None
    return None if value is None else {tuple(str(item).split(":", 1)) for item in value}
