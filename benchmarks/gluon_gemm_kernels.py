"""Two hand-written Hopper GEMMs in Gluon, the probe of benchmarks/gluon_gemm_gpu.py: what the Gluon
backend would emit for a contraction if it took the schedules cuBLAS runs, timed before building it.

C[M, N] = A[M, K] · B, with B stored K×N (`B_NK` False) or N×K (`B_NK`: a linear's weight), fp16 or
bf16 operands, an fp32 accumulator, C in any float type.

- `gemm_persistent`: one program an SM walks its output tiles (GROUP_M order) as one flat sequence
  of K steps through a ring of STAGES shared-memory stages, filled by TMA and waited on with
  mbarriers; one asynchronous wgmma in flight; the next tile's first loads are in flight while this
  one's epilogue writes its accumulator in four column slices through two shared buffers and TMA
  stores that are waited on only when their buffer comes round again.
- `gemm_pingpong`: warp-specialized. One producer warp issues the TMA loads; two consumer
  warpgroups take alternate output tiles, each through its own ring of STAGES stages, so one
  consumer's epilogue (pointer stores from the accumulator's registers) runs while the other's
  wgmmas do. A ring per consumer keeps each mbarrier waited on by one consumer, never more than one
  phase ahead of it (one ring shared in K-step order would let the second consumer, waiting for its
  first tile, pass a phase the first consumer's steps completed).

Triton 3.6 (the GPU image) names TMA's copies async_copy_global_to_shared / async_copy_shared_to_global,
3.9 async_load / async_store; both compile these kernels (`gluon_gemm_gpu.py aot`).
"""

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def _tile_coordinates(tile, num_m, num_n, GROUP_M: gl.constexpr):
    """Output tile `tile` of a GROUP_M-row swizzled order: (its row tile, its column tile)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@gluon.jit
def _program_work(M, N, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr):
    """Row and column tiles, K steps a tile, and how many tiles this program walks (tiles
    program_id, program_id + programs, ...)."""
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    tiles = gl.cdiv(num_m * num_n - gl.program_id(0), gl.num_programs(0))
    return num_m, num_n, gl.cdiv(K, BK), tiles


@gluon.jit
def _load_step(a_desc, b_desc, a_buffer, b_buffer, ready, row, column, k, B_NK: gl.constexpr, pred=True):
    """One K step's A and B tiles into a stage, `ready` told the bytes to expect."""
    mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    _tma_load(a_desc, [row, k], ready, a_buffer, pred)
    if B_NK:
        _tma_load(b_desc, [column, k], ready, b_buffer, pred)
    else:
        _tma_load(b_desc, [k, column], ready, b_buffer, pred)


@gluon.jit
def _b_operand(b_buffer, B_NK: gl.constexpr):
    """The stage's B tile as the K×N operand wgmma reads (an N×K tile seen transposed)."""
    if B_NK:
        operand = b_buffer.permute((1, 0))
    else:
        operand = b_buffer
    return operand


@gluon.jit
def _halves(x, BM: gl.constexpr, HALF: gl.constexpr):
    """A BM × 2·HALF register tile as its left and right column halves."""
    return x.reshape([BM, 2, HALF]).permute(0, 2, 1).split()


@gluon.jit
def _store_slice(c_desc, c_buffer, value, row, column):
    """A column slice of the accumulator through `c_buffer` and a TMA store, once the store that
    last used this buffer has read it (at most one other store stays in flight)."""
    tma.store_wait(1)
    c_buffer.store(value.to(c_desc.dtype))
    fence_async_shared()
    _tma_store(c_desc, [row, column], c_buffer)


@gluon.jit
def _persistent_step_load(step, steps, k_steps, num_m, num_n, a_desc, b_desc, a_stages, b_stages, ready,
                          BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                          GROUP_M: gl.constexpr, B_NK: gl.constexpr):
    """The loads of the program's K step `step` (of `steps`, over all its tiles), predicated off past the end."""
    tile = gl.program_id(0) + (step // k_steps) * gl.num_programs(0)
    pid_m, pid_n = _tile_coordinates(tile, num_m, num_n, GROUP_M)
    slot = step % STAGES
    _load_step(a_desc, b_desc, a_stages.index(slot), b_stages.index(slot), ready.index(slot), pid_m * BM,
               pid_n * BN, (step % k_steps) * BK, B_NK, step < steps)


@gluon.jit
def gemm_persistent(a_desc, b_desc, c_desc, M, N, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, B_NK: gl.constexpr, num_warps: gl.constexpr):
    """C through `c_desc` (blocks of BM × BN/4): one program an SM, its tiles' K steps one sequence."""
    gl.static_assert(STAGES >= 2, "a stage is refilled only after the wgmma before the current one")
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    SLICE: gl.constexpr = BN // 4   # the epilogue below stores four column slices
    a_stages = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_stages = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_buffers = gl.allocate_shared_memory(c_desc.dtype, [2, BM, SLICE], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)

    num_m, num_n, k_steps, tiles = _program_work(M, N, K, BM, BN, BK)
    steps = tiles * k_steps
    for step in gl.static_range(STAGES - 1):
        _persistent_step_load(step, steps, k_steps, num_m, num_n, a_desc, b_desc, a_stages, b_stages, ready,
                              BM, BN, BK, STAGES, GROUP_M, B_NK)
    acc = gl.zeros([BM, BN], gl.float32, ACC)
    for step in range(steps):
        slot = step % STAGES
        k_step = step % k_steps
        mbarrier.wait(ready.index(slot), (step // STAGES) & 1)
        acc = warpgroup_mma(a_stages.index(slot), _b_operand(b_stages.index(slot), B_NK), acc, use_acc=k_step > 0,
                            is_async=True)
        # the previous step's wgmma is done: its stage takes the load STAGES - 1 steps ahead
        acc, _, _ = warpgroup_mma_wait(1, deps=(acc, a_stages.index(slot), b_stages.index(slot)))
        _persistent_step_load(step + STAGES - 1, steps, k_steps, num_m, num_n, a_desc, b_desc, a_stages, b_stages,
                              ready, BM, BN, BK, STAGES, GROUP_M, B_NK)
        if k_step == k_steps - 1:
            acc = warpgroup_mma_wait(0, deps=(acc,))
            pid_m, pid_n = _tile_coordinates(gl.program_id(0) + (step // k_steps) * gl.num_programs(0), num_m,
                                             num_n, GROUP_M)
            left, right = _halves(acc, BM, BN // 2)
            first, second = _halves(left, BM, SLICE)
            third, fourth = _halves(right, BM, SLICE)
            _store_slice(c_desc, c_buffers.index(0), first, pid_m * BM, pid_n * BN)
            _store_slice(c_desc, c_buffers.index(1), second, pid_m * BM, pid_n * BN + SLICE)
            _store_slice(c_desc, c_buffers.index(0), third, pid_m * BM, pid_n * BN + 2 * SLICE)
            _store_slice(c_desc, c_buffers.index(1), fourth, pid_m * BM, pid_n * BN + 3 * SLICE)
    tma.store_wait(0)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))


@gluon.jit
def _pingpong_producer(a_desc, b_desc, a_stages, b_stages, ready, empty, M, N, K, BM: gl.constexpr,
                       BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                       B_NK: gl.constexpr):
    """Tile t's K steps into consumer t % 2's ring, each stage once its consumer has released it."""
    num_m, num_n, k_steps, tiles = _program_work(M, N, K, BM, BN, BK)
    for t in range(tiles):
        pid_m, pid_n = _tile_coordinates(gl.program_id(0) + t * gl.num_programs(0), num_m, num_n, GROUP_M)
        for k_step in range(k_steps):
            ring_step = (t // 2) * k_steps + k_step
            slot = (t % 2) * STAGES + ring_step % STAGES
            # a fresh barrier's "previous phase" counts as complete: the first round does not wait
            mbarrier.wait(empty.index(slot), ((ring_step // STAGES) & 1) ^ 1)
            _load_step(a_desc, b_desc, a_stages.index(slot), b_stages.index(slot), ready.index(slot), pid_m * BM,
                       pid_n * BN, k_step * BK, B_NK)


@gluon.jit
def _store_tile(c_ptr, stride_cm, acc, row, column, M, N, BM: gl.constexpr, BN: gl.constexpr, ACC: gl.constexpr):
    """The accumulator into C[row:, column:] through masked pointer stores: fp32 from its own layout;
    16-bit through a row-major blocked one. Converted in the accumulator's layout, 16-bit stores had
    ptxas serialize the consumer's wgmmas (C7514: the conversion's reads of the accumulator land
    inside the next tile's wgmma stage); converted in the blocked layout, fp32 would spill."""
    if c_ptr.dtype.element_ty == gl.float32:
        layout: gl.constexpr = ACC
        out = acc
    else:
        layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        out = gl.convert_layout(acc.to(c_ptr.dtype.element_ty), layout)
    rows = row + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    columns = column + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    inside = (rows[:, None] < M) & (columns[None, :] < N)
    gl.store(c_ptr + rows[:, None] * stride_cm + columns[None, :], out, mask=inside)


@gluon.jit
def _pingpong_consumer(CONSUMER: gl.constexpr, c_ptr, stride_cm, a_stages, b_stages, ready, empty, M, N, K,
                       BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                       GROUP_M: gl.constexpr, B_NK: gl.constexpr):
    """Tiles CONSUMER, CONSUMER + 2, ... of the program's: wgmma over the ring, then masked stores."""
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    num_m, num_n, k_steps, tiles = _program_work(M, N, K, BM, BN, BK)
    acc = gl.zeros([BM, BN], gl.float32, ACC)
    for t in range(CONSUMER, tiles, 2):
        pid_m, pid_n = _tile_coordinates(gl.program_id(0) + t * gl.num_programs(0), num_m, num_n, GROUP_M)
        previous = 0
        for k_step in range(k_steps):
            ring_step = (t // 2) * k_steps + k_step
            slot = CONSUMER * STAGES + ring_step % STAGES
            mbarrier.wait(ready.index(slot), (ring_step // STAGES) & 1)
            acc = warpgroup_mma(a_stages.index(slot), _b_operand(b_stages.index(slot), B_NK), acc,
                                use_acc=k_step > 0, is_async=True)
            acc, _, _ = warpgroup_mma_wait(1, deps=(acc, a_stages.index(slot), b_stages.index(slot)))
            if k_step > 0:
                mbarrier.arrive(empty.index(previous), count=1)   # its wgmma is done
            previous = slot
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(previous), count=1)
        _store_tile(c_ptr, stride_cm, acc, pid_m * BM, pid_n * BN, M, N, BM, BN, ACC)


@gluon.jit
def gemm_pingpong(a_desc, b_desc, c_ptr, stride_cm, M, N, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                  STAGES: gl.constexpr, GROUP_M: gl.constexpr, B_NK: gl.constexpr, CONSUMER_REGISTERS: gl.constexpr,
                  PRODUCER_REGISTERS: gl.constexpr):
    """C through pointers, row stride `stride_cm`: two rings of STAGES stages, one per consumer, launched
    with num_warps=4 (the first consumer; the other consumer and the producer are worker partitions)."""
    gl.static_assert(STAGES >= 2, "a consumer releases a stage only after the wgmma after it was issued")
    a_stages = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, BM, BK], a_desc.layout)
    b_stages = gl.allocate_shared_memory(b_desc.dtype, [2 * STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2 * STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2 * STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_pingpong_consumer, (0, c_ptr, stride_cm, a_stages, b_stages, ready, empty, M, N, K, BM, BN, BK, STAGES,
                              GROUP_M, B_NK)),
        (_pingpong_consumer, (1, c_ptr, stride_cm, a_stages, b_stages, ready, empty, M, N, K, BM, BN, BK, STAGES,
                              GROUP_M, B_NK)),
        (_pingpong_producer, (a_desc, b_desc, a_stages, b_stages, ready, empty, M, N, K, BM, BN, BK, STAGES, GROUP_M,
                              B_NK)),
    ], [4, 1], [CONSUMER_REGISTERS, PRODUCER_REGISTERS])
    for i in gl.static_range(2 * STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


PINGPONG_WARPGROUPS = 3        # two consumers and the producer's warp, which takes a warpgroup's registers


def pingpong_maxnreg(consumer_registers: int, producer_registers: int) -> int:
    """The launch's registers a thread (`maxnreg`) that setmaxnreg redistributes: every warpgroup starts
    at it, so it is the partitions' mean; left at its default (256) the launch would ask for more than
    an SM's 65536."""
    return (2 * consumer_registers + producer_registers) // PINGPONG_WARPGROUPS // 8 * 8


def programs(tiles: int, multiprocessors: int) -> tuple[int]:
    """The persistent grid: one program an SM, at most one a tile."""
    return (min(tiles, multiprocessors),)


def tiles_of(m: int, n: int, bm: int, bn: int) -> int:
    """Output tiles of an m × n product at bm × bn."""
    return triton.cdiv(m, bm) * triton.cdiv(n, bn)
