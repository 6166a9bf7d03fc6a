import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.tiling import Tiling, tile_function
from tir_passes.gpu_specs import gpu_spec


def test_elementwise_nest_gets_grid_and_tile_loops():
    """Both spatial loops are split into a grid loop and a power-of-two tile loop; only the
    axis whose extent is not a multiple of its tile keeps a predicate."""

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
            for i_0 in T.serial(1, annotations={"tile.num_stages": 2, "tile.num_warps": 4, "tile.role": "grid"}):
                for j_0 in T.serial(1, annotations={"tile.role": "grid"}):
                    for i_1 in T.serial(16, annotations={"tile.block": "BLOCK_I", "tile.extent": 16, "tile.outer": "i_0", "tile.role": "tile"}):
                        for j_1 in T.serial(128, annotations={"tile.block": "BLOCK_J", "tile.extent": 100, "tile.outer": "j_0", "tile.role": "tile"}):
                            with T.sblock("B"):
                                vi = T.axis.spatial(16, i_0 * 16 + i_1)
                                vj = T.axis.spatial(100, j_0 * 128 + j_1)
                                T.where(j_0 * 128 + j_1 < 100)
                                B[vi, vj] = A[vi, vj] * T.float32(2)

    assert_rewrites(Tiling(), Before, Expected)


def _loop_annotations(func):
    found = []
    import tvm_ffi
    from tvm import tirx

    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: found.append((f.loop_var.name, dict(f.annotations)))), order="pre")
    return found


def test_contraction_gets_dot_sized_tiles_and_grouped_order():
    """A matmul: M and N become BLOCK_M/BLOCK_N tiles, K a serial loop over BLOCK_K tiles."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((512, 256), "float16"), B: T.Buffer((256, 384), "float16"), C: T.Buffer((512, 384), "float32")):
        for i, j, k in T.grid(512, 384, 256):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])

    loops = dict(_loop_annotations(tile_function(main, gpu_spec("H200"))))
    assert loops["i_0"]["tile.role"] == "grid" and loops["i_0"]["tile.group_m"] == 8
    assert loops["k_0"]["tile.role"] == "serial"
    assert (loops["i_1"]["tile.block"], loops["j_1"]["tile.block"], loops["k_1"]["tile.block"]) == ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    assert all(loops[name]["tile.role"] == "tile" for name in ("i_1", "j_1", "k_1"))


def test_small_gpu_gets_smaller_reduction_tiles():
    """The shared-memory model shrinks BLOCK_K on a GPU with less shared memory per block."""
    from tir_passes.tiling import _contraction_sizes

    sizes_h200 = _contraction_sizes(gpu_spec("H200"), "float32", {"M": 4096, "N": 4096, "K": 4096})
    assert sizes_h200 == {"M": 64, "N": 64, "K": 32}
    tiny = gpu_spec("A10G").__class__("tiny", 80, 10, 65536, 24 * 1024, 100.0)
    assert _contraction_sizes(tiny, "float32", {"M": 4096, "N": 4096, "K": 4096})["K"] == 16


def test_symbolic_extent_is_recorded_as_expression():
    """A symbolic loop extent is split all the same; the tile loop records it for the masks."""

    @T.prim_func(s_tir=True)
    def main(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.float32(1)

    loops = dict(_loop_annotations(tile_function(main, gpu_spec("H200"))))
    assert str(loops["i_1"]["tile.extent"]) == "n"


def test_already_tiled_nest_is_left_alone():
    """A nest that already carries tile annotations (from a user or an earlier run) is kept."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
            for i_0 in T.serial(2, annotations={"tile.role": "grid"}):
                for i_1 in T.serial(32, annotations={"tile.role": "tile", "tile.block": "BLOCK_I", "tile.extent": 64, "tile.outer": "i_0"}):
                    with T.sblock("B"):
                        vi = T.axis.spatial(64, i_0 * 32 + i_1)
                        B[vi] = A[vi]

    after = Tiling()(Before)
    tvm.ir.assert_structural_equal(after, Before)


def test_block_sizes_are_powers_of_two_for_any_extent():
    """The model never proposes a block size that is not a power of two (Triton needs them)."""
    from tvm import te

    from tir_passes.tiling import plan_nest, _perfect_nest
    from tir_passes.pass_util import top_level_statements

    for rows, cols in [(1, 1), (3, 8191), (16384, 8192), (67, 45), (1000, 3), (5, 100000)]:
        A = te.placeholder((rows, cols), "float32", name="A")
        k = te.reduce_axis((0, cols), name="k")
        B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
        C = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="C")
        for func in (te.create_prim_func([A, B]), te.create_prim_func([A, C])):
            loops, realize = _perfect_nest(top_level_statements(func)[0])
            plan = plan_nest(gpu_spec("H200"), loops, realize)
            for name, size in plan.tiles.values():
                assert size & (size - 1) == 0, (rows, cols, name, size)


def test_transposed_access_gets_square_tiles_over_both_axes():
    """B[j, i] = A[i, j]: the load is contiguous along j, the store along i; both become tiles."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((512, 256), "float32"), B: T.Buffer((256, 512), "float32")):
        for i, j in T.grid(512, 256):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj, vi] = A[vi, vj]

    loops = dict(_loop_annotations(tile_function(main, gpu_spec("H200"))))
    assert loops["i_1"]["tile.role"] == loops["j_1"]["tile.role"] == "tile"
    from tvm import tirx
    import tvm_ffi

    extents = {}
    tvm_ffi.structural_walk(tile_function(main, gpu_spec("H200")).body,
                            (tirx.For, lambda f: extents.__setitem__(f.loop_var.name, int(f.extent))))
    assert extents["i_1"] == 64 and extents["j_1"] == 64
