"""Deterministic tiling (compile(deterministic=True)): what a kernel keeps in every config, and why.

The promise: every output element's bits are a fixed function of the inputs it reads, whatever
the sizes of the other axes (the batch, the rows, the values of symbolic sizes), the tuned config
and the GPU's scheduling. A reduction's bits depend on the order it adds in; exact combiners (max,
min, integer sums) do not. So, for every block whose result depends on that order (`order_sensitive`):

- its tile along each reduction axis is fixed by the program, never by a config or the other
  axes' sizes. A row of a static length that fits one tile (as without the flag) is one whole
  tile of `whole_tile` elements: its padded length, at least a full vector for every thread of
  the pinned warps (read once, as without the flag). A longer or symbolic row is walked in fixed
  chunks (`chunk_elements`) in order by one program (a serial loop), each folded with one
  tl.sum. No split-K, no atomics (the lowering emits none).
- tl.sum's tree over a tile is Triton's: elements a thread holds are added in order, then lanes
  by shuffles, then warps through shared memory (ReduceOpToLLVM). Which elements a thread holds is
  the blocked layout of the coalescing pass: `min(vector width from the pointers' alignment,
  tile elements / threads)` contiguous elements per thread along the most contiguous axis, then
  lanes and warps along it first (CoalesceUtils, BlockedEncodingAttr). With num_warps pinned and a
  tile of at least vector width x 32 x warps along the reduced, contiguous axis, the split of
  that axis is the same for any number of rows per program: rows only repeat the layout. Where
  the reduction runs along another axis, the other tile axes decide how threads split it, so
  they are pinned too (PIN_LAYOUT).
- a tl.dot's K tile is pinned to a size that does not depend on the extents: it decides how an
  element's partial products are added (K-tile by K-tile, each the MMA's k-steps in order). The
  M and N tiles, warps and stages only decide which elements a program, a warp and an MMA
  instruction compute, not how any one element is added, as long as Triton keeps one instruction
  family: so where a kernel's only order-sensitive sums are tl.dots (`only_dots_order_sensitive`),
  BLOCK_M and num_warps only have floors (wgmma on sm_90 needs 64 rows a warpgroup of 4 warps;
  below, mma.sync) and the M/N tiles follow the extents as without the flag. Where other sums
  share the kernel (attention's softmax over the scores tile), the MMA's accumulator layout is
  the layout those sums reduce in, so every tile and the warps stay pinned.
- OnlineSoftmax and the tile sizes stop reading the GPU's multiprocessor count.

What the pins cannot fix is named in docs/determinism.md (the vector width follows the inputs'
alignment; Triton's layout passes are its own).
Imports only the IR helpers: Tiling applies the pins, the contract check verifies them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir, tirx

from tir_passes.analyses.nest import (REDUCE, SPATIAL, block_accesses, block_sites, bound_iter_var, is_reduction_block,
                                     is_self_load, loop_kind, loops_under, next_power_of_two, uses_var)
from tir_passes.analyses.row_registers import held_row_values, row_warps
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.tile_contract import PIN_LAYOUT, PIN_REDUCTION, PIN_SCAN
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import static_int
from tir_passes.infra.reduction_kinds import ORDER_SENSITIVE

PINNED_WARPS = 4          # a deterministic kernel without a tl.dot that walks chunks runs 4 warps
MAX_WHOLE_ROW_WARPS = 16  # whole rows: one warp per 32 vectors of the row, 4 to 16, 16 only past the register budget
VECTOR_BITS = 128         # the widest vector load a thread issues (LDG.128)
THREADS_PER_WARP = 32
PINNED_SPATIAL = 16       # the other tile axes of a reduction along a non-contiguous axis
SCAN_COMBINERS = ORDER_SENSITIVE   # float scans whose tree changes the result


def chunk_elements(dtype_bytes: int, limits: BackendLimits, warps: int = PINNED_WARPS) -> int:
    """The tile along a pinned reduction axis: every lane of every warp holds a full vector of it,
    so the layout's split of the axis does not depend on the tile's other sizes."""
    return min(_per_thread(dtype_bytes) * THREADS_PER_WARP * warps, limits.max_row_tile)


def _per_thread(dtype_bytes: int) -> int:
    return max(1, VECTOR_BITS // (8 * dtype_bytes))


def whole_row_warps(extent: int, dtype_bytes: int, held: int = 1) -> int:
    """The warps of a kernel reducing a whole row of `extent` elements and holding `held` row values:
    the row's vectors over 32 lanes, between 4 and 8 warps, 16 only where 8 would pass the register
    budget (row_registers.row_warps, the rule of the plan without the flag; a function of the program
    and the row, never of the rows or the config)."""
    lanes = next_power_of_two(extent) // (_per_thread(dtype_bytes) * THREADS_PER_WARP)
    return row_warps(next_power_of_two(extent), held, min(MAX_WHOLE_ROW_WARPS, max(PINNED_WARPS, lanes)))


def whole_tile(extent: int, dtype_bytes: int, warps: int, limits: BackendLimits) -> int:
    """The tile of a whole row: its padded length, and at least a full vector for every thread, so
    the rows per program do not change how threads split it (a 64-element row gets 512 lanes)."""
    return max(next_power_of_two(extent), chunk_elements(dtype_bytes, limits, warps))


def fits_whole(extent, limits: BackendLimits) -> bool:
    """A reduction of this extent is one whole tile (a static length within the widest row tile,
    as Tiling keeps it without the flag); else fixed chunks."""
    static = static_int(extent)
    return static is not None and static <= limits.max_row_tile


def _is_float(dtype) -> bool:
    return str(dtype).startswith(("float", "bfloat"))


def _exact_update(store: tirx.BufferStore) -> bool:
    """`X = max(X, e)` or `X = min(X, e)`: the same bits in any order."""
    value = store.value
    return isinstance(value, (tirx.Max, tirx.Min)) and (is_self_load(value.a, store) or is_self_load(value.b, store))


def order_sensitive(block: s_tir.SBlock) -> bool:
    """A reduction whose float result depends on the order it folds its elements in."""
    if not is_reduction_block(block):
        return False
    stores = [a.node for a in block_accesses(block) if a.is_store]
    return any(_is_float(s.buffer.dtype) and not _exact_update(s) for s in stores)


def narrowest_load(block: s_tir.SBlock) -> int:
    """The bytes of the narrowest element the block loads (its vectors are the widest)."""
    loads = [element_bytes(a.buffer.dtype) for a in block_accesses(block) if not a.is_store]
    return min(loads) if loads else 4


def reduces_along_contiguous(realize: s_tir.SBlockRealize, loops, tiled) -> bool:
    """Every load whose last (contiguous) index a tile loop drives is driven there by a
    reduction loop: threads then lie along the reduced axis first. Only loads that vary along the
    reduction count (a per-row value broadcast along it, a running maximum, does not walk it), and
    the accumulator's own reads are registers, not loads."""
    accesses = block_accesses(realize.block)
    written = {a.name for a in accesses if a.is_store}
    reduce_vars = [iv.var for iv in realize.block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    for access in accesses:
        if access.is_store or not access.indices or access.name in written:
            continue
        if not any(uses_var(index, var) for index in access.indices for var in reduce_vars):
            continue
        last = access.indices[-1]
        drivers = [loop for loop in loops if tiled(loop) and _drives(realize, loop, last)]
        if any(loop_kind(loop, realize) != REDUCE for loop in drivers):
            return False
    return True


def reduces_serially(realize: s_tir.SBlockRealize, loops, tiled) -> bool:
    """The block's reduction loops are all serial loops, none a tile (a row walk's partial sums,
    each element adding its rows in the walk's order): no tl.sum splits it over threads, so its
    other tiles decide no order and need no layout pin (pinned, a column tile narrower than the
    row would be walked in chunks that the carried accumulator does not hold)."""
    reductions = [loop for loop in loops if loop_kind(loop, realize) == REDUCE]
    return bool(reductions) and not any(tiled(loop) for loop in reductions)


def _contiguous_loops(realize, loops) -> list[tirx.For]:
    """Loops that drive the last index of some load of the block."""
    lasts = [a.indices[-1] for a in block_accesses(realize.block) if not a.is_store and a.indices]
    return [loop for loop in loops if any(_drives(realize, loop, last) for last in lasts)]


def _drives(realize, loop: tirx.For, index) -> bool:
    iv = bound_iter_var(realize, loop.loop_var)
    return iv is not None and uses_var(index, iv.var)


@dataclass(frozen=True)
class PinRequest:
    """A tile the plan must keep at `size` (not whole) in every config, with the pin's reason."""

    loop: int      # the loop's handle (before splitting)
    size: int
    why: str
    name: str = ""  # the loop's name (an axis for a loop the plan left untiled)
    whole: bool = False  # the loop is one tile (not split): a whole row


def reduction_pins(stmt, tiled_size, scan_blocks: dict[str, tuple[int, str, str]], limits: BackendLimits,
                   free=lambda loop: True) -> list[PinRequest]:
    """The tiles of a kernel without a tl.dot that a deterministic kernel pins: chunked reduction
    axes of order-sensitive blocks (and their other tile axes where the reduction is not along the
    contiguous axis), and float sum or product scans. `tiled_size(loop)` is the plan's size of a
    tile loop (None: not a tile); `free(loop)`: it may be a tile (it carries no dependence). A
    contiguous spatial loop beside a non-contiguous reduction becomes a tile even where the plan
    left it whole-less (a single column): the tile's shape, not the extent, decides the tree. A
    kernel with a tl.dot pins every tile at the plan's sizes, which then do not read the extents
    of the dot's axes (tiling_plan)."""
    requests: dict[int, PinRequest] = {}
    for realize, enclosing in block_sites(stmt):
        block = realize.block
        name = block.name_hint
        if name in scan_blocks:
            loop, combiner, dtype = scan_blocks[name]
            if combiner in SCAN_COMBINERS and _is_float(dtype):
                requests.setdefault(loop, PinRequest(loop, chunk_elements(narrowest_load(block), limits), PIN_SCAN))
            continue
        if not order_sensitive(block):
            continue
        loops = list(enclosing)
        tiled = [loop for loop in loops if tiled_size(loop) is not None]
        chunk = chunk_elements(narrowest_load(block), limits)
        contiguous = reduces_along_contiguous(realize, loops, lambda loop: tiled_size(loop) is not None or free(loop))
        for loop in tiled:
            if loop_kind(loop, realize) == REDUCE:
                key = loop.loop_var.__chandle__()
                whole = contiguous and fits_whole(loop.extent, limits)
                requests[key] = PinRequest(key, static_int(loop.extent) if whole else chunk, PIN_REDUCTION,
                                           whole=whole)
        if not contiguous and not reduces_serially(realize, loops, lambda loop: tiled_size(loop) is not None):
            contiguous = _contiguous_loops(realize, loops)
            for loop in loops:
                key = loop.loop_var.__chandle__()
                wanted = tiled_size(loop) is not None or (free(loop) and any(loop.same_as(c) for c in contiguous))
                if wanted and loop_kind(loop, realize) == SPATIAL and key not in requests:
                    requests[key] = PinRequest(key, PINNED_SPATIAL, PIN_LAYOUT, loop.loop_var.name)
    return _sized([requests[key] for key in sorted(requests, key=lambda k: _order(stmt, k))], stmt, limits)


def _sized(requests: list[PinRequest], stmt, limits: BackendLimits) -> list[PinRequest]:
    """Whole-row requests carry their extent until the kernel's warps are known: then their tile."""
    warps = kernel_warps(requests, stmt)
    loads = _pinned_loads(stmt)
    return [PinRequest(r.loop, whole_tile(r.size, loads[r.loop], warps, limits), r.why, r.name, True) if r.whole else r
            for r in requests]


def _pinned_loads(stmt) -> dict[int, int]:
    """Per reduction loop, the narrowest element the order-sensitive blocks under it load."""
    loads: dict[int, int] = {}
    for realize, enclosing in block_sites(stmt):
        if order_sensitive(realize.block):
            for loop in enclosing:
                key = loop.loop_var.__chandle__()
                loads[key] = min(loads.get(key, 16), narrowest_load(realize.block))
    return loads


def kernel_warps(requests: list[PinRequest], stmt) -> int:
    """num_warps of a kernel with these pins: 4 when any reduction walks chunks (their size assumes
    4), else the fewest the whole rows ask for (whole_row_warps)."""
    if not requests or any(not r.whole for r in requests):
        return PINNED_WARPS
    loads = _pinned_loads(stmt)
    held = held_row_values(block_sites(stmt))
    return min(whole_row_warps(r.size, loads[r.loop], held) for r in requests)


def _order(stmt, key: int) -> int:
    """Loop order (for a deterministic dump)."""
    return next(i for i, loop in enumerate(loops_under(stmt)) if loop.loop_var.__chandle__() == key)


def kernel_is_sensitive(stmt) -> bool:
    """The kernel folds something whose bits depend on the order (num_warps is then pinned)."""
    return any(order_sensitive(r.block) for r, _ in block_sites(stmt))


def only_dots_order_sensitive(stmt, dots, scans) -> bool:
    """Every block of the kernel whose bits depend on its order is a tl.dot (`dots`: block names,
    the plan's marked dots) and no scan runs in it (`scans`): then no tl.sum reads a layout the
    dots' tiles decide, and their M/N tiles and warps are free above the MMA floors."""
    return not scans and bool(dots) and \
        all(r.block.name_hint in dots for r, _ in block_sites(stmt) if order_sensitive(r.block))
