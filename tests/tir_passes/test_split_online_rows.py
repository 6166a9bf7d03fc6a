"""SplitOnlineRows: an online softmax's long rows, too few to fill the GPU, split into chunks (partial
statistics on a chunks × row tiles grid, their combination, the readers on a grid of their own);
the same program written otherwise keeps the decision; rows that fill the GPU are left whole."""

import dataclasses

import numpy as np
import pytest
import torch
from tvm.script import tirx as T

from attention import make_attention
from attention_scores import make_attention_scores
from helpers import compile_and_check
from softmax import make_softmax
from tir_passes.contracts import gpu_specs
from tir_passes.contracts.online_contract import SPLIT_DECISIONS_KEY, online_shift, online_split
from tir_passes.infra.pass_util import root_block, top_level_statements
from tir_passes.analyses.nest import blocks_under
from tir_passes.passes import online_split_sizes
from tir_passes.pipeline import default_pipeline, run_pipeline
from triton_codegen import compile

FEW_SMS = "FOURSM"


@pytest.fixture
def four_sm_gpu(monkeypatch):
    """An sm_90 part with four multiprocessors, where a kernel costs nothing beyond its work: a few
    rows of these small programs already leave it idle, and a split pays."""
    spec = dataclasses.replace(gpu_specs.GPUS["H200"], name=FEW_SMS, multiprocessors=4)
    monkeypatch.setitem(gpu_specs.GPUS, FEW_SMS, spec)
    monkeypatch.setattr(online_split_sizes, "ONLINE_SPLIT_KERNEL_SECONDS", 0.0)
    return spec


def _split_stage(func, gpu=FEW_SMS):
    """The program after SplitOnlineRows."""
    import tvm

    result = run_pipeline(tvm.IRModule({"main": func}), default_pipeline(gpu), stop_after="SplitOnlineRows")
    return result.module["main"]


def _marks(func):
    return [(b.name_hint, online_split(b)) for b in blocks_under(func.body) if online_split(b) is not None]


def _scores_scale_outside(M, N, D):
    """softmax(Q·Kᵀ·s) with the scale applied to the scores (not inside the exponent) and the max
    taken over the scaled scores: the same softmax."""
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def scores_scaled(Q: T.Buffer((M, D), "float16"), K: T.Buffer((N, D), "float16"), P: T.Buffer((M, N), "float32")):
        S = T.sblock_alloc_buffer((M, N), "float32")
        row_max = T.sblock_alloc_buffer((M,), "float32")
        row_sum = T.sblock_alloc_buffer((M,), "float32")
        for i, j, d in T.grid(M, N, D):
            with T.sblock("scores"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    S[vi, vj] = T.float32(0)
                S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd]) * T.float32(scale)
        for i, j in T.grid(M, N):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.min_value("float32")
                row_max[vi] = T.max(row_max[vi], S[vi, vj])
        for i, j in T.grid(M, N):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + T.exp(S[vi, vj] - row_max[vi])
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                P[vi, vj] = T.exp(S[vi, vj] - row_max[vi]) / row_sum[vi]

    return scores_scaled


def _scores_causal(M, N, D):
    """The scores with a causal mask (-inf above the diagonal): some chunks are wholly masked for some rows."""
    scale = 1.0 / D**0.5

    @T.prim_func(s_tir=True)
    def scores_causal(Q: T.Buffer((M, D), "float16"), K: T.Buffer((N, D), "float16"), P: T.Buffer((M, N), "float32")):
        S = T.sblock_alloc_buffer((M, N), "float32")
        row_max = T.sblock_alloc_buffer((M,), "float32")
        row_sum = T.sblock_alloc_buffer((M,), "float32")
        for i, j, d in T.grid(M, N, D):
            with T.sblock("scores"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    S[vi, vj] = T.float32(0)
                S[vi, vj] = S[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
        for i, j in T.grid(M, N):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.min_value("float32")
                row_max[vi] = T.max(row_max[vi], T.Select(vj <= vi, S[vi, vj], T.float32("-inf")))
        for i, j in T.grid(M, N):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + T.exp(
                    (T.Select(vj <= vi, S[vi, vj], T.float32("-inf")) - row_max[vi]) * T.float32(scale))
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                P[vi, vj] = T.exp((T.Select(vj <= vi, S[vi, vj], T.float32("-inf")) - row_max[vi])
                                  * T.float32(scale)) / row_sum[vi]

    return scores_causal


def test_scores_over_few_rows_split_into_chunks(four_sm_gpu):
    """Before: one nest over the rows (stats walk, then the store walk). Expected: the chunks' stats
    (4 of 768 keys), their combination, the store; the decision typed on the max block."""
    func = _split_stage(make_attention_scores(37, 3072, 32))
    statements = top_level_statements(func)
    assert len(statements) == 3
    assert _marks(func) == [("row_max", online_split(next(b for b in blocks_under(statements[0])
                                                          if b.name_hint == "row_max")))]
    mark = _marks(func)[0][1]
    assert (mark.splits, mark.chunk, mark.combined) == (4, 768, "row_max")
    assert [int(statements[0].extent), int(statements[0].body.extent), int(statements[0].body.body.extent)] == \
        [4, 37, 768]
    shift = online_shift(next(b for b in blocks_under(statements[0]) if b.name_hint == "row_max"))
    assert (shift.shift, shift.previous) == ("row_max_part", "row_max_prev_part")
    assert [b.name_hint for b in blocks_under(statements[1])] == ["row_max_combine", "row_sum_combine"]
    assert "normalize" in [b.name_hint for b in blocks_under(statements[2])]
    decisions = [str(d) for d in root_block(func).annotations[SPLIT_DECISIONS_KEY]]
    assert decisions[0].startswith("row_max: split 4 ways over j (chunks of 768 of 3072)")


def test_rows_that_fill_the_gpu_stay_whole():
    """On the H200, 65536 rows are 512 row tiles of 128: two waves and more on 132 multiprocessors."""
    func = _split_stage(make_attention_scores(65536, 1024, 16), gpu="H200")
    assert _marks(func) == []
    decisions = [str(d) for d in root_block(func).annotations[SPLIT_DECISIONS_KEY]]
    assert "not split" in decisions[0] and "no split pays" in decisions[0]


def test_the_price_splits_where_the_walk_outweighs_two_more_kernels():
    """On the H200 the suite's softmax(Q·Kᵀ) 4096×4096×128 is priced 46.7 µs unsplit (128 programs of 32
    rows, one a multiprocessor: their exponentials and dots add to their streaming) against 33.3 split 8
    ways (256 statistics programs, two a multiprocessor, the store on its own grid and two more kernels
    at 4 µs each); 4 ways (128 programs, one each) is priced 42.3: 8. Over 65536 keys (1024 rows): 32
    chunks of 2048, 256 programs. A softmax over 8 rows of 2^20: 32 chunks."""
    scores = root_block(_split_stage(make_attention_scores(4096, 4096, 128), gpu="H200"))
    decision = str(scores.annotations[SPLIT_DECISIONS_KEY][0])
    assert decision.startswith("row_max: split 8 ways over j (chunks of 512 of 4096)")
    assert "(33.3 us by the price, 46.7 us unsplit)" in decision
    long_keys = _split_stage(make_attention_scores(1024, 65536, 128), gpu="H200")
    assert [(m.splits, m.chunk) for _, m in _marks(long_keys)] == [(32, 2048)]
    long_rows = _split_stage(make_softmax(8, 1 << 20), gpu="H200")
    assert [m.splits for _, m in _marks(long_rows)] == [32]


def test_a_lone_programs_compute_adds_to_its_streaming_and_several_overlap_it():
    """The walk's price: stream + compute where a multiprocessor holds one program, max of the two where it
    holds two; a GPU without the multi-function unit's figure and a walk without dots price no compute."""
    h200 = gpu_specs.gpu_spec("H200")
    walk = online_split_sizes.OnlineRow(programs=h200.multiprocessors, rows=32, row=4096, key_bytes=256,
                                        element_bytes=0, out_bytes=0, walks=2, in_flight=131072, dot_flops=256,
                                        dot_tflops=h200.fp16_tensor_tflops)
    bare = dataclasses.replace(h200, special_function_tops=None)
    no_dots = dataclasses.replace(walk, dot_flops=0)
    stream = online_split_sizes.online_unsplit_seconds(bare, no_dots)
    lone = online_split_sizes.online_unsplit_seconds(h200, walk)
    assert stream > 0 and lone > stream
    compute = lone - stream   # one program each: the two add
    paired = online_split_sizes.online_unsplit_seconds(h200, dataclasses.replace(walk, programs=2 * walk.programs))
    assert paired == pytest.approx(max(2 * stream, 2 * compute))


def test_a_rewritten_program_keeps_the_decision(four_sm_gpu):
    """The scale inside the scores (a product in the contraction) instead of in the exponent: the same split."""
    plain = _marks(_split_stage(make_attention_scores(37, 3072, 32)))
    scaled = _marks(_split_stage(_scores_scale_outside(37, 3072, 32)))
    assert [m for _, m in scaled] == [m for _, m in plain] and plain


def test_a_causal_mask_splits_and_keeps_its_numbers(four_sm_gpu):
    """A chunk whose first key is masked is masked whole for that row (leading_element.py's proof
    holds at any chunk start): split, and every pass's numerics (TVM's build of each stage against
    the input, on random inputs) agree; the 37 rows see only the first chunk's keys."""
    func = _scores_causal(37, 3072, 32)
    assert [m.splits for _, m in _marks(_split_stage(func))] == [4]
    kernel = compile(func, gpu=FEW_SMS, verify=True)
    assert len(kernel.program.kernels) == 3


def test_attention_keeps_its_rows_whole(four_sm_gpu):
    """Attention's weighted sum keeps a head dimension per row: splitting it is flash-decoding, not this."""
    func = _split_stage(make_attention(1, 1, 1536, 16))
    assert _marks(func) == []
    decisions = [str(d) for d in root_block(func).annotations[SPLIT_DECISIONS_KEY]]
    assert ": not split: " in decisions[0]


def test_split_scores_compute_softmax_in_the_interpreter(four_sm_gpu):
    """Every per-pass check, the kernels in the interpreter against TVM's build, AOT for sm_90 and sm_80."""
    kernel = compile_and_check(make_attention_scores(37, 3072, 32), gpu=FEW_SMS)
    assert len(kernel.program.kernels) == 3
    q, k = torch.randn(37, 32).half(), torch.randn(3072, 32).half()
    p = torch.full((37, 3072), float("nan"))
    kernel.module(interpret=True).run(q, k, p)
    expected = torch.softmax(q.double() @ k.double().T / 32**0.5, dim=1)
    np.testing.assert_allclose(p.numpy(), expected.numpy(), rtol=1e-4, atol=1e-6)


def test_a_long_plain_softmax_over_few_rows_splits(four_sm_gpu):
    """softmax(X) over 3 rows of 20480 (online: longer than one tile): split 4 ways, the restarting
    sums combined; a row whose first half is 1000 below its second (chunk maxima far apart) too."""
    kernel = compile(make_softmax(3, 20480), gpu=FEW_SMS, verify=False)
    assert len(kernel.program.kernels) == 3
    x = torch.randn(3, 20480)
    x[1, :10240] -= 1000.0
    out = torch.full((3, 20480), float("nan"))
    kernel.module(interpret=True).run(x, out)
    np.testing.assert_allclose(out.numpy(), torch.softmax(x.double(), dim=1).numpy(), rtol=1e-5, atol=1e-9)


def test_deterministic_compiles_split_nothing(four_sm_gpu):
    kernel = compile(make_attention_scores(37, 3072, 32), gpu=FEW_SMS, verify=False, deterministic=True)
    assert len(kernel.program.kernels) == 1
