import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.passes.loop_fusion import LoopFusion
from tir_passes.infra.pass_util import top_level_statements


def test_elementwise_producer_is_inlined_with_its_reason():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
            B = T.sblock_alloc_buffer((8, 16), "float32")
            for i, j in T.grid(8, 16):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for i, j in T.grid(8, 16):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        C[vi] = T.float32(0)
                    C[vi] = C[vi] + B[vi, vj]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"fusion.decisions": [{"action": "inline", "blocks": ["B"], "buffers": ["B"],
                                                     "bytes_saved": 1024, "reason": "elementwise producer",
                                                     "taken": True}]})
                for i, j in T.grid(8, 16):
                    with T.sblock("C"):
                        vi, vj = T.axis.remap("SR", [i, j])
                        with T.init():
                            C[vi] = T.float32(0)
                        C[vi] = C[vi] + A[vi, vj] * T.float32(2)

    assert_rewrites(LoopFusion(), Before, Expected)


def test_reduction_is_fused_under_its_consumers_row_loop():
    """The row sum moves under the epilogue's row loop: one nest, C kept per row."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
            C = T.sblock_alloc_buffer((8,), "float32")
            for i, j in T.grid(8, 16):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        C[vi] = T.float32(0)
                    C[vi] = C[vi] + A[vi, vj]
            for i in range(8):
                with T.sblock("D"):
                    vi = T.axis.spatial(8, i)
                    D[vi] = C[vi] * T.float32(0.5)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"fusion.decisions": [{"action": "fuse", "blocks": ["C"], "into": ["D"], "buffers": ["C"],
                                                     "bytes_saved": 64, "depth": 1, "reason": "", "taken": True}]})
                C = T.sblock_alloc_buffer((8,))
                for i in range(8):
                    for ax0 in range(16):
                        with T.sblock("C"):
                            vi, vj = T.axis.remap("SR", [i, ax0])
                            with T.init():
                                C[vi] = T.float32(0)
                            C[vi] = C[vi] + A[vi, vj]
                    with T.sblock("D"):
                        vi = T.axis.spatial(8, i)
                        D[vi] = C[vi] * T.float32(0.5)

    assert_rewrites(LoopFusion(), Before, Expected)


@T.prim_func(s_tir=True)
def neighbour_rows(A: T.Buffer((9, 16), "float32"), D: T.Buffer((8,), "float32")):
    C = T.sblock_alloc_buffer((9,), "float32")
    for i, j in T.grid(9, 16):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vj]
    for i in range(8):
        with T.sblock("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = C[vi + 1] - C[vi]


def test_neighbour_row_read_is_refused_with_the_reason_in_the_dump():
    after = LoopFusion()(tvm.IRModule({"main": neighbour_rows}))["main"]
    decisions = [step.text for step in fusion_steps(after)]
    assert decisions == ["not fused: C -> D: D reads C[vi + 1], not the element of the shared axis it computes (vi): "
                         "fusing would need values another program computes"]
    assert len(top_level_statements(after)) == 2
    assert "fusion.decisions" in after.script()
    compile_and_check(neighbour_rows, aot=False)  # still correct: two kernels


def test_single_nest_is_left_alone():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 8), "float32")):
            for i, j in T.grid(8, 16):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vj, vi] = A[vi, vj]

    after = LoopFusion()(Before)
    assert after["main"].same_as(Before["main"])


@pytest.mark.interpreter
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm", "attention_scores", "matmul_bias_gelu"])
def test_row_wise_programs_become_one_kernel(name):
    from attention_scores import make_attention_scores
    from layernorm import make_layernorm
    from matmul_bias_gelu import make_matmul_bias_gelu
    from rmsnorm import make_rmsnorm
    from softmax import make_softmax

    func = {"softmax": make_softmax(67, 45), "layernorm": make_layernorm(67, 45), "rmsnorm": make_rmsnorm(45),
            "attention_scores": make_attention_scores(37, 45, 32), "matmul_bias_gelu": make_matmul_bias_gelu(67, 45, 33)}[name]
    kernel = compile_and_check(func, aot=False)
    assert len(kernel.program.kernels) == 1


@pytest.mark.interpreter
def test_a_batch_of_one_row_fuses_as_any_other_batch():
    """Under a loop of one iteration TVM's compute_at binds the fused block's row to 0; the next
    producer (the mean) still fuses, so one row runs the plan two rows do (and, deterministic,
    the same reduction code: docs/determinism.md)."""
    from layernorm import make_layernorm

    kernel = compile_and_check(make_layernorm(1, 45), aot=False)
    assert len(kernel.program.kernels) == 1


def _statistic_read_by_two_nests(dependent: bool):
    """absmax per row, read by a scale nest and a values nest; with `dependent`, the values nest
    also reads what the scale nest writes at another row (then the two nests cannot interleave)."""

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((8, 16), "float32"), Q: T.Buffer((8, 16), "float32"), S: T.Buffer((8,), "float32")):
        absmax = T.sblock_alloc_buffer((8,), "float32")
        for i, j in T.grid(8, 16):
            with T.sblock("absmax"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    absmax[vi] = T.float32(1e-6)
                absmax[vi] = T.max(absmax[vi], T.abs(X[vi, vj]))
        for i in range(8):
            with T.sblock("scale"):
                vi = T.axis.remap("S", [i])
                S[vi] = absmax[vi] * T.float32(0.5)
        for i, j in T.grid(8, 16):
            with T.sblock("values"):
                vi, vj = T.axis.remap("SS", [i, j])
                Q[vi, vj] = X[vi, vj] / absmax[vi]

    @T.prim_func(s_tir=True)
    def dependent_main(X: T.Buffer((8, 16), "float32"), Q: T.Buffer((8, 16), "float32"),
                       S: T.Buffer((8,), "float32")):
        absmax = T.sblock_alloc_buffer((8,), "float32")
        for i, j in T.grid(8, 16):
            with T.sblock("absmax"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    absmax[vi] = T.float32(1e-6)
                absmax[vi] = T.max(absmax[vi], T.abs(X[vi, vj]))
        for i in range(8):
            with T.sblock("scale"):
                vi = T.axis.remap("S", [i])
                S[vi] = absmax[vi] * T.float32(0.5)
        for i, j in T.grid(8, 16):
            with T.sblock("values"):
                vi, vj = T.axis.remap("SS", [i, j])
                Q[vi, vj] = X[vi, vj] / absmax[vi] + S[(vi + 1) % 8]

    return tvm.IRModule({"main": dependent_main if dependent else main})


def test_independent_readers_of_a_row_statistic_are_merged_then_fused():
    after = LoopFusion()(_statistic_read_by_two_nests(dependent=False))
    steps = fusion_steps(after["main"])
    assert (steps[0].action, steps[0].blocks, steps[0].into, steps[0].depth, steps[0].reason) == (
        "merge", ("values",), ("scale",), 1, "both read absmax of absmax, independently")
    decisions = [step.text for step in steps]
    assert decisions[1].startswith("fuse absmax into the nest of scale over 1 shared axis(es)")
    assert len(top_level_statements(after["main"])) == 1


def test_readers_that_depend_on_each_other_are_not_merged():
    """The values nest reads S of another row, which the scale nest writes: it stays a nest of its own."""
    after = LoopFusion()(_statistic_read_by_two_nests(dependent=True))
    decisions = [step.text for step in fusion_steps(after["main"])]
    assert not any(d.startswith("merge") for d in decisions)
    assert any("absmax is read by several nests (scale, values)" in d for d in decisions)
    assert len(top_level_statements(after["main"])) == 3
