import pytest
import tvm
import tvm_ffi
from tvm import te, tirx
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.analyses.nest import perfect_nest
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.contracts.tile_contract import dot_mark, kernel_tile, loop_tile
from tir_passes.passes.tile_sizes import contraction_sizes
from tir_passes.passes.tiling import Tiling, tile_function
from tir_passes.passes.tiling_plan import plan_kernel


def test_elementwise_nest_gets_grid_and_tile_loops():
    """Both spatial loops are split into a grid loop and a power-of-two tile loop; only the
    axis whose extent is not a multiple of its tile keeps a predicate; the decisions are one
    typed annotation per loop, and the kernel's on its outermost loop."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((16, 100), "float32"), B: T.Buffer((16, 100), "float32")):
            for i, j in T.grid(16, 100):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((16, 100), "float32"), B: T.Buffer((16, 100), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"tile.decisions": [{"kernel": 0, "text": "kernel 0 (B): program ids over i, j; tile axes "
                                                                        "i=16, j=128; 4 warps, 2 stages"}],
                               "tile.limits": {"default_num_stages": 2, "default_num_warps": 4, "dot_min_block": 16,
                                               "max_num_warps": 32, "max_row_tile": 16384,
                                               "register_row_elements": 8192}})
                for i_0 in T.serial(1, annotations={"tile": {"role": "grid"}, "tile.kernel": {"num_stages": 2, "num_warps": 4}}):
                    for j_0 in T.serial(1, annotations={"tile": {"role": "grid"}}):
                        for i_1 in T.serial(16, annotations={"tile": {"axis": "i", "block": "BLOCK_I", "extent": 16, "outer": "i_0", "role": "tile", "size": 16}}):
                            for j_1 in T.serial(128, annotations={"tile": {"axis": "j", "block": "BLOCK_J", "extent": 100, "outer": "j_0", "role": "tile", "size": 128}}):
                                with T.sblock("B"):
                                    vi = T.axis.spatial(16, i_0 * 16 + i_1)
                                    vj = T.axis.spatial(100, j_0 * 128 + j_1)
                                    T.where(j_0 * 128 + j_1 < 100)
                                    B[vi, vj] = A[vi, vj] * T.float32(2)

    assert_rewrites(Tiling(), Before, Expected)


def _tiles(func) -> dict:
    found = {}
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: found.__setitem__(f.loop_var.name, loop_tile(f))))
    return found


def _blocks(func) -> dict:
    from tvm import s_tir

    found = {}
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, lambda b: found.__setitem__(b.name_hint, b)))
    return found


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((512, 256), "float16"), B: T.Buffer((256, 384), "float16"), C: T.Buffer((512, 384), "float32")):
    for i, j, k in T.grid(512, 384, 256):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])


def test_contraction_gets_dot_sized_tiles_a_dot_mark_and_grouped_order():
    """A matmul: M and N become BLOCK_M/BLOCK_N tiles, K a serial loop over BLOCK_K tiles, and
    the block is marked as a tl.dot over those three axes."""
    tiled = tile_function(matmul, gpu_spec("H200"))
    tiles = _tiles(tiled)
    assert tiles["i_0"].role == tiles["j_0"].role == "grid" and tiles["k_0"].role == "serial"
    assert [(tiles[n].axis, tiles[n].block) for n in ("i_1", "j_1", "k_1")] == [("i", "BLOCK_M"), ("j", "BLOCK_N"), ("k", "BLOCK_K")]
    assert kernel_tile(top_level_statements(tiled)[0]).group_m == 8
    mark = dot_mark(_blocks(tiled)["C"])
    assert (mark.m, mark.n, mark.k) == ("i", "j", "k")


def test_small_gpu_gets_smaller_reduction_tiles():
    """The shared-memory model shrinks BLOCK_K on a GPU with less shared memory per block."""
    assert contraction_sizes(gpu_spec("H200"), "float32", {"M": 4096, "N": 4096, "K": 4096}) == {"M": 64, "N": 64, "K": 32}
    tiny = gpu_spec("A10G").__class__("tiny", 80, 10, 65536, 24 * 1024, 100.0)
    assert contraction_sizes(tiny, "float32", {"M": 4096, "N": 4096, "K": 4096})["K"] == 16


def test_symbolic_extent_is_recorded_as_expression():
    """A symbolic loop extent is split all the same; the tile records it for the masks."""

    @T.prim_func(s_tir=True)
    def main(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.float32(1)

    assert str(_tiles(tile_function(main, gpu_spec("H200")))["i_1"].extent) == "n"


def test_already_tiled_nest_is_left_alone():
    """A nest that already carries tile decisions (from a user or an earlier run) is kept."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
            for i_0 in T.serial(2, annotations={"tile": {"role": "grid"}}):
                for i_1 in T.serial(32, annotations={"tile": {"role": "tile", "axis": "i", "block": "BLOCK_I", "size": 32, "extent": 64, "outer": "i_0"}}):
                    with T.sblock("B"):
                        vi = T.axis.spatial(64, i_0 * 32 + i_1)
                        B[vi] = A[vi]

    tvm.ir.assert_structural_equal(Tiling()(Before), Before)


def test_block_sizes_are_powers_of_two_for_any_extent():
    """The model never proposes a block size that is not a power of two (Triton needs them)."""
    for rows, cols in [(1, 1), (3, 8191), (16384, 8192), (67, 45), (1000, 3), (5, 100000)]:
        A = te.placeholder((rows, cols), "float32", name="A")
        k = te.reduce_axis((0, cols), name="k")
        B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
        C = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="C")
        for func in (te.create_prim_func([A, B]), te.create_prim_func([A, C])):
            plan = plan_kernel(gpu_spec("H200"), top_level_statements(func)[0])
            for choice in plan.tiles.values():
                assert choice.size & (choice.size - 1) == 0, (rows, cols, choice)


def test_transposed_access_gets_square_tiles_over_both_axes():
    """B[j, i] = A[i, j]: the load is contiguous along j, the store along i; both become tiles."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((512, 256), "float32"), B: T.Buffer((256, 512), "float32")):
        for i, j in T.grid(512, 256):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj, vi] = A[vi, vj]

    tiled = tile_function(main, gpu_spec("H200"))
    tiles = _tiles(tiled)
    assert tiles["i_1"].role == tiles["j_1"].role == "tile" and tiles["i_1"].size == tiles["j_1"].size == 64
    extents = {}
    tvm_ffi.structural_walk(tiled.body, (tirx.For, lambda f: extents.__setitem__(f.loop_var.name, int(f.extent))))
    assert extents["i_1"] == 64 and extents["j_1"] == 64


@T.prim_func(s_tir=True)
def decaying_sum(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    # a linear recurrence (not a scan of one combiner), written with a spatial iterator: TIR does
    # not stop it, so Tiling must see the dependence
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] + T.if_then_else(vj >= 1, Y[vi, vj - 1] * T.float32(0.5), T.float32(0))


def test_loop_carrying_a_dependence_is_never_parallel():
    """The column loop of a decaying sum carries a dependence through Y: it stays a serial loop
    that names Y (the program syncs after each iteration), and only rows are parallel."""
    plan = plan_kernel(gpu_spec("H200"), top_level_statements(decaying_sum)[0])
    i, j = perfect_nest(top_level_statements(decaying_sum)[0])[0]
    assert j.loop_var.__chandle__() not in plan.tiles and j.loop_var.__chandle__() not in plan.parallel
    assert plan.carries[j.loop_var.__chandle__()] == ("Y",)
    assert i.loop_var.__chandle__() in plan.parallel
    assert any("loop j stays serial: it carries a dependence through Y" in note for note in plan.notes)


def test_parallelizing_a_carried_dependence_is_impossible():
    """The recurrence is computed in order: one program per row tile, a sync per column."""
    kernel = compile_and_check(decaying_sum, aot=True)
    assert "tl.debug_barrier()" in kernel.source


@T.prim_func(s_tir=True)
def scores_softmax_long_contraction(Q: T.Buffer((37, 20000), "float16"), K: T.Buffer((32, 20000), "float16"),
                                    P: T.Buffer((37, 32), "float32")):
    S = T.sblock_alloc_buffer((37, 32), "float32")
    row_max = T.sblock_alloc_buffer((37,), "float32")
    E = T.sblock_alloc_buffer((37, 32), "float32")
    row_sum = T.sblock_alloc_buffer((37,), "float32")
    for i, j, d in T.grid(37, 32, 20000):
        with T.sblock("scores"):
            vi, vj, vd = T.axis.remap("SSR", [i, j, d])
            with T.init():
                S[vi, vj] = T.float32(0)
            S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
    for i, j in T.grid(37, 32):
        with T.sblock("row_max"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                row_max[vi] = T.min_value("float32")
            row_max[vi] = T.max(row_max[vi], S[vi, vj])
    for i, j in T.grid(37, 32):
        with T.sblock("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = T.exp((S[vi, vj] - row_max[vi]) * T.float32(1.0 / 20000))  # well conditioned
    for i, j in T.grid(37, 32):
        with T.sblock("row_sum"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                row_sum[vi] = T.float32(0)
            row_sum[vi] = row_sum[vi] + E[vi, vj]
    for i, j in T.grid(37, 32):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = E[vi, vj] / row_sum[vi]


@pytest.mark.slow
def test_fused_nest_with_a_long_contraction_is_one_kernel():
    """32 keys per row and a contraction of 20000: LoopFusion fuses it; the contraction axis is
    tiled serially (it indexes no intermediate), the key axis is one whole tile shared by every
    sub-nest, the scores stay in registers and the contraction is a tl.dot. (By default
    SplitReduction first splits so long a contraction over so few output tiles across the GPU:
    then the fused kernel sums the partials instead.)"""
    kernel = compile_and_check(scores_softmax_long_contraction, aot=False, disable=("SplitReduction",))
    assert len(kernel.program.kernels) == 1
    record = kernel_tile(top_level_statements(kernel.tir["main"])[0])
    assert "S" in record.registers and not record.spilled
    assert "tl.dot(" in kernel.source


def test_fused_sub_nests_share_one_axis_by_name():
    """Softmax after LoopFusion: the column loops of its sub-nests are whole tiles named as one
    axis, so the row values they read and write are the same registers."""
    from softmax import make_softmax

    from tir_passes.pipeline import default_pipeline, run_pipeline
    from tir_passes.infra.frontend import as_module

    tiled = run_pipeline(as_module(make_softmax(67, 45)), default_pipeline()).module["main"]
    stmt = top_level_statements(tiled)[0]
    loops: list = []
    tvm_ffi.structural_walk(tiled.body, (tirx.For, loops.append))
    column_tiles = [t for t in map(loop_tile, loops) if t is not None and t.whole]
    assert len(column_tiles) >= 3 and len({t.axis for t in column_tiles}) == 1
    assert set(kernel_tile(stmt).registers) >= {"row_max", "row_sum"}


@T.prim_func(s_tir=True)
def previous_row(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    # NOTE: B is a parameter: TVM's own llvm build compacts an intermediate B to the rows it
    # thinks one iteration of i uses, and then computes this program wrongly
    for i in range(8):
        for j in range(16):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(16):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.if_then_else(vi > 0, B[vi - 1, vj], T.float32(0))


def test_hand_fused_read_of_the_previous_row_runs_in_order_through_memory():
    """A hand-fused nest whose second block reads the row the previous iteration wrote: the row
    loop carries a dependence, so it is serial, and B goes through memory with a sync between
    its write and its reads (never registers, never a wrong result)."""
    kernel = compile_and_check(previous_row, aot=True)
    record = kernel_tile(top_level_statements(kernel.tir["main"])[0])
    assert record.spilled == ("B",) and kernel.program.kernels[0].grid == ()
    assert kernel.source.count("tl.debug_barrier()") >= 1
