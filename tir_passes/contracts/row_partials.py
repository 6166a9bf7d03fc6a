"""The row-partials record: what RowPartials decided, in one typed form stored in the IR.

RowPartials (passes/row_partials.py) writes one `RowPartialsPlan` per row group it rewrote, and one
per group it left alone (with why), as the root block's "rows.partials" annotation; nothing else
writes it. Readers: Tiling (`walked_blocks`: the partials' blocks may reduce over the shared row loop, which stays
serial), the dump (every stage after RowPartials shows it), the tests.

A plan says which row nests share one walk of the rows (`row_blocks`), which column reductions
became partials written by that walk (`column_blocks`, into `partials`), how many rows each
program walks (`rows_per_program`) and how many programs (`programs`: the partials' rows, summed
in a fixed order by one small reduction), and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.pass_util import replace_block, root_block, with_root_block

ROW_PARTIALS_KEY = "rows.partials"
_WRITER = "RowPartials"


@dataclass(frozen=True)
class RowPartialsPlan:
    row_blocks: tuple[str, ...]      # the blocks of the row nests walked together, in order
    column_blocks: tuple[str, ...]   # the column reductions computed as partials in the same walk
    partials: tuple[str, ...]        # their partial buffers, (programs, columns) each
    partial_blocks: tuple[str, ...]  # the blocks writing them (in the walk; Tiling keeps its row loop serial)
    rows_per_program: int            # 0: not rewritten
    programs: int                    # 0: not rewritten
    taken: bool
    reason: str


def _value(plan: RowPartialsPlan) -> dict:
    return {"row_blocks": list(plan.row_blocks), "column_blocks": list(plan.column_blocks),
            "partials": list(plan.partials), "partial_blocks": list(plan.partial_blocks),
            "rows_per_program": plan.rows_per_program,
            "programs": plan.programs, "taken": plan.taken, "reason": plan.reason}


def write_row_partials(func: tirx.PrimFunc, plans: list[RowPartialsPlan]) -> tirx.PrimFunc:
    """`func` with the plans as its root block's record (the only writer)."""
    root = root_block(func)
    annotations = {**dict(root.annotations), ROW_PARTIALS_KEY: [_value(plan) for plan in plans]}
    return with_root_block(func, replace_block(root, annotations=annotations))


def _names(raw, key: str) -> tuple[str, ...]:
    value = raw.get(key, ())
    if isinstance(value, str) or not all(isinstance(name, str) for name in value):
        raise ContractError(ROW_PARTIALS_KEY, f'"{key}" must be a list of names, not {value!r}', _WRITER)
    return tuple(str(name) for name in value)


def row_partials(func: tirx.PrimFunc) -> list[RowPartialsPlan]:
    """The plans RowPartials recorded on `func` (empty when it did not run or found no group)."""
    raw = root_block(func).annotations.get(ROW_PARTIALS_KEY)
    if raw is None:
        return []
    plans = []
    for item in raw:
        fields = dict(item.items())
        if not isinstance(fields.get("taken"), bool) or not isinstance(fields.get("reason"), str):
            raise ContractError(ROW_PARTIALS_KEY, f'a plan needs a boolean "taken" and a text "reason", not {item!r}',
                                _WRITER)
        names = [_names(fields, key) for key in ("row_blocks", "column_blocks", "partials", "partial_blocks")]
        plans.append(RowPartialsPlan(*names, int(fields.get("rows_per_program", 0)), int(fields.get("programs", 0)),
                                     fields["taken"], str(fields["reason"])))
    return plans


def walked_blocks(func: tirx.PrimFunc) -> frozenset[str]:
    """The blocks of column partials whose row loop Tiling walks serially (tiling_plan.fused_shape)."""
    return frozenset(name for plan in row_partials(func) if plan.taken for name in plan.partial_blocks)
