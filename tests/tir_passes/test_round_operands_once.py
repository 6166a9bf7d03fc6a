"""RoundOperandsOnce: Before/Expected for a contraction that rounds an fp32 input to fp16 operands
(priced as worth it), the refusal where the conversions cost less than a pass over the input (a
decode step's 16 rows), matmul's backward at 4096³ (dC rounded once for dA's and dB's dots: 3
kernels) and at a small size with the rewrite forced, checked against TVM and compiled for
sm_90/sm_80."""

import pytest
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import compile_and_check
from matmul import make_matmul
from tir_passes import differentiate
from tir_passes.contracts.rounding_record import roundings
from tir_passes.infra.instrument import without_root_attrs
from tir_passes.passes import round_operands_once
from tir_passes.passes.hoist_allocations import HoistAllocations
from tir_passes.passes.round_operands_once import RoundOperandsOnce
import tvm


@pytest.fixture
def every_rounding_pays(monkeypatch):
    monkeypatch.setattr(round_operands_once, "ROUNDING_SECONDS_PER_CONVERSION", 1.0)


def _contraction(m: int, n: int, k: int):
    @I.ir_module
    class Module:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((m, k), "float32"), W: T.Buffer((n, k), "float16"), Y: T.Buffer((m, n), "float32")):
            for i, j, r in T.grid(m, n, k):
                with T.sblock("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + T.Cast("float32", T.Cast("float16", X[vi, vk])) * T.Cast("float32", W[vj, vk])
    return Module


def test_an_fp32_input_rounded_in_a_contraction_is_rounded_once_before_it(every_rounding_pays):
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((8, 16), "float32"), W: T.Buffer((12, 16), "float16"), Y: T.Buffer((8, 12), "float32")):
            with T.sblock("root"):
                X_float16 = T.sblock_alloc_buffer((8, 16), "float16")
                for i0, i1 in T.grid(8, 16):
                    with T.sblock("X_float16_rounding"):
                        v0, v1 = T.axis.remap("SS", [i0, i1])
                        X_float16[v0, v1] = T.Cast("float16", X[v0, v1])
                for i, j, r in T.grid(8, 12, 16):
                    with T.sblock("Y"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                        T.reads(W[vj, vk], X_float16[vi, vk])
                        T.writes(Y[vi, vj])
                        with T.init():
                            Y[vi, vj] = T.float32(0)
                        Y[vi, vj] = Y[vi, vj] + T.Cast("float32", X_float16[vi, vk]) * T.Cast("float32", W[vj, vk])

    before = _contraction(8, 12, 16)

    after = RoundOperandsOnce()(HoistAllocations()(before))
    tvm.ir.assert_structural_equal(without_root_attrs(after), without_root_attrs(HoistAllocations()(Expected)))
    (plan,) = roundings(after["main"])
    assert plan.taken and (plan.buffer, plan.dtype, plan.rounded, plan.readers) == ("X", "float16", "X_float16", ("Y",))
    assert plan.conversions == 8 * 16 * 1   # X's elements, read by one program along Y's 12 columns


def test_a_decode_steps_activations_are_left_to_the_contraction():
    after = RoundOperandsOnce()(HoistAllocations()(_contraction(16, 4096, 4096)))
    (plan,) = roundings(after["main"])
    assert not plan.taken and plan.rounded == "" and "cost less than a pass over X" in plan.reason
    assert plan.saved_seconds < plan.cost_seconds


def test_matmul_backward_rounds_its_gradient_once_for_both_dots():
    from triton_codegen import compile

    kernel = compile(differentiate(make_matmul(4096, 4096, 4096), ["A", "B"]), verify=False)
    (plan,) = roundings(kernel.tir["main"])
    assert plan.taken and plan.buffer == "d_C" and len(plan.readers) == 2 and plan.saved_seconds > 2 * plan.cost_seconds
    assert len(kernel.program.kernels) == 3
    dots = [k for k in kernel.program.kernels if "tl.dot" in kernel.source.split(f"def {k.name}(")[1].split("@triton")[0]]
    assert len(dots) == 2 and all("d_C_ptr" not in kernel.source.split(f"def {k.name}(")[1].split(")")[0] for k in dots)


def test_the_rounded_operand_matches_tvm_and_compiles_for_both_archs(every_rounding_pays):
    backward = differentiate(make_matmul(67, 48, 40), ["A", "B"])
    kernel = compile_and_check(backward)
    assert len(kernel.program.kernels) == 3 and roundings(kernel.tir["main"])[0].taken


def test_symbolic_extents_are_not_priced_and_left_alone(every_rounding_pays):
    @I.ir_module
    class Module:
        @T.prim_func(s_tir=True)
        def main(x: T.handle, W: T.Buffer((12, 16), "float16"), y: T.handle):
            m = T.int32()
            X = T.match_buffer(x, (m, 16), "float32")
            Y = T.match_buffer(y, (m, 12), "float32")
            for i, j, r in T.grid(m, 12, 16):
                with T.sblock("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + T.Cast("float32", T.Cast("float16", X[vi, vk])) * T.Cast("float32", W[vj, vk])

    before = HoistAllocations()(Module)
    after = RoundOperandsOnce()(before)
    (plan,) = roundings(after["main"])
    assert not plan.taken and plan.reason == "symbolic extents: not priced"
    tvm.ir.assert_structural_equal(without_root_attrs(after), without_root_attrs(before))


def test_the_numerics_copy_replays_the_full_size_rounding():
    """A copy small enough to check would never pay for the rounding by the price; it replays the
    full-size program's decision (rounding_record.replaying), so `compile()` verifies the 3-kernel
    program it ships, with no "decides differently" warning."""
    import warnings

    from triton_codegen import compile

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = compile(differentiate(make_matmul(4096, 4096, 4096), ["A", "B"]))
    assert len(kernel.program.kernels) == 3 and kernel.check_report.ok


def test_int64_shapes_get_a_rounding_nest_of_their_index_type(every_rounding_pays):
    @I.ir_module
    class Module:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((T.int64(8), T.int64(16)), "float32"), W: T.Buffer((T.int64(12), T.int64(16)), "float16"),
                 Y: T.Buffer((T.int64(8), T.int64(12)), "float32")):
            for i, j, r in T.grid(T.int64(8), T.int64(12), T.int64(16)):
                with T.sblock("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + T.Cast("float32", T.Cast("float16", X[vi, vk])) * T.Cast("float32", W[vj, vk])

    after = RoundOperandsOnce()(HoistAllocations()(Module))
    tvm.s_tir.analysis.verify_well_formed(after)
    assert roundings(after["main"])[0].taken


def test_other_gpus_keep_the_rounding_in_the_dots_and_a_bad_record_is_named(every_rounding_pays):
    from tir_passes.contracts.rounding_record import ROUNDING_KEY
    from tir_passes.contracts.tile_contract import ContractError
    from tir_passes.infra.pass_util import replace_block, root_block, with_root_block

    after = RoundOperandsOnce("A100")(HoistAllocations()(_contraction(8, 12, 16)))
    (plan,) = roundings(after["main"])
    assert not plan.taken and "not measured on sm_80" in plan.reason
    func = after["main"]
    broken = with_root_block(func, replace_block(root_block(func), annotations={
        ROUNDING_KEY: [{"taken": True, "reason": "hand-edited"}]}))
    with pytest.raises(ContractError, match="buffer, dtype, rounded"):
        roundings(broken)
