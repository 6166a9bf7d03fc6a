"""CUDA-style schedules that stage tiles in shared memory: the bank-conflict model's subjects.

These are S-TIR schedules with thread bindings (what TVM's CUDA codegen consumes); the Gluon
backend compiles them (`compile(mod, backend="gluon")`) with the shared layouts
BankConflictFreeTiling decides. `python examples/shared_memory.py` prints the model's report
before and after the pass.
"""

from tvm import s_tir

from matmul import make_matmul
from transpose import make_transpose


def schedule_transpose(func, tile: int = 32):
    """Rows of A go to shared memory coalesced; each thread then reads a column of the tile."""
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("B")
    i, j = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, tile])
    j_outer, j_inner = sch.split(j, [None, tile])
    sch.reorder(j_outer, i_outer, j_inner, i_inner)
    sch.bind(j_outer, "blockIdx.y")
    sch.bind(i_outer, "blockIdx.x")
    staged = sch.cache_read(block, 0, "shared")
    sch.compute_at(staged, i_outer)
    sch.bind(sch.get_loops(staged)[-1], "threadIdx.x")
    sch.bind(i_inner, "threadIdx.x")
    return sch.mod


def schedule_matmul(func):
    """32x32 threads, one element of C each; 32x32 tiles of A and B staged in shared memory per
    step of k. Rows of C go along threadIdx.x, so a warp reads a column of the A tile."""
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, 32, 1])
    j0, j1 = sch.split(j, [None, 32])
    k0, k1 = sch.split(k, [None, 32])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    sch.bind(j1, "threadIdx.y")
    for index in (0, 1):
        staged = sch.cache_read(block, index, "shared")
        sch.compute_at(staged, k0)
        _, ty, tx = sch.split(sch.fuse(*sch.get_loops(staged)[-2:]), [None, 32, 32])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(block, k0)
    return sch.mod


def schedule_transpose_vectorized(func, tile: int = 64, vector: int = 4, warps: int = 8):
    """The fast transpose: a 64x64 tile per block of 8 warps, global accesses of `vector` elements
    per thread on both sides. The staging copy writes rows of the tile as vectors; the output
    stage has each warp write 4 rows of B (4 x 128 bytes) with lanes 8 along B's rows (4 elements
    each) and 4 across, so it reads a 32x4 patch of the tile (columns of A) per request."""
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("B")
    i, j = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, tile])
    j_outer, j_inner = sch.split(j, [None, tile])
    sch.reorder(j_outer, i_outer, j_inner, i_inner)
    sch.bind(j_outer, "blockIdx.y")
    sch.bind(i_outer, "blockIdx.x")
    staged = sch.cache_read(block, 0, "shared")
    sch.compute_at(staged, i_outer)
    _, ty, tx, vec = sch.split(sch.fuse(*sch.get_loops(staged)[-2:]), [None, warps, 32, vector])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    rows = 32 // (tile // vector // 2)                     # rows of B one warp writes per step
    j_serial, j_warp, j_lane = sch.split(j_inner, [None, warps, rows])
    i_serial, i_lane, i_vec = sch.split(i_inner, [None, 32 // rows, vector])
    sch.reorder(j_serial, i_serial, j_warp, j_lane, i_lane, i_vec)
    sch.bind(j_warp, "threadIdx.y")
    sch.bind(sch.fuse(j_lane, i_lane), "threadIdx.x")
    sch.vectorize(i_vec)
    return sch.mod


def schedule_matmul_tensor_core(func, block_m: int = 128, block_n: int = 128, block_k: int = 64, threads: int = 128,
                                vector: int = 8):
    """fp16 matmul for the tensor cores, as a CUDA-style schedule: a block_m x block_n tile of C per
    block of `threads` threads (one row of C each), block_k-wide tiles of A and B staged in shared
    memory per step of k by vectorized copies (`vector` elements per thread). What the schedule
    fixes: the tiles, the staging, the copies' thread layout and the thread count. What the Gluon
    backend chooses: the contraction over the two staged tiles runs on warpgroup_mma, with the
    accumulator in its NVMMA register layout, because BankConflictFreeTiling gave both tiles the
    tensor-core (NVMMA) shared layout."""
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, block_m])
    j0, j1 = sch.split(j, [None, block_n])
    k0, k1 = sch.split(k, [None, block_k])
    sch.reorder(i0, j0, i1, k0, j1, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    for index in (0, 1):
        staged = sch.cache_read(block, index, "shared")
        sch.compute_at(staged, k0)
        _, tx, vec = sch.split(sch.fuse(*sch.get_loops(staged)[-2:]), [None, threads, vector])
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
    sch.decompose_reduction(block, k0)
    return sch.mod


transpose_shared = schedule_transpose(make_transpose(1024, 1024))
transpose_vectorized = schedule_transpose_vectorized(make_transpose(1024, 1024))
matmul_shared = schedule_matmul(make_matmul(1024, 1024, 1024, "float32", "float32"))
matmul_tensor_core = schedule_matmul_tensor_core(make_matmul(1024, 1024, 1024, "float16", "float32"))

if __name__ == "__main__":
    from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling
    from tir_passes.analyses.bank_conflicts import analyze, format_report

    for name, mod in (("transpose", transpose_shared), ("matmul", matmul_shared)):
        print(f"== {name}, as scheduled\n{format_report(analyze(mod))}")
        fixed = BankConflictFreeTiling()(mod)
        print(f"== {name}, after BankConflictFreeTiling\n{format_report(analyze(fixed))}")
