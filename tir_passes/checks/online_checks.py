"""The contract check's rules for OnlineSoftmax's marks (online_contract.py), read by
verify_contract.check_contract: a shift block reduces along a loop and writes its two buffers;
each online sum reduces along its shift block's loop and restarts where the maximum was -inf
unless the shift proves its first element finite; once tiled, a streamed shift's loop is walked
in tiles."""

from __future__ import annotations

from tvm import tirx

from tir_passes.analyses.nest import REDUCE, block_sites, loop_kind, rescaled_old, written_buffers
from tir_passes.contracts.online_contract import online_rescale, online_shift
from tir_passes.contracts.tile_contract import SERIAL, TILE, ContractError


def online_problems(stmt) -> list[str]:
    try:
        sites = [
            (realize, loops, online_shift(realize.block), online_rescale(realize.block))
            for realize, loops in block_sites(stmt)
        ]
    except ContractError as err:
        return [str(err)]
    problems, shifts, first_finite = [], {}, {}
    for realize, loops, shift, _ in sites:
        if shift is None:
            continue
        name = realize.block.name_hint
        reduce = _reduce_loops(realize, loops)
        written = {buf.name for buf in written_buffers(realize.block)}
        if not reduce or not {shift.shift, shift.previous} <= written:
            problems.append(
                f"online shift block {name}: it must reduce along a loop and write {shift.shift} and {shift.previous}"
            )
            continue
        shifts[(shift.shift, shift.previous)] = reduce
        first_finite[(shift.shift, shift.previous)] = shift.first_finite
    for realize, loops, _, rescale in sites:
        if rescale is None:
            continue
        if shifts.get((rescale.shift, rescale.previous)) != _reduce_loops(realize, loops):
            problems.append(
                f"online sum {realize.block.name_hint}: it must reduce along the loop of the block that "
                f"keeps {rescale.shift} and {rescale.previous}, in its nest"
            )
        elif not first_finite[(rescale.shift, rescale.previous)] and not _restarts(realize.block):
            problems.append(
                f"online sum {realize.block.name_hint}: it does not restart where {rescale.previous} is -inf, "
                f"but the shift block does not prove its first element finite (first_finite)"
            )
    return problems


def _restarts(block) -> bool:
    """The online sum is written `Y = if_then_else(reset, 0, Y * F) + t` (OnlineSoftmax's restart)."""
    body = block.body
    if not isinstance(body, tirx.BufferStore) or not isinstance(body.value, tirx.Add):
        return True   # not the sum form: the other checks speak of it
    return any(
        (found := rescaled_old(old, body)) is not None and found[1] is not None
        for old in (body.value.a, body.value.b)
    )


def stream_problems(stmt, tiles) -> list[str]:
    """Once tiled, the row loop of a shift block OnlineSoftmax marked streamed is walked in tiles:
    a split tile axis (stepped by a serial loop), or serial where it carries a dependence."""
    problems = []
    for realize, loops in block_sites(stmt):
        shift = online_shift(realize.block)
        if shift is None or not shift.streamed:
            continue
        walked = [tiles.get(loop.loop_var.__chandle__()) for loop in loops if loop_kind(loop, realize) == REDUCE]
        if not any(
            t is not None and ((t.role == TILE and t.outer is not None) or (t.role == SERIAL and t.carries))
            for t in walked
        ):
            problems.append(
                f"online shift block {realize.block.name_hint} is marked streamed, but its row loop is "
                "not walked in tiles (a split tile axis) nor serial for a dependence"
            )
    return problems


def _reduce_loops(realize, loops) -> tuple[int, ...]:
    """The loops (by handle) that walk the block's reduction: one, or a split's two halves."""
    return tuple(loop.loop_var.__chandle__() for loop in loops if loop_kind(loop, realize) == REDUCE)
