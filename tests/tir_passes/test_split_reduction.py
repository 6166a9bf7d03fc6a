"""SplitReduction (split-K): which contractions are split, the two kernels it leads to, and that
they compute what TVM computes (interpreter, AOT for sm_90 and sm_80)."""

import os
import sys

import pytest
from tvm.script import tirx as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

from linear import make_linear  # noqa: E402
from matmul import make_matmul  # noqa: E402

from tests.helpers import compile_and_check  # noqa: E402
from tir_passes.contracts.gpu_specs import gpu_spec  # noqa: E402
from tir_passes.passes.hoist_allocations import hoist_allocations  # noqa: E402
from tir_passes.analyses.nest import blocks_under  # noqa: E402
from tir_passes.passes.split_reduction import split_reduction  # noqa: E402
from tir_passes.contracts.tile_contract import ContractError, split_mark  # noqa: E402
from tir_passes.passes.tile_sizes import split_k_factor, split_price  # noqa: E402

H200 = gpu_spec("H200")


def _marks(func):
    return [mark for mark in (split_mark(b) for b in blocks_under(func.body)) if mark is not None]


def _split(func):
    return split_reduction(hoist_allocations(func), H200)


LONG = (16, 128, 32768)   # one 16 x 128 tile over 32768 steps: one program would stream 9 MiB alone


def test_few_tiles_and_a_long_reduction_are_split():
    marks = _marks(_split(make_linear(*LONG)))
    assert len(marks) == 1 and marks[0].of == "acc" and marks[0].splits > 1


def test_tiles_that_fill_the_gpu_are_not_split():
    func = hoist_allocations(make_matmul(3000, 5000, 1000))
    assert split_reduction(func, H200).same_as(func)


def test_a_short_reduction_is_not_split():
    # K = 128 is two steps of BLOCK_K: a split would leave each slice no pipeline
    func = hoist_allocations(make_linear(16, 256, 128))
    assert split_reduction(func, H200).same_as(func)


def test_the_decision_survives_reordered_loops_and_renamed_buffers():
    @T.prim_func(s_tir=True)
    def reordered(A: T.Buffer((16, 32768), "float16"), Wt: T.Buffer((128, 32768), "float16"),
                  Out: T.Buffer((16, 128), "float32")):
        for n, m, r in T.grid(128, 16, 32768):
            with T.sblock("dot"):
                vn, vm, vr = T.axis.remap("SSR", [n, m, r])
                with T.init():
                    Out[vm, vn] = T.float32(0)
                Out[vm, vn] = Out[vm, vn] + T.Cast("float32", A[vm, vr]) * T.Cast("float32", Wt[vn, vr])

    expected = split_k_factor(H200, "float16", 4, {"M": 16, "N": 128, "K": 32768}).splits
    assert expected > 1
    assert [m.splits for m in _marks(_split(reordered))] == [expected]


def test_fp16_accumulators_are_not_split():
    # partials must be float32: an fp16 accumulator is left as it is
    func = hoist_allocations(make_matmul(16, 128, 32768, "float16", "float16"))
    assert split_reduction(func, H200).same_as(func)


def test_the_price_prefers_a_split_only_where_programs_are_few():
    long = dict(zip("MNK", LONG))
    assert split_k_factor(H200, "float16", 2, long).splits > 1
    unsplit, split = (split_price(H200, "float16", 2, long, splits) for splits in (1, 4))
    assert split.programs == 4 * unsplit.programs
    # a decode step's 32 tiles: a split's second kernel costs more than it hides (measured, tile_sizes)
    assert split_k_factor(H200, "float16", 2, {"M": 16, "N": 4096, "K": 4096}).splits == 1
    assert split_k_factor(H200, "float16", 4, {"M": 4096, "N": 4096, "K": 4096}).splits == 1
    assert split_k_factor(H200, "float16", 4, {"M": None, "N": 4096, "K": 4096}).splits == 1


def test_a_malformed_split_mark_is_a_contract_error():
    func = _split(make_linear(*LONG))
    block = next(b for b in blocks_under(func.body) if split_mark(b) is not None)
    from tir_passes.infra.pass_util import replace_block

    broken = replace_block(block, annotations={"tile.split": {"splits": 1, "of": "acc"}})
    with pytest.raises(ContractError, match="at least 2"):
        split_mark(broken)


def test_split_linear_computes_what_tvm_computes():
    kernel = compile_and_check(make_linear(*LONG))
    assert len(kernel.program.kernels) == 2   # partials, then their sum fused with the cast
    assert [s.name for s in kernel.program.scratch] == ["acc.rf"]   # TVM names the partials
    assert "atomic" not in kernel.source


def test_a_batch_that_fills_the_gpu_is_not_split():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from batch_matmul import make_batch_matmul

    # 8 x 8 tiles per matrix, but 32 matrices: 2048 programs
    func = hoist_allocations(make_batch_matmul(32, 1024, 1024, 256))
    assert split_reduction(func, H200).same_as(func)
    assert split_k_factor(H200, "float16", 4, {"M": 1024, "N": 1024, "K": 4096}, batch=32).splits == 1


def test_attention_weights_are_not_split():
    from attention import make_attention

    # one head of 4096 rows is 32 row tiles: few programs, but P·V's operand is computed (OnlineSoftmax's)
    func = hoist_allocations(make_attention(1, 1, 4096, 64))
    assert split_reduction(func, H200).same_as(func)


def test_the_contract_check_verifies_the_split():
    import tvm
    import tvm_ffi
    from tvm import s_tir

    from tir_passes.infra.pass_util import replace_block
    from tir_passes.checks.verify_contract import check_contract

    func = _split(make_linear(*LONG))
    assert check_contract(tvm.IRModule({"main": func})) == []

    def wrong_count(block):
        if split_mark(block) is None:
            return block
        return replace_block(block, annotations={"tile.split": {"splits": 3, "of": "acc"}})

    def wrong_sum(block):
        if split_mark(block) is None:
            return block
        return replace_block(block, annotations={"tile.split": {"splits": split_mark(block).splits, "of": "Y"}})

    for rewrite, message in ((wrong_count, "spatial axis of the 3 splits"), (wrong_sum, "must sum its partials")):
        broken = func.with_body(tvm_ffi.structural_map(func.body, [(s_tir.SBlock, rewrite)]))
        problems = check_contract(tvm.IRModule({"main": broken}))
        assert len(problems) == 1 and message in problems[0]
