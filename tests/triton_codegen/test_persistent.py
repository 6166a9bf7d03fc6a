"""The persistent tile scheduler: a contraction over more tiles than SMs is written as a loop over
its tiles (GROUP_M order), the launch sizes the grid (PROGRAMS_PER_SM, a tuner setting), and every
grid computes the same product (interpreter: two stand-in SMs), compiled ahead of time for sm_90
and sm_80."""

import dataclasses

import numpy as np
import pytest
import torch

from helpers import compile_and_check
from matmul import make_matmul
from tir_passes.contracts import gpu_specs
from tir_passes.contracts.tile_contract import ContractError, KernelTile, _kernel_from, _kernel_value, kernel_tile
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.tiling import tile_function
from triton_codegen.gpu_timing import assigned
from triton_codegen.hardware_model import predict, summarize
from triton_codegen.search_space import config_problem, kernel_space


@pytest.fixture
def two_sm_gpu(monkeypatch):
    """An sm_80 part with two SMs, so a small matmul has more tiles than SMs."""
    spec = dataclasses.replace(gpu_specs.GPUS["A100"], name="TWOSM", multiprocessors=2)
    monkeypatch.setitem(gpu_specs.GPUS, "TWOSM", spec)
    return spec


def _default(kernel):
    return dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages, GROUP_M=kernel.group_m)


def test_a_tile_loop_computes_the_product_at_every_grid(two_sm_gpu):
    compiled = compile_and_check(make_matmul(300, 100, 40), gpu="TWOSM")   # 3 tiles of 128x128 on 2 SMs
    kernel = compiled.program.kernels[0]
    assert kernel.persistent and kernel.programs_per_sm == 0
    assert "in tl.range(tl.program_id(0), tiles, tl.num_programs(0)):" in compiled.source
    assert "persistent (by default a program a tile)" in compiled.tile_ir
    module = compiled.module(interpret=True)
    a, b = torch.randn(300, 40).half(), torch.randn(40, 100).half()
    expected = a.float().numpy() @ b.float().numpy()
    for programs in (0, 1, 2):   # a program a tile; 2 programs walking 3 tiles; 3 (at most the tiles)
        c = torch.full((300, 100), float("nan"))
        with assigned(module, {kernel.name: {**_default(kernel), "PROGRAMS_PER_SM": programs}}):
            module.run(a, b, c)
        np.testing.assert_allclose(c.numpy(), expected, rtol=1e-2, atol=1e-2, err_msg=str(programs))

    summary = summarize(compiled.program)[kernel.name]
    space = kernel_space(kernel.name, summary, _default(kernel), two_sm_gpu, {})
    assert {c.get("PROGRAMS_PER_SM") for c in space.configs[1:]} >= {0, 1}
    walked = predict(summary, {**_default(kernel), "PROGRAMS_PER_SM": 1}, two_sm_gpu, {})
    assert walked.seconds < predict(summary, _default(kernel), two_sm_gpu, {}).seconds
    assert config_problem(summary, _default(kernel), {**_default(kernel), "PROGRAMS_PER_SM": -1}, {})


def test_few_tiles_or_no_dot_stay_a_program_a_tile():
    small = compile_and_check(make_matmul(67, 45, 33), aot=False)
    kernel = small.program.kernels[0]
    assert not kernel.persistent and "tl.num_programs" not in small.source
    summary = summarize(small.program)[kernel.name]
    assert "PROGRAMS_PER_SM is a setting of persistent kernels only" in config_problem(
        summary, _default(kernel), {**_default(kernel), "PROGRAMS_PER_SM": 1}, {})


def test_a_large_gemm_is_persistent_with_a_program_a_tile_by_default():
    # the H200 sweep measured no gain from one program an SM at the tiles the model picks
    tiled = tile_function(make_matmul(3000, 5000, 1000), gpu_specs.gpu_spec("H200"))
    record = kernel_tile(top_level_statements(tiled)[0])
    assert record.persistent and record.programs_per_sm == 0


def test_the_persistent_record_round_trips_and_rejects_nonsense():
    record = KernelTile(8, 3, 8, persistent=True, programs_per_sm=1)
    assert _kernel_from(_kernel_value(record), "here") == record
    with pytest.raises(ContractError, match="needs group_m"):
        _kernel_from({"num_warps": 4, "persistent": {"programs_per_sm": 0}}, "here")
    with pytest.raises(ContractError, match="non-negative"):
        _kernel_from({"num_warps": 4, "group_m": 8, "persistent": {"programs_per_sm": -1}}, "here")
