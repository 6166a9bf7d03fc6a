"""LoopFusion with producers whose outputs a later nest reads (a training forward's saved statistics): the
consumer moves under the producer's nest, which stays whole (every element of the output still written), and
the step records the outputs as `stored` (read where computed, still written), not as kept in registers."""

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from tir_passes.checks.numerics import ReferenceRun, stage_results
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.loop_fusion import LoopFusion


@I.ir_module
class RowMeanWritten:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8, 16), "float32"), mean: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 16):
            with T.sblock("mean"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    mean[vi] = T.float32(0)
                mean[vi] = mean[vi] + X[vi, vk] * T.float32(1.0 / 16)
        for i, j in T.grid(8, 16):
            with T.sblock("center"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi, vj] - mean[vi]


@I.ir_module
class FirstColumnRead:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8, 16), "float32"), Z: T.Buffer((8,), "float32")):
        for i, j in T.grid(8, 16):
            with T.sblock("double"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi, vj] * T.float32(2)
        for i in range(8):
            with T.sblock("first"):
                vi = T.axis.remap("S", [i])
                Z[vi] = Y[vi, 0] + T.float32(1)


def _same_outputs(before, after) -> None:
    reference = ReferenceRun.of(before["main"])
    assert reference.mismatches(stage_results(reference, after["main"])) == []


def test_a_statistic_that_is_an_output_fuses_and_is_still_stored():
    after = LoopFusion()(RowMeanWritten)
    assert len(top_level_statements(after["main"])) == 1
    (step,) = [s for s in fusion_steps(after["main"]) if s.taken]
    assert (step.action, step.blocks, step.into) == ("move", ("center",), ("mean",))
    assert step.stored == ("mean",) and step.buffers == ()
    assert step.bytes_saved == 8 * 4   # the read of mean; its write stays
    _same_outputs(RowMeanWritten, after)


def test_an_output_read_in_part_is_still_written_whole():
    """`first` reads Y's column 0 only: it moves under Y's nest, which keeps writing every column."""
    after = LoopFusion()(FirstColumnRead)
    assert len(top_level_statements(after["main"])) == 1
    (step,) = [s for s in fusion_steps(after["main"]) if s.taken]
    assert step.into == ("double",) and step.stored == ("Y",)
    _same_outputs(FirstColumnRead, after)


@T.prim_func(s_tir=True)
def _read_before_and_after(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((8,), "float32"),
                           Z: T.Buffer((8, 16), "float32"), W: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.sblock("old"):
            vi, vk = T.axis.remap("SS", [i, k])
            Z[vi, vk] = Y[vi] * X[vi, vk]
    for i, k in T.grid(8, 16):
        with T.sblock("rowsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = T.float32(0)
            Y[vi] = Y[vi] + X[vi, vk]
    for i in range(8):
        with T.sblock("new"):
            vi = T.axis.remap("S", [i])
            W[vi] = Y[vi] * T.float32(3)


def test_an_output_read_before_it_is_written_is_not_fused():
    """`old` reads Y's value before `rowsum` writes it: no reader nest moves under the producer (`old` under it
    would read the new Y), and the program's values are unchanged."""
    mod = tvm.IRModule({"main": _read_before_and_after})
    after = LoopFusion()(mod)
    steps = fusion_steps(after["main"])
    assert not [s for s in steps if s.taken and "rowsum" in (*s.blocks, *s.into)]
    assert not [s for s in steps if "old" in (*s.blocks, *s.into)]   # never even a candidate
    assert len(top_level_statements(after["main"])) == 3
    reference = ReferenceRun.of(mod["main"])
    assert reference.mismatches(stage_results(reference, after["main"])) == []
