"""Tiling's pins for compile(deterministic=True): the settings of a planned kernel no config may
change (analyses/determinism.py says which and why; the contract check verifies them).

Assumes: the plan is tiling_plan.plan_kernel's, with its tl.dots marked.
"""

from __future__ import annotations

from tir_passes.analyses import determinism
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.gemm_price import MMA_ROWS, MMA_WARPS
from tir_passes.contracts.tile_contract import PIN_DOT
from tir_passes.analyses.nest import unique_name
from tir_passes.infra.names import python_name
from tir_passes.passes import tile_sizes
from tir_passes.passes.tiling_types import KernelPlan, TileChoice, _key


def pin(stmt, plan: KernelPlan, blocked: set[int], limits: BackendLimits) -> None:
    """The settings no config may change (determinism.py says why): a kernel whose only
    order-sensitive sums are tl.dots (plan.free_dots) keeps their K tiles, and BLOCK_M and its
    warps at least the MMA floors; another kernel with a tl.dot every tile and its warps; another
    kernel its order-sensitive reductions' tiles, in fixed chunks (and the tiles beside one along a
    non-contiguous axis), and its warps."""
    plan.deterministic = True
    if plan.free_dots:
        _pin_dot_steps(plan)
        return
    if plan.dots:
        for choice in plan.tiles.values():
            plan.pins.setdefault(choice.axis, PIN_DOT)
        m, n, _ = next(iter(plan.dots.values()))
        plan.num_warps = tile_sizes.contraction_warps({"M": plan.tiles[m].size, "N": plan.tiles[n].size})
        plan.pin_warps = True
        plan.notes.append(f"deterministic: tl.dot tiles and {plan.num_warps} warps kept in every config")
        return
    scans = {block: (key, form.combiner, str(form.buffer.dtype)) for block, (key, form) in plan.scans.items()}

    def size(loop):
        return plan.tiles[_key(loop)].size if _key(loop) in plan.tiles else None

    def free(loop):  # may become a tile: it carries no dependence
        return _key(loop) not in blocked

    taken = {choice.axis for choice in plan.tiles.values()}
    requests = determinism.reduction_pins(stmt, size, scans, limits, free)
    for request in requests:
        choice = plan.tiles.get(request.loop)
        if request.whole:
            _pin_whole(plan, request, choice)
            continue
        if choice is None:  # a contiguous loop the plan left untiled: a tile of the pinned size
            axis = unique_name(python_name(request.name), taken)
            plan.tiles[request.loop] = TileChoice(axis, request.size, False)
            plan.pins[axis] = request.why
            plan.notes.append(f"deterministic: axis {axis} in tiles of {request.size} ({request.why})")
            continue
        shared = sum(c.axis == choice.axis for c in plan.tiles.values()) > 1
        axis = unique_name(choice.axis, taken) if shared else choice.axis
        plan.tiles[request.loop] = TileChoice(axis, request.size, False, choice.block if not shared else None)
        plan.pins[axis] = request.why
        plan.notes.append(f"deterministic: axis {axis} in tiles of {request.size} ({request.why})")
    if determinism.kernel_is_sensitive(stmt) or plan.pins:
        plan.num_warps = determinism.kernel_warps(requests, stmt)
        plan.pin_warps = True


def _pin_dot_steps(plan: KernelPlan) -> None:
    """Each tl.dot's K tile pinned (the order of an element's partial products); its rows' tile (the
    MMA's M: the output's rows, plan.mma_rows) and the warps floored where Triton keeps the MMA
    instruction family (MMA_ROWS, MMA_WARPS)."""
    for m, n, k in plan.dots.values():
        plan.pins.setdefault(plan.tiles[k].axis, PIN_DOT)
        plan.floors[plan.tiles[m if plan.mma_rows == "M" else n].axis] = MMA_ROWS
    plan.warps_floor = MMA_WARPS
    steps = ", ".join(f"{plan.tiles[k].axis}={plan.tiles[k].size}" for _, _, k in plan.dots.values())
    plan.notes.append(f"deterministic: tl.dot K tiles {steps} kept in every config; M tiles at least "
                      f"{MMA_ROWS} and {MMA_WARPS} warps or more (one MMA instruction family); "
                      "the N tiles, warps and stages free (they do not change an element's sum)")


def _pin_whole(plan: KernelPlan, request: determinism.PinRequest, choice: TileChoice) -> None:
    """A whole row, read once: its tile (and every loop's sharing its axis, the row's other sub-nests)
    at the size the program fixes."""
    for key, other in list(plan.tiles.items()):
        if other.axis == choice.axis:
            plan.tiles[key] = TileChoice(other.axis, request.size, other.whole or key == request.loop, other.block)
    plan.pins[choice.axis] = request.why
    plan.notes.append(f"deterministic: axis {choice.axis} whole, in one tile of {request.size} ({request.why})")
