"""The hardware model's terms beyond bytes and dot flops (issue 17): a causal window's tiles averaged
over the programs, the CUDA-core work of the tile summary (vector_work.py) and its overlap, the
tf32 conversions, the latency a read-once stream waits."""

import pytest

from attention import make_attention
from attention_causal import make_causal_attention
from linear import make_linear
from quantize_int8 import make_quantize_int8
from softmax import make_softmax
from lowering.tile_ir import Binary, Const, Loop, Store, Unary
from triton_codegen import compile
from tir_passes.contracts.gemm_price import TILE_SECONDS
from triton_codegen.hardware_model import (LAUNCH_SECONDS, MEMORY_LATENCY_SECONDS, STREAM_LATENCY_SECONDS, overlapped,
                                           predict, program_vector_seconds, summarize)
from triton_codegen.vector_work import unit_rates, work_sites
from tir_passes.contracts.gpu_specs import gpu_spec

H200 = gpu_spec("H200")


def _only(program):
    summary = summarize(program)
    kernel = program.kernels[0]
    config = dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages)
    if kernel.group_m:
        config["GROUP_M"] = kernel.group_m
    return summary[kernel.name], config


def test_a_causal_window_is_priced_by_the_tiles_its_programs_walk():
    causal, config = _only(compile(make_causal_attention(1, 1, 256, 16), verify=False).program)
    full, full_config = _only(compile(make_attention(1, 1, 256, 16), verify=False).program)
    config = {**config, "BLOCK_I": 64, "BLOCK_J": 64}
    full_config = {**full_config, "BLOCK_I": 64, "BLOCK_J": 64}
    # program i walks i + 1 of the 4 key tiles: 2.5 on average, against 4 without the window
    ratio = predict(causal, config, H200, {}).dot_flops / predict(full, full_config, H200, {}).dot_flops
    assert ratio == pytest.approx(2.5 / 4)


def test_the_window_is_priced_alike_when_the_mask_is_written_inline():
    from attention_forms import make_attention_inline_mask

    causal, config = _only(compile(make_causal_attention(1, 2, 256, 16), verify=False).program)
    inline, inline_config = _only(compile(make_attention_inline_mask(1, 2, 256, 16), verify=False).program)
    assert config == inline_config
    assert predict(inline, config, H200, {}).dot_flops == predict(causal, config, H200, {}).dot_flops


def test_a_trip_count_of_the_programs_position_is_averaged_over_the_grid():
    kernel = {"grid": [8], "grid_vars": ["p"], "scalars": {"n": ("+", "p", 1)},
              "dims": [{"axis": "x", "block": "BLOCK", "extent": 64}], "dots": [], "work": [],
              "accesses": [{"buffer": "A", "kind": "load", "bytes": 4, "axes": ["x"], "trips": ["n"]}],
              "buffers": {"A": {"bytes": 4, "shape": [10 ** 9]}}}
    prediction = predict(kernel, {"BLOCK": 64, "num_warps": 4, "num_stages": 2}, H200, {})
    assert prediction.tile_bytes == pytest.approx(8 * 64 * 4 * 4.5)   # programs 0..7 walk 1..8 tiles


def test_identical_subexpressions_of_a_loop_body_count_once():
    x = Const(1.0, "float32", ("i",))
    exp = Unary("exp", x, "float32", ("i",))
    body = (Loop("r", Const(0, "int32"), Const(4, "int32"),
                 (Store("Y", Const(0, "int32"), Binary("+", exp, Unary("exp", x, "float32", ("i",)), "float32", ("i",)),
                        ()),)),)
    sites = {site["unit"]: site for site in work_sites(body, lambda loop, _: 4, {})}
    assert sites["special"]["ops"] == 1 and sites["special"]["trips"] == [4]
    assert sites["alu"]["ops"] == 2   # the sum, and the exponential's multiply by log2(e)


def test_softmax_and_quantize_record_their_quarter_rate_work():
    softmax, _ = _only(compile(make_softmax(64, 256, "float16"), verify=False).program)
    quantize, config = _only(compile(make_quantize_int8(64, 256), verify=False).program)
    row = lambda summary, unit: sum(s["ops"] for s in summary["work"] if s["unit"] == unit and s["axes"])  # noqa: E731
    assert row(softmax, "special") >= 1   # an exponential an element
    assert row(quantize, "convert") >= 3  # rounding (two floors) and the float-to-int8 conversion
    assert row(quantize, "special") >= 1  # the division's reciprocal


def test_cuda_core_work_past_the_memory_time_bounds_the_kernel():
    quantize, config = _only(compile(make_quantize_int8(16384, 8192), verify=False).program)
    prediction = predict(quantize, config, H200, {})
    assert prediction.bound == "cuda cores"
    dram = prediction.dram_bytes / (H200.copy_bandwidth_gbs * 1e9)
    assert prediction.vector_seconds > dram
    # the rows' loads hide behind the other resident programs' rounding, not behind their own
    assert prediction.streams == prediction.occupancy.programs_per_sm > 1
    assert prediction.seconds == pytest.approx(5e-6 + prediction.vector_seconds + dram / prediction.streams)


def test_overlap_hides_the_smaller_term_behind_the_other_resident_programs_only():
    assert overlapped(10.0, 4.0, 1) == 14.0   # one stream: the softmax waits for its dot and back
    assert overlapped(10.0, 4.0, 2) == 12.0
    assert overlapped(4.0, 10.0, 4) == 11.0


def test_tf32_dots_convert_their_fp32_operands_each_step():
    kernel = {"dims": [{"axis": a, "block": "B" + a} for a in "mnk"], "work": [],
              "dots": [{"m": "m", "n": "n", "k": "k", "dtype": "float32", "precision": "tf32", "trips": [8]}]}
    config = {"Bm": 64, "Bn": 32, "Bk": 16, "num_warps": 4}
    per_sm = unit_rates(H200)["convert"] / H200.multiprocessors
    assert program_vector_seconds(kernel, config, H200) == pytest.approx((64 + 32) * 16 * 8 / per_sm)
    ieee = {**kernel, "dots": [{**kernel["dots"][0], "dtype": "float16", "precision": "ieee"}]}
    assert program_vector_seconds(ieee, config, H200) == 0


def test_a_read_once_stream_waits_for_dram_on_few_programs():
    summary, config = _only(compile(make_linear(16, 4096, 4096), verify=False).program)
    config = {**config, "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 4, "num_warps": 4}
    prediction = predict(summary, config, H200, {})
    programs = 4096 // 64
    assert prediction.programs == programs and prediction.bound == "streaming"
    step = 3 * (16 + 64) * 128 * 2            # (stages - 1) K steps in flight
    program_bytes = (16 + 64) * 4096 * 2
    # one program an SM: Little's law over its own bytes in flight, at DRAM's latency for the
    # weights read once and L2's for X, which every program reads; then the tile's fill and drain
    lower = program_bytes / (step / MEMORY_LATENCY_SECONDS) + TILE_SECONDS
    upper = program_bytes / (step / STREAM_LATENCY_SECONDS) + TILE_SECONDS
    streamed = prediction.seconds - LAUNCH_SECONDS - prediction.vector_seconds / prediction.streams
    assert lower < streamed < upper
    assert streamed > 2 * prediction.dram_bytes / (H200.copy_bandwidth_gbs * 1e9)   # far from the DRAM roofline


def test_the_check_prices_a_run_only_with_the_plan_it_measured():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import model_check

    kernel = {"grid": [132], "dims": [{"axis": "x", "block": "BLOCK", "extent": 1024}], "dots": [], "work": [],
              "accesses": [{"buffer": "A", "kind": "load", "bytes": 4, "axes": ["x"], "trips": []}],
              "buffers": {"A": {"bytes": 4, "shape": [132 * 1024]}}}
    config = {"BLOCK": 1024, "num_warps": 4, "num_stages": 2}
    plans = {"copy": {"sizes": {}, "kernels": {"k0": {"summary": kernel, "config": config, "resources": None}}}}
    row = dict(source="s.json", day="2026-12-02", case="copy", variant="suite", us=10.0, configs=None, kernels=1)
    us, bound = model_check.predict_row(row, plans, H200)
    assert us == pytest.approx(predict(kernel, config, H200, {}).seconds * 1e6) and bound == "dram"
    assert model_check.predict_row({**row, "kernels": 2}, plans, H200) is None   # its plan has changed since
    priced, counts = model_check.table([row], plans)
    assert counts["2026-12-02"] == [0, 1] and counts["2026-12-02 suite"] == [0, 1]   # 10 µs against about 5
    # each row on the GPU it ran on: a suite run's meta names it, a sweep's file name does, else the H200
    on_h100 = {**row, "device": "NVIDIA H100 80GB HBM3"}
    assert model_check.row_gpu(on_h100).name == "H100" and model_check.row_gpu(row).name == "H200"
    assert model_check.row_gpu({"source": "2026-12-07-h100-sweep.json"}).name == "H100"
    assert model_check.row_gpu({**row, "device": "NVIDIA A100-SXM4-80GB"}).name == "H200"   # plans are sm_90's
    large = {**kernel, "grid": [132 * 512], "buffers": {"A": {"bytes": 4, "shape": [132 * 512 * 1024]}}}
    plans["copy"]["kernels"]["k0"]["summary"] = large
    (on_h200_row,), _ = model_check.table([row], plans)
    (on_h100_row,), _ = model_check.table([on_h100], plans)
    assert on_h100_row[4] == pytest.approx(predict(large, config, gpu_spec("H100"), {}).seconds * 1e6)
    assert on_h100_row[4] > 1.3 * on_h200_row[4]   # 270 MB read: the H100 copies 0.7 as fast as the H200
