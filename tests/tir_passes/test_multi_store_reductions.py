"""Reduction blocks with several outputs through the passes: the dependence analysis lets their
reduction loops be tiled, LoopFusion moves them under their consumer, Tiling sizes their tiles
by the widest output."""

import tvm
from tvm import te, topi
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.analyses.dependence import carried_dependences
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.passes.loop_fusion import LoopFusion
from tir_passes.analyses.nest import loops_under
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.tiling_plan import plan_kernel


def _reduction_loop_dependences(func):
    stmt = top_level_statements(func)[0]
    return carried_dependences(stmt, loops_under(stmt)[-1])


def test_arg_reduction_outputs_carry_no_dependence_along_the_reduction():
    A = te.placeholder((8, 16), "float32", name="A")
    assert _reduction_loop_dependences(te.create_prim_func([A, topi.argmax(A, axis=1)])) == []


@T.prim_func(s_tir=True)
def reads_a_neighbour(A: T.Buffer((8, 16), "float32"), S: T.Buffer((9,), "float32"), Q: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.sblock("neighbour"):
            vi, vk = T.axis.remap("SR", [i, k])
            S[vi] = S[vi] + A[vi, vk]
            Q[vi] = Q[vi] + S[vi + 1]


def test_output_read_at_another_index_is_a_dependence():
    found = _reduction_loop_dependences(reads_a_neighbour)
    assert found and {d.buffer for d in found} == {"S"}


def test_producer_of_two_moments_is_fused_under_its_consumer():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
            s = T.sblock_alloc_buffer((8,), "float32")
            sq = T.sblock_alloc_buffer((8,), "float32")
            for i, k in T.grid(8, 16):
                with T.sblock("moments"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        s[vi] = T.float32(0)
                        sq[vi] = T.float32(0)
                    s[vi] = s[vi] + A[vi, vk]
                    sq[vi] = sq[vi] + A[vi, vk] * A[vi, vk]
            for i in range(8):
                with T.sblock("D"):
                    vi = T.axis.spatial(8, i)
                    D[vi] = sq[vi] - s[vi] * s[vi]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"fusion.decisions": [{"action": "fuse", "blocks": ["moments"], "into": ["D"],
                                                     "buffers": ["s", "sq"], "bytes_saved": 128, "depth": 1,
                                                     "reason": "", "taken": True}]})
                s = T.sblock_alloc_buffer((8,))
                sq = T.sblock_alloc_buffer((8,))
                for i in range(8):
                    for ax0 in range(16):
                        with T.sblock("moments"):
                            vi, vk = T.axis.remap("SR", [i, ax0])
                            with T.init():
                                s[vi] = T.float32(0)
                                sq[vi] = T.float32(0)
                            s[vi] = s[vi] + A[vi, vk]
                            sq[vi] = sq[vi] + A[vi, vk] * A[vi, vk]
                    with T.sblock("D"):
                        vi = T.axis.spatial(8, i)
                        D[vi] = sq[vi] - s[vi] * s[vi]

    assert_rewrites(LoopFusion(), Before, Expected)


@T.prim_func(s_tir=True)
def moments_read_apart(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32"), E: T.Buffer((8,), "float32")):
    s = T.sblock_alloc_buffer((8,), "float32")
    sq = T.sblock_alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 16):
        with T.sblock("moments"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                s[vi] = T.float32(0)
                sq[vi] = T.float32(0)
            s[vi] = s[vi] + A[vi, vk]
            sq[vi] = sq[vi] + A[vi, vk] * A[vi, vk]
    for i in range(8):
        with T.sblock("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = s[vi] * T.float32(2)
    for i in range(8):
        with T.sblock("E"):
            vi = T.axis.spatial(8, i)
            E[vi] = sq[vi] * T.float32(2)


def test_moments_read_by_different_nests_are_not_fused():
    after = LoopFusion()(tvm.IRModule({"main": moments_read_apart}))["main"]
    decisions = [step.text for step in fusion_steps(after)]
    assert decisions == ["not fused: moments -> D: s and sq are read by different nests"]
    assert len(top_level_statements(after)) == 3


@T.prim_func(s_tir=True)
def wide_argmax(A: T.Buffer((4, 5000), "float64"), idx: T.Buffer((4,), "int32"), val: T.Buffer((4,), "float64")):
    for i, k in T.grid(4, 5000):
        with T.sblock("argmax"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float64")
            idx[vi] = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
            val[vi] = T.max(val[vi], A[vi, vk])


def test_reduction_tile_is_sized_by_the_widest_output():
    """8-byte values halve the register budget of a row: 2048 where 4-byte outputs get 4096."""
    plan = plan_kernel(gpu_spec("H200"), top_level_statements(wide_argmax)[0])
    assert [choice.size for choice in plan.tiles.values()] == [2048]
