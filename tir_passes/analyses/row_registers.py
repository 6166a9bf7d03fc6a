"""The row values a whole-row kernel holds in registers, and the warps that keep them within budget.

A program that reduces whole rows (softmax, the norms) loads each row once and keeps in registers
every row-long value that a later block of the kernel reads again: the row itself across its
reductions (LayerNorm's X, read by the mean, the variance and the normalize), an intermediate one
block writes and another reads, a row-long accumulator carried by a loop (a backward kernel's
partial weight gradient). A value read by one block only (LayerNorm's gamma and beta, read in the
normalize) is loaded where it is used and dies there. Each held value costs a thread one register
per element it holds (an fp32 word; 16-bit values convert on use) beside about ADDRESSING_REGISTERS
of pointers, offsets and the reduction's partials.

The warps follow from that: one warp per 512 elements of the program, 4 to 8 (as before); past 8,
16 warps only where 8 would hold more than ROW_REGISTER_BUDGET registers a thread. Why not 16 by
default (what a row of 8192 took before): at 16 warps (512 threads) a multiprocessor keeps four
programs only at 32 registers or fewer (65536 / 2048 threads), so a kernel that holds anything beside
its row falls to three; on the H200 (2026-12-02, benchmarks/results/2026-12-02-h200-elementwise-probe.json,
rows of 8192 fp16) LayerNorm at 40 registers ran 139.5 µs at 16 warps against 134.2 at 8, its moments
form 138.4 against 134.9, and the same LayerNorm compiled without FMA contraction (32 registers: the
deterministic kernel) 133.2 at 16. At 8 warps the row costs 32 registers a thread and four programs fit
at 64 (1024 threads of the 2048: half the multiprocessor's warps), while a kernel that holds several
row values (a norm's backward: X, dY, the weight and the weight-gradient partials) would pass that
and keeps 16 (at 8 they compile to 191 and 254 registers for sm_90, one program a multiprocessor).
Softmax and RMSNorm ran within 1.3% either way (132.6 / 134.3 and 133.9 / 134.4 µs at 16 / 8 warps).

Assumes: `sites` are a kernel's blocks in program order with the loops around each, the innermost
of which walks the row (a fused row nest's sub-nests, or a whole kernel's block_sites). The register
estimate only ranks 8 against 16 warps; ptxas decides. Imports only the IR helpers: Tiling
(tile_sizes.fused_warps) and the deterministic pins (determinism.whole_row_warps) both take their
warps from `row_warps`, so a row that fills its program gets the same warps with the flag and without.
"""

from __future__ import annotations

from tvm import s_tir, tirx

from tir_passes.analyses.nest import block_accesses, bound_iter_var, is_reduction_block, uses_var

ELEMENTS_PER_WARP = 512      # of a program's tile: 16 a thread, as the rule before this one
MIN_WARPS = 4
NARROW_MAX_WARPS = 8         # the most warps taken without the register test
MAX_WARPS = 16
ADDRESSING_REGISTERS = 16    # a thread's pointers, offsets, program id and reduction partials
ROW_REGISTER_BUDGET = 64     # 65536 registers / 1024 threads: half the SM's 64 warps stay resident
THREADS_PER_WARP = 32


def held_row_values(sites) -> int:
    """Row-long values the kernel keeps in registers: buffers accessed along the row (the last index
    driven by a block's innermost loop) by more than one block, and row-long stores of a reduction
    block (an accumulator carried by a loop around the row)."""
    blocks: dict[str, set[str]] = {}
    carried: set[str] = set()
    for realize, loops in sites:
        if not loops:
            continue
        block = realize.block
        for access in _row_accesses(realize, loops[-1]):
            blocks.setdefault(access.name, set()).add(block.name_hint)
            if access.is_store and is_reduction_block(block):
                carried.add(access.name)
    return sum(1 for name in sorted(blocks) if len(blocks[name]) > 1 or name in carried)


def _row_accesses(realize: s_tir.SBlockRealize, row_loop: tirx.For) -> list:
    iv = bound_iter_var(realize, row_loop.loop_var)
    if iv is None:
        return []
    return [a for a in block_accesses(realize.block) if a.indices and uses_var(a.indices[-1], iv.var)]


def row_registers(elements: int, warps: int, held: int) -> int:
    """About the registers a thread needs to hold `held` row values of a program of `elements`."""
    return ADDRESSING_REGISTERS + max(1, held) * -(-elements // (warps * THREADS_PER_WARP))


def row_warps(elements: int, held: int, warps: int | None = None) -> int:
    """num_warps of a program holding `elements` of whole rows with `held` row values: `warps` (else
    one per ELEMENTS_PER_WARP) between MIN_WARPS and NARROW_MAX_WARPS, doubled up to MAX_WARPS while
    the held values pass ROW_REGISTER_BUDGET registers a thread."""
    wanted = max(1, elements // ELEMENTS_PER_WARP) if warps is None else warps
    chosen = MIN_WARPS
    while chosen < NARROW_MAX_WARPS and chosen * 2 <= wanted:
        chosen *= 2
    while chosen < min(MAX_WARPS, wanted) and row_registers(elements, chosen, held) > ROW_REGISTER_BUDGET:
        chosen *= 2
    return chosen
