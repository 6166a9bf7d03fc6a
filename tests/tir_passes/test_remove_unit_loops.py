from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.passes.remove_unit_loops import RemoveUnitLoops


def test_unit_loop_is_inlined():
    """A serial loop of extent 1 disappears; its variable becomes the loop start."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "int32")):
            for i in T.serial(3, 4):
                for j in T.serial(8):
                    with T.sblock("A"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        A[vj] = A[vj] + vi

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "int32")):
            for j in T.serial(8):
                with T.sblock("A"):
                    vi = T.axis.spatial((3, 4), 3)
                    vj = T.axis.spatial(8, j)
                    A[vj] = A[vj] + vi

    assert_rewrites(RemoveUnitLoops(), Before, Expected)


def test_thread_bound_and_annotated_unit_loops_are_kept():
    """Extent-1 loops bound to threads or carrying annotations stay: their extent matters."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32")):
            for t in T.thread_binding(1, thread="threadIdx.x"):
                for u in T.serial(1, annotations={"tile.role": "grid"}):
                    for j in T.serial(8):
                        with T.sblock("A"):
                            vt, vu, vj = T.axis.remap("SSS", [t, u, j])
                            A[vj] = A[vj] * T.float32(2)

    assert_rewrites(RemoveUnitLoops(), Before, Before)
