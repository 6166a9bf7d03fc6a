"""A hand-written warp-specialized Hopper attention forward in Gluon, the probe of
benchmarks/gluon_attention_gpu.py: whether FlashAttention-3's schedule, written in the language the
Gluon backend emits, reaches SDPA's default (cuDNN) before the backend is taught to emit it.

O = softmax(Q·Kᵀ · scale [causal mask]) · V per (batch, head), Q, K, V, O contiguous [B, H, S, D] in
fp16 or bf16, viewed as [B·H·S, D] by the TMA descriptors.

A program takes BM query rows of one (batch, head). Three partitions:
- a producer warp: Q's two halves once, then each key tile's K and V through a ring of STAGES
  stages (TMA, mbarriers), a stage refilled once both consumers have released it;
- two consumer warpgroups, each BM/2 of the rows: S = Q·Kᵀ by wgmma from shared memory, the online
  softmax in registers (exp2, the scale folded with log2 e), O += P·V by wgmma with P from registers.

`OVERLAP` picks the consumer's order within a key tile:
- False (`_consumer_in_order`): S_j, wait, softmax, P_j·V_j, wait. The two warpgroups overlap each
  other's softmax with their dots only as the warp schedulers interleave them.
- True (`_consumer_overlapped`, FA3's intra-warpgroup overlap): S_j and P_{j-1}·V_{j-1} are issued
  together, the softmax of S_j runs while P_{j-1}·V_{j-1} is in flight, and O is rescaled after it.
  With `PINGPONG` (FA3's inter-warpgroup overlap) the consumers issue those dots in turns, passed
  through two mbarriers, so one warpgroup's softmax runs under the other's dots.

Causal programs walk the key tiles up to their last row, the longest walks launched first; the
tiles crossing the diagonal are masked, the others not. S must divide by BM and BN (the descriptors
view all heads as one tensor). Written for the probe, not emitted: what it measures decides what the backend builds.
"""

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

LOG2_E = 1.4426950408889634
WARPGROUPS = 3     # two consumers and the producer's warp, which takes a warpgroup's registers


def maxnreg(consumer_registers: int, producer_registers: int) -> int:
    """The launch's registers a thread: every warpgroup starts at it and setmaxnreg redistributes them,
    so it is the partitions' mean (the default, 256, would ask an SM for more than its 65536)."""
    return (2 * consumer_registers + producer_registers) // WARPGROUPS // 8 * 8


@gluon.jit
def _key_tiles(block, seq, BM: gl.constexpr, BN: gl.constexpr, CAUSAL: gl.constexpr):
    """The key tiles query block `block` reads: all of them, or (causal) up to its last row."""
    if CAUSAL:
        tiles = gl.cdiv(gl.minimum((block + 1) * BM, seq), BN)
    else:
        tiles = gl.cdiv(seq, BN)
    return tiles


@gluon.jit
def _query_block(program, programs, CAUSAL: gl.constexpr):
    """Program `program`'s block of query rows: causal blocks last first, the longest walks launched first."""
    block = program
    if CAUSAL:
        block = programs - 1 - program
    return block


@gluon.jit
def _take_turn(turns, CONSUMER: gl.constexpr, step, PINGPONG: gl.constexpr):
    """FA3's ping-pong: wait until the other consumer has issued its dots of the step before (consumer
    0 goes first), so one warpgroup's dots run while the other's softmax does."""
    if PINGPONG:
        mbarrier.wait(turns.index(CONSUMER), (step & 1) ^ (1 - CONSUMER))


@gluon.jit
def _pass_turn(turns, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """This consumer's dots are issued: the other consumer's turn."""
    if PINGPONG:
        mbarrier.arrive(turns.index(1 - CONSUMER), count=1)


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty, seq,
              BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """Q's halves, then K and V of each key tile into stage j % STAGES once both consumers freed it."""
    block = _query_block(gl.program_id(1), gl.num_programs(1), CAUSAL)
    first_row = gl.program_id(0) * seq
    mbarrier.expect(q_ready, 2 * q_desc.block_type.nbytes)
    _tma_load(q_desc, [first_row + block * BM, 0], q_ready, q_halves.index(0))
    _tma_load(q_desc, [first_row + block * BM + BM // 2, 0], q_ready, q_halves.index(1))
    for j in range(_key_tiles(block, seq, BM, BN, CAUSAL)):
        slot = j % STAGES
        free = ((j // STAGES) & 1) ^ 1     # a fresh barrier's previous phase counts as complete
        mbarrier.wait(k_empty.index(slot), free)
        mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
        _tma_load(k_desc, [first_row + j * BN, 0], k_ready.index(slot), k_stages.index(slot))
        mbarrier.wait(v_empty.index(slot), free)
        mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
        _tma_load(v_desc, [first_row + j * BN, 0], v_ready.index(slot), v_stages.index(slot))


@gluon.jit
def _online_step(s, m_i, l_i, qk_scale, rows, j, BN: gl.constexpr, S_LAYOUT: gl.constexpr, masked):
    """One key tile's scores into the running max and sum: P (unnormalized, at the new max), the
    factor the output so far is rescaled by, the new max and sum. `masked`: the tile crosses the
    causal diagonal, its keys past a row's own are left out."""
    s = s * qk_scale
    if masked:
        keys = j * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, S_LAYOUT))
        s = gl.where(keys[None, :] <= rows[:, None], s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1))
    p = gl.exp2(s - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    return p, alpha, m_new, l_i * alpha + gl.sum(p, 1)


@gluon.jit
def _rows_of(x, LAYOUT: gl.constexpr):
    """A per-row vector in the row slice of LAYOUT, as a column to broadcast along it."""
    return gl.convert_layout(x, gl.SliceLayout(1, LAYOUT))[:, None]


@gluon.jit
def _store_output(o_ptr, acc, l_i, first_row, HALF: gl.constexpr, HEAD: gl.constexpr, O_LAYOUT: gl.constexpr):
    """O = acc / l for this consumer's rows, through pointers."""
    out = acc / _rows_of(l_i, O_LAYOUT)
    rows = first_row + gl.arange(0, HALF, layout=gl.SliceLayout(1, O_LAYOUT))
    columns = gl.arange(0, HEAD, layout=gl.SliceLayout(0, O_LAYOUT))
    gl.store(o_ptr + rows[:, None] * HEAD + columns[None, :], out.to(o_ptr.dtype.element_ty))


@gluon.constexpr_function
def _accumulator_layout(columns):
    """A 4-warp warpgroup's wgmma accumulator of `columns` columns (one instruction spans them all)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, columns, 16])


@gluon.jit
def _consumer_state(block, CONSUMER: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, HEAD: gl.constexpr,
                    S_LAYOUT: gl.constexpr, O_LAYOUT: gl.constexpr):
    """A consumer's rows (their query indices), running max and sum, zero output, and the zero tile
    its score dots start from."""
    HALF: gl.constexpr = BM // 2
    rows = block * BM + CONSUMER * HALF + gl.arange(0, HALF, layout=gl.SliceLayout(1, S_LAYOUT))
    m_i = gl.full([HALF], float("-inf"), gl.float32, gl.SliceLayout(1, S_LAYOUT))
    l_i = gl.zeros([HALF], gl.float32, gl.SliceLayout(1, S_LAYOUT))
    return (rows, m_i, l_i, gl.zeros([HALF, HEAD], gl.float32, O_LAYOUT),
            gl.zeros([HALF, BN], gl.float32, S_LAYOUT))


@gluon.jit
def _consumer_in_order(CONSUMER: gl.constexpr, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready,
                       k_empty, v_empty, seq, qk_scale, BM: gl.constexpr, BN: gl.constexpr, HEAD: gl.constexpr,
                       STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """Rows CONSUMER·BM/2 … of the block: per key tile S, softmax, P·V, each dot waited on at once."""
    HALF: gl.constexpr = BM // 2
    S_LAYOUT: gl.constexpr = _accumulator_layout(BN)
    O_LAYOUT: gl.constexpr = _accumulator_layout(HEAD)
    P_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=O_LAYOUT, k_width=2)
    block = _query_block(gl.program_id(1), gl.num_programs(1), CAUSAL)
    rows, m_i, l_i, acc, no_scores = _consumer_state(block, CONSUMER, BM, BN, HEAD, S_LAYOUT, O_LAYOUT)
    q = q_halves.index(CONSUMER)
    mbarrier.wait(q_ready, 0)
    for j in range(_key_tiles(block, seq, BM, BN, CAUSAL)):
        slot = j % STAGES
        phase = (j // STAGES) & 1
        k = k_stages.index(slot)
        v = v_stages.index(slot)
        mbarrier.wait(k_ready.index(slot), phase)
        s = warpgroup_mma(q, k.permute((1, 0)), no_scores, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(0, deps=(s, q, k))[0]
        mbarrier.arrive(k_empty.index(slot), count=1)
        p, alpha, m_i, l_i = _online_step(s, m_i, l_i, qk_scale, rows, j, BN, S_LAYOUT,
                                          CAUSAL and (j + 1) * BN > block * BM)
        acc = acc * _rows_of(alpha, O_LAYOUT)
        p_operand = gl.convert_layout(p.to(v_stages.dtype), P_LAYOUT)
        mbarrier.wait(v_ready.index(slot), phase)
        acc = warpgroup_mma(p_operand, v, acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc, v))[0]
        mbarrier.arrive(v_empty.index(slot), count=1)
    _store_output(o_ptr, acc, l_i, gl.program_id(0) * seq + block * BM + CONSUMER * HALF, HALF, HEAD, O_LAYOUT)


@gluon.jit
def _consumer_overlapped(CONSUMER: gl.constexpr, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready,
                         k_empty, v_empty, turns, seq, qk_scale, BM: gl.constexpr, BN: gl.constexpr,
                         HEAD: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr):
    """As _consumer_in_order, but S_j is issued with P_{j-1}·V_{j-1} and its softmax runs while that
    dot is in flight; O is rescaled once it lands. With PINGPONG the two consumers issue their dots in
    turns (`_take_turn`)."""
    HALF: gl.constexpr = BM // 2
    S_LAYOUT: gl.constexpr = _accumulator_layout(BN)
    O_LAYOUT: gl.constexpr = _accumulator_layout(HEAD)
    P_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=O_LAYOUT, k_width=2)
    block = _query_block(gl.program_id(1), gl.num_programs(1), CAUSAL)
    rows, m_i, l_i, acc, no_scores = _consumer_state(block, CONSUMER, BM, BN, HEAD, S_LAYOUT, O_LAYOUT)
    q = q_halves.index(CONSUMER)
    tiles = _key_tiles(block, seq, BM, BN, CAUSAL)
    mbarrier.wait(q_ready, 0)
    mbarrier.wait(k_ready.index(0), 0)
    _take_turn(turns, CONSUMER, 0, PINGPONG)
    s = warpgroup_mma(q, k_stages.index(0).permute((1, 0)), no_scores, use_acc=False, is_async=True)
    _pass_turn(turns, CONSUMER, PINGPONG)
    s = warpgroup_mma_wait(0, deps=(s, q, k_stages.index(0)))[0]
    mbarrier.arrive(k_empty.index(0), count=1)
    p, alpha, m_i, l_i = _online_step(s, m_i, l_i, qk_scale, rows, 0, BN, S_LAYOUT, CAUSAL and BN > block * BM)
    p_operand = gl.convert_layout(p.to(v_stages.dtype), P_LAYOUT)
    for j in range(1, tiles):
        slot = j % STAGES
        last = (j - 1) % STAGES
        k = k_stages.index(slot)
        v = v_stages.index(last)
        mbarrier.wait(k_ready.index(slot), (j // STAGES) & 1)
        mbarrier.wait(v_ready.index(last), ((j - 1) // STAGES) & 1)
        _take_turn(turns, CONSUMER, j, PINGPONG)
        s = warpgroup_mma(q, k.permute((1, 0)), no_scores, use_acc=False, is_async=True)
        acc = warpgroup_mma(p_operand, v, acc, is_async=True)
        _pass_turn(turns, CONSUMER, PINGPONG)
        s = warpgroup_mma_wait(1, deps=(s, k))[0]          # S_j landed; P_{j-1}·V_{j-1} may still run
        mbarrier.arrive(k_empty.index(slot), count=1)
        p, alpha, m_i, l_i = _online_step(s, m_i, l_i, qk_scale, rows, j, BN, S_LAYOUT,
                                          CAUSAL and (j + 1) * BN > block * BM)
        acc = warpgroup_mma_wait(0, deps=(acc, v, p_operand))[0]
        mbarrier.arrive(v_empty.index(last), count=1)
        acc = acc * _rows_of(alpha, O_LAYOUT)
        p_operand = gl.convert_layout(p.to(v_stages.dtype), P_LAYOUT)
    last = (tiles - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((tiles - 1) // STAGES) & 1)
    _take_turn(turns, CONSUMER, tiles, PINGPONG)
    acc = warpgroup_mma(p_operand, v_stages.index(last), acc, is_async=True)
    _pass_turn(turns, CONSUMER, PINGPONG)
    acc = warpgroup_mma_wait(0, deps=(acc, v_stages.index(last)))[0]
    mbarrier.arrive(v_empty.index(last), count=1)
    _store_output(o_ptr, acc, l_i, gl.program_id(0) * seq + block * BM + CONSUMER * HALF, HALF, HEAD, O_LAYOUT)


@gluon.jit
def attention_forward(q_desc, k_desc, v_desc, o_ptr, seq, qk_scale, BM: gl.constexpr, BN: gl.constexpr,
                      HEAD: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, OVERLAP: gl.constexpr,
                      PINGPONG: gl.constexpr, CONSUMER_REGISTERS: gl.constexpr, PRODUCER_REGISTERS: gl.constexpr):
    """Grid (B·H, S / BM), num_warps=4 (the first consumer; the second and the producer are workers),
    maxnreg from `maxnreg`. qk_scale is the softmax scale times log2 e."""
    q_halves = gl.allocate_shared_memory(q_desc.dtype, [2, BM // 2, HEAD], q_desc.layout)
    k_stages = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BN, HEAD], k_desc.layout)
    v_stages = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BN, HEAD], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=1)
    mbarrier.init(turns.index(0), count=1)
    mbarrier.init(turns.index(1), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)     # both consumers read every tile
        mbarrier.init(v_empty.index(i), count=2)
    producer_args = (q_desc, k_desc, v_desc, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty,
                     seq, BM, BN, STAGES, CAUSAL)
    if OVERLAP:
        gl.warp_specialize([
            (_consumer_overlapped, (0, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty,
                                    turns, seq, qk_scale, BM, BN, HEAD, STAGES, CAUSAL, PINGPONG)),
            (_consumer_overlapped, (1, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty,
                                    turns, seq, qk_scale, BM, BN, HEAD, STAGES, CAUSAL, PINGPONG)),
            (_producer, producer_args),
        ], [4, 1], [CONSUMER_REGISTERS, PRODUCER_REGISTERS])
    else:
        gl.warp_specialize([
            (_consumer_in_order, (0, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty,
                                  seq, qk_scale, BM, BN, HEAD, STAGES, CAUSAL)),
            (_consumer_in_order, (1, o_ptr, q_halves, k_stages, v_stages, q_ready, k_ready, v_ready, k_empty, v_empty,
                                  seq, qk_scale, BM, BN, HEAD, STAGES, CAUSAL)),
            (_producer, producer_args),
        ], [4, 1], [CONSUMER_REGISTERS, PRODUCER_REGISTERS])
    mbarrier.invalidate(q_ready)
    mbarrier.invalidate(turns.index(0))
    mbarrier.invalidate(turns.index(1))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(k_empty.index(i))
        mbarrier.invalidate(v_empty.index(i))


def grid(seq: int, batch_heads: int, bm: int) -> tuple[int, int]:
    """One program per BM query rows of each (batch, head), the heads along the first axis so that
    programs launch block row by block row (all heads' longest causal walks first)."""
    return (batch_heads, triton.cdiv(seq, bm))
