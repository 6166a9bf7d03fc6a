"""Catalogue section 6: injected bugs (M1-M24) are caught, and by the expected check.

Pass mutants run in the pipeline with every check (`run_pipeline(..., checks=CHECKS)`), after
Tiling where the bug is in the tiling, and the test asserts which check names them. Code generator
mutants edit the generated source or an emitter rule, and `check_against_tvm` (the kernel check:
canary margins, random and all-negative data) must report them. Not here: M4, M11, M13, M14, M17,
M20 concern checks that do not exist yet (a dtype verifier, an index-dtype proof, the NaN tier) or
are the NaN semantics' and the fuzzer's (M4, M20: non-square numerics, which every test here uses).
"""

import re

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import ir as I
from tvm.script import tirx as T

from catalogue_programs import floor_div, row_max, scale
from tir_passes import CHECKS, VerificationError, run_pipeline
from tir_passes.passes import buffer_layout
from tir_passes.passes.bank_conflict_free_tiling import padded_layout_problems
from tir_passes.contracts.layout_record import layout_decisions
from tir_passes.passes.buffer_layout import BufferLayout
from tir_passes.infra.frontend import as_module
from tir_passes.infra.pass_util import replace_block, s_tir_pass
from tir_passes.passes.tiling import Tiling
from triton_codegen import check_against_tvm, compile
from triton_codegen.driver import TritonKernel
from triton_codegen import emit_kernel


def _caught_by(func, passes) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        run_pipeline(as_module(func), passes, checks=CHECKS)
    assert caught.value.pass_name == passes[-1].info.name
    return caught.value


def _map_blocks(func, rewrite):
    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rewrite)))


def _set_loop_extent(name: str, extent):
    def edit(func):
        def rewrite(loop):
            if loop.loop_var.name != name:
                return loop
            return tirx.For(loop.loop_var, loop.min, extent(loop), loop.kind, loop.body, loop.thread_binding,
                            loop.annotations)

        return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))

    return edit


def _drop_predicates(func):
    def drop(realize):
        if realize.block.name_hint == "root":
            return realize
        return s_tir.SBlockRealize(realize.iter_values, True, realize.block)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlockRealize, drop)))


def test_m1_split_that_drops_the_tail_predicate_is_caught_by_bounds():
    assert _caught_by(scale, [Tiling(), s_tir_pass("DropTailPredicate", _drop_predicates)]).check == "bounds"


@T.prim_func(s_tir=True)
def long_rows(A: T.Buffer((3, 20000), "float32"), B: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 20000):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_m2_split_with_floor_instead_of_ceil_is_caught_by_the_contract():
    """The serial loop over 4096-wide tiles of 20000 runs 4 times, not 5: the last tile is missing."""
    floor = s_tir_pass("FloorSplit", _set_loop_extent("k_0", lambda loop: tirx.const(20000 // 4096, "int32")))
    error = _caught_by(long_rows, [Tiling(), floor])
    assert error.check == "contract" and "ceil(20000 / 4096)" in error.details


def test_m3_grid_with_floor_instead_of_ceil_is_caught_by_the_contract():
    floor = s_tir_pass("FloorGrid", _set_loop_extent("i_0", lambda loop: loop.extent - 1))
    assert _caught_by(scale, [Tiling(), floor]).check == "contract"


@T.prim_func(s_tir=True)
def relu_of_sum(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37,), "float32")):
    total = T.sblock_alloc_buffer((37,), "float32")
    for i, k in T.grid(37, 45):
        with T.sblock("total"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                total[vi] = T.float32(0)
            total[vi] = total[vi] + A[vi, vk]
    for i in range(37):
        with T.sblock("B"):
            vi = T.axis.spatial(37, i)
            B[vi] = T.max(total[vi], T.float32(0))


def _epilogue_first(func):
    """relu(sum(a)) becomes sum(relu(a))."""
    def rewrite(block):
        store = block.body
        if block.name_hint == "total":
            update = tirx.Add(store.value.a, tirx.Max(store.value.b, tirx.const(0.0, "float32")))
            return replace_block(block, body=tirx.BufferStore(store.buffer, update, store.indices))
        if block.name_hint == "B":
            return replace_block(block, body=tirx.BufferStore(store.buffer, store.value.a, store.indices))
        return block

    return _map_blocks(func, rewrite)


def test_m5_epilogue_moved_before_the_reduction_is_caught_by_numerics():
    assert _caught_by(relu_of_sum, [s_tir_pass("EpilogueFirst", _epilogue_first)]).check == "numerics"


def _drop_block(name: str):
    def edit(func):
        root = func.body.block
        kept = [s for s in root.body.seq if not _writes_block(s, name)]
        body = kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
        return func.with_body(s_tir.SBlockRealize(func.body.iter_values, func.body.predicate,
                                                  replace_block(root, body=body)))

    return edit


def _writes_block(stmt, name: str) -> bool:
    names: list = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: names.append(b.name_hint)))
    return name in names


def test_m6_fusion_that_drops_a_still_used_intermediate_is_caught_by_numerics():
    """The nest that writes `total` is gone; B still reads it."""
    assert _caught_by(relu_of_sum, [s_tir_pass("DropIntermediate", _drop_block("total"))]).check == "numerics"


def _without_init(func):
    return _map_blocks(func, lambda b: replace_block(b, init=None) if b.init is not None else b)


@T.prim_func(s_tir=True)
def row_total(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37,), "float32")):
    for i, k in T.grid(37, 45):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_m7_reduction_without_init_is_caught_by_numerics():
    """The data sets fill outputs with random values first, so accumulating onto them shows."""
    assert _caught_by(row_total, [Tiling(), s_tir_pass("NoInit", _without_init)]).check == "numerics"


def _init_with_zero(func):
    def rewrite(block):
        if block.init is None:
            return block
        return replace_block(block, init=tirx.BufferStore(block.init.buffer, tirx.const(0.0, "float32"),
                                                          block.init.indices))

    return _map_blocks(func, rewrite)


def test_m8_max_reduction_initialised_with_zero_is_caught_by_numerics():
    error = _caught_by(row_max, [Tiling(), s_tir_pass("ZeroInit", _init_with_zero)])
    assert error.check == "numerics" and "all-negative data" in error.details


def _init_inside_the_loop(func):
    """The init runs at every step of the reduction: only the last element survives."""
    def rewrite(block):
        if block.init is None:
            return block
        return replace_block(block, init=None, body=tirx.SeqStmt([block.init, block.body]))

    return _map_blocks(func, rewrite)


def test_m9_init_inside_the_reduction_loop_is_caught():
    """After Tiling, the contract sees the tiled reduction loop carry a dependence it does not name;
    before Tiling, the numerics check sees only the last element survive."""
    assert _caught_by(row_total, [Tiling(), s_tir_pass("InitInLoop", _init_inside_the_loop)]).check == "contract"
    assert _caught_by(row_total, [s_tir_pass("InitInLoop", _init_inside_the_loop)]).check == "numerics"


@I.ir_module
class Transposed:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16, 16), "float32"), Y: T.Buffer((16, 16), "float32")):
        X = T.sblock_alloc_buffer((16, 16), "float32")
        for i, j in T.grid(16, 16):
            with T.sblock("X"):
                vi, vj = T.axis.remap("SS", [i, j])
                X[vj, vi] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(16, 16):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vj, vi] + T.float32(1)


def test_m10_layout_map_that_is_not_a_bijection_is_caught_by_the_layout_proof(monkeypatch):
    folded = tirx.IndexMap.from_func(lambda i, j: (j, i % 8), ndim=2, index_dtype="int32")  # rows i and i + 8 meet
    monkeypatch.setattr(buffer_layout, "permutation_map", lambda permutation: folded)
    [decision] = [d.text for d in layout_decisions(BufferLayout()(Transposed)["main"])]
    assert decision.startswith("X: kept (the permuted layout was not proven")


def test_m12_padding_without_a_larger_allocation_is_caught_by_the_layout_proof():
    assert padded_layout_problems([32, 32], [33, 1], 32 * 32) == ["not proven: map(x) lies in shape (1024,)"]


def _source_mutant(kernel: TritonKernel, pattern: str, replacement: str) -> TritonKernel:
    """The kernel with `pattern` replaced inside the @triton.jit functions only (not the launcher)."""
    head, jit, rest = kernel.source.partition("@triton.jit")
    kernels, configs, tail = rest.partition("CONFIGS = ")
    mutated, count = re.subn(pattern, replacement, kernels)
    assert count, f"the mutation {pattern!r} found nothing to change"
    return TritonKernel(kernel.name, head + jit + mutated + configs + tail, kernel.program, kernel.tir)


@T.prim_func(s_tir=True)
def scale_1d(A: T.Buffer((67,), "float32"), B: T.Buffer((67,), "float32")):
    for i in range(67):
        with T.sblock("B"):
            vi = T.axis.spatial(67, i)
            B[vi] = A[vi] * T.float32(2)


def test_m15_store_mask_with_le_is_caught_by_the_kernel_check():
    mutant = _source_mutant(compile(scale_1d, verify=False), r"< 67\)", "<= 67)")
    report = check_against_tvm(mutant, scale_1d)
    assert any("wrote outside the tensor" in p for p in report.problems), str(report)


def test_m16_masked_lanes_without_the_identity_are_caught_by_the_kernel_check():
    """The max reduction's masked lanes hold 0 (a load's `other`) instead of -inf: wrong on all-negative rows."""
    mutant = _source_mutant(compile(row_max, verify=False), r'float\("-inf"\)', "0.0")
    report = check_against_tvm(mutant, row_max)
    assert any(p.startswith("all-negative data: B") for p in report.problems), str(report)


def test_m18_floordiv_as_truncating_division_is_caught_by_the_kernel_check(monkeypatch):
    monkeypatch.setitem(emit_kernel.BINARY_RULES, "floordiv", emit_kernel.BINARY_RULES["//"])
    monkeypatch.setitem(emit_kernel.BINARY_RULES, "floormod", emit_kernel.BINARY_RULES["%"])
    report = check_against_tvm(compile(floor_div, verify=False), floor_div)
    assert any("elements differ (bit-exact dtype int32)" in p for p in report.problems), str(report)


@T.prim_func(s_tir=True)
def half_sum(A: T.Buffer((3, 40000), "float16"), B: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 40000):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + T.Cast("float32", A[vi, vk])


def test_m19_fp16_accumulator_is_caught_by_the_kernel_check():
    """The accumulator across 4096-wide tiles rounded to fp16 after every tile."""
    mutant = _source_mutant(compile(half_sum, verify=False), r"(acc_\w+) = \((acc_\w+) \+ (\w+)\)",
                            r"\1 = (\2 + \3).to(tl.float16)")
    report = check_against_tvm(mutant, half_sum)
    assert report.problems, str(report)


@tvm.transform.module_pass(opt_level=0, name="MutateInPlace")
def mutate_in_place(mod, ctx):
    mod["main"] = mod["main"].with_attr("my.touched", True)
    return mod


def test_m21_pass_that_mutates_its_input_is_caught_by_purity():
    assert _caught_by(scale, [mutate_in_place]).check == "purity"


def _stray_binding(func):
    """Block B bound to a variable that no loop defines (a loop variable used after its scope)."""
    stray = tirx.Var("i_gone", "int32")

    def bind(realize):
        if realize.block.name_hint != "B":
            return realize
        return s_tir.SBlockRealize([stray] + list(realize.iter_values[1:]), realize.predicate, realize.block)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlockRealize, bind)))


def test_m22_variable_used_after_its_scope_is_caught_by_well_formed():
    error = _caught_by(scale, [s_tir_pass("StrayBinding", _stray_binding)])
    assert error.check == "well_formed" and "i_gone" in error.details


def _int_annotation(func):
    def rewrite(loop):
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                        {**dict(loop.annotations), "my.factor": tirx.const(4, "int32")})

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))


def test_m23_annotation_that_does_not_round_trip_is_caught_by_round_trip():
    assert _caught_by(scale, [s_tir_pass("IntImmAnnotation", _int_annotation)]).check == "round_trip"


@T.prim_func(s_tir=True)
def shift(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            T.where(i < 63)
            B[vi] = A[vi + 1]


def test_m24_fusion_that_loses_a_block_predicate_is_caught_by_bounds():
    assert _caught_by(shift, [s_tir_pass("LosePredicate", _drop_predicates)]).check == "bounds"
