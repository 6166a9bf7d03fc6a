"""LoopFusion's stream step on a matmul chain E = (A·B)·D: the first product's rows are over the register
budget and its reader reduces along the axis it produces, so it moves under that reduction loop, one
element per step (the reader's loops reordered so that the produced element's loops lead); a reader whose
accumulator row beside the walk is over the budget too (a wide D) is left alone, and so is a reader that
does not reduce along the produced axis (an elementwise epilogue)."""

import tvm
from tvm.script import tirx as T

from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import STREAM, fusion_steps, streaming_blocks
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.loop_fusion import LoopFusion

LIMITS = BackendLimits(register_row_elements=256)   # C's row of 24 (x 16 dot rows) is over it


def _chain(n: int):
    @T.prim_func(s_tir=True)
    def chain(A: T.Buffer((8, 12), "float16"), B: T.Buffer((12, 24), "float16"), D: T.Buffer((24, n), "float16"),
              E: T.Buffer((8, n), "float32")):
        C = T.sblock_alloc_buffer((8, 24), "float32")
        for i, k, r in T.grid(8, 24, 12):
            with T.sblock("C"):
                vi, vk, vr = T.axis.remap("SSR", [i, k, r])
                with T.init():
                    C[vi, vk] = T.float32(0)
                C[vi, vk] = C[vi, vk] + T.Cast("float32", A[vi, vr]) * T.Cast("float32", B[vr, vk])
        for i, m, k in T.grid(8, n, 24):
            with T.sblock("E"):
                vi, vm, vk = T.axis.remap("SSR", [i, m, k])
                with T.init():
                    E[vi, vm] = T.float32(0)
                E[vi, vm] = E[vi, vm] + C[vi, vk] * T.Cast("float32", D[vk, vm])

    return chain


def _fused(func):
    return LoopFusion("H200", LIMITS)(tvm.IRModule({"main": func}))["main"]


def test_a_contraction_over_the_budget_streams_into_the_reduction_along_its_axis():
    func = _fused(_chain(8))
    steps = [s for s in fusion_steps(func) if s.action == STREAM]
    assert [(s.blocks, s.into, s.buffers, s.taken) for s in steps] == [(("C",), ("E",), ("C",), True)]
    assert streaming_blocks(func) == {"E"}
    assert len(top_level_statements(func)) == 1
    script = func.script()
    # E's loops reordered to i, k, m: C's element (i, k) is computed once per step of k, before the m loop
    assert script.index('T.sblock("C")') < script.index('T.sblock("E")')


def test_a_wide_accumulator_row_is_not_streamed():
    func = _fused(_chain(64))   # E's row of 64 (x 16) beside the walk is over the budget
    assert not [s for s in fusion_steps(func) if s.action == STREAM]
    assert len(top_level_statements(func)) == 2
