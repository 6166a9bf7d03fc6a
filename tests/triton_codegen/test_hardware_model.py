"""The hardware model: the tile summary's bytes and flops, occupancy, the roofline time, the
resources Triton reports ahead of time, and a search space whose every config computes right."""

import math

import numpy as np
import pytest
import torch

from matmul import make_matmul
from transpose import make_transpose
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.gpu_timing import assigned
from triton_codegen.hardware_model import (LAUNCH_SECONDS, Resources, estimate_resources, occupancy, predict,
                                           runnable, summarize)
from triton_codegen.search_space import kernel_space
from tir_passes.contracts.gpu_specs import gpu_for_device, gpu_spec

H200 = gpu_spec("H200")


def _default(kernel):
    config = dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages)
    if kernel.group_m:
        config["GROUP_M"] = kernel.group_m
    return config


@pytest.fixture(scope="module")
def matmul():
    return compile(make_matmul(67, 45, 33), verify=False)


def test_summary_counts_what_a_matmul_moves(matmul):
    kernel = matmul.program.kernels[0]
    summary = summarize(matmul.program)[kernel.name]
    config = {**_default(kernel), "BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16}
    prediction = predict(summary, config, H200, {})
    programs = math.ceil(67 / 32) * math.ceil(45 / 16)
    assert prediction.programs == programs
    # each input read once, the output written once: tiles re-read from the caches do not count
    assert prediction.dram_bytes == 67 * 33 * 2 + 33 * 45 * 2 + 67 * 45 * 4
    # tile traffic: A's tiles once per column of programs, B's once per row, masked tails excluded
    assert prediction.tile_bytes == pytest.approx(67 * 33 * 2 * math.ceil(45 / 16) + 33 * 45 * 2 * math.ceil(67 / 32)
                                                  + 67 * 45 * 4)
    # the tensor cores compute whole tiles, tails included
    assert prediction.dot_flops == 2 * 32 * 16 * 16 * math.ceil(33 / 16) * programs


def test_a_copy_kernel_is_predicted_at_the_copy_bandwidth():
    program = compile(make_transpose(8192, 8192), verify=False).program
    kernel = program.kernels[0]
    prediction = predict(summarize(program)[kernel.name], _default(kernel), H200, {})
    assert prediction.bound == "dram"
    expected = LAUNCH_SECONDS + 2 * 8192 * 8192 * 4 / (H200.copy_bandwidth_gbs * 1e9)
    # its CUDA-core work (the tiles' index arithmetic) hides behind the other resident programs
    assert prediction.vector_seconds < 0.1 * expected
    assert prediction.seconds == pytest.approx(expected + prediction.vector_seconds / prediction.streams, rel=1e-9)


def test_occupancy_takes_the_tightest_limit():
    # 64 registers x 4 warps: 32 warps' worth of registers; 60 KiB of shared memory: 3 programs
    tight = occupancy(H200, Resources(64, 0, 60 * 1024, True), 4)
    assert (tight.programs_per_sm, tight.limiter) == (3, "shared memory")
    # 128 registers x 8 warps = 32768 registers: two programs
    registers = occupancy(H200, Resources(128, 0, 0, True), 8)
    assert (registers.programs_per_sm, registers.limiter) == (2, "registers")
    assert registers.warps_fraction == 16 / 64
    # the A10G holds 48 warps: three programs of 16
    assert occupancy(gpu_spec("A10G"), Resources(32, 0, 0, True), 16).programs_per_sm == 3


def test_configs_that_cannot_run_are_named():
    assert "shared memory" in runnable(H200, Resources(64, 0, H200.shared_memory_per_block + 1, True), 4)
    assert "spills" in runnable(H200, Resources(255, 16, 0, True), 4)
    assert runnable(H200, Resources(128, 0, 64 * 1024, True), 8) is None


def test_more_occupancy_hides_latency_and_raises_nothing_past_the_roofline(matmul):
    summary = summarize(matmul.program)[matmul.program.kernels[0].name]
    config = _default(matmul.program.kernels[0])
    starved = predict(summary, config, H200, {}, Resources(255, 0, H200.shared_memory_per_block, True))
    fed = predict(summary, config, H200, {}, Resources(64, 0, 16 * 1024, True))
    assert starved.occupancy.programs_per_sm < fed.occupancy.programs_per_sm
    assert starved.seconds >= fed.seconds


def test_the_space_keeps_masks_and_dot_minimums():
    program = compile(make_transpose(256, 192), verify=False).program
    kernel = program.kernels[0]
    summary = summarize(program)[kernel.name]
    space = kernel_space(kernel.name, summary, _default(kernel), H200, {})
    assert space.configs[0] == _default(kernel)
    for dim in summary["dims"]:
        for config in space.configs:
            size = config[dim["block"]]
            assert size >= dim["min"] and size & (size - 1) == 0
            if dim["even"]:
                assert dim["extent"] % size == 0, (dim, config)
    assert len(space.configs) > 4 and space.runnable <= space.legal


def test_every_config_of_the_space_computes_the_matmul(matmul):
    kernel = matmul.program.kernels[0]
    space = kernel_space(kernel.name, summarize(matmul.program)[kernel.name], _default(kernel), H200, {})
    module = matmul.module(interpret=True)
    a = torch.randn(67, 33).half()
    b = torch.randn(33, 45).half()
    expected = a.float().numpy() @ b.float().numpy()
    for config in (space.configs[1], space.configs[len(space.configs) // 2], space.configs[-1]):
        c = torch.full((67, 45), float("nan"))
        with assigned(module, {kernel.name: config}):
            module.run(a, b, c)
        np.testing.assert_allclose(c.numpy(), expected, rtol=1e-2, atol=1e-2, err_msg=str(config))


def test_estimates_prune_only_the_hopeless():
    program = compile(make_matmul(4096, 4096, 4096), verify=False).program
    kernel = program.kernels[0]
    summary = summarize(program)[kernel.name]
    big = {**_default(kernel), "BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 4}
    assert runnable(H200, estimate_resources(summary, big), 4) is not None
    assert runnable(H200, estimate_resources(summary, _default(kernel)), 8) is None


@pytest.mark.aot
def test_ahead_of_time_resources_feed_the_model(matmul):
    """Registers and spills from the sm_90 cubin, specialized as a launch would be."""
    kernel = matmul.program.kernels[0]
    summary = summarize(matmul.program)[kernel.name]
    strides = {"A_stride0": 33, "A_stride1": 1, "B_stride0": 45, "B_stride1": 1, "C_stride0": 45, "C_stride1": 1}
    small = {**_default(kernel), "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}
    result = compile_ahead_of_time(matmul.module_file(), kernel, small, 90, strides)
    assert 0 < result.registers <= 255 and result.spilled_bytes == 0 and result.shared_bytes > 0
    resources = Resources(result.registers, result.spilled_bytes, result.shared_bytes, True)
    prediction = predict(summary, small, H200, {}, resources)
    assert prediction.resources.measured and prediction.occupancy.programs_per_sm >= 1


def test_device_names_find_their_spec():
    assert gpu_for_device("NVIDIA H200").name == "H200"
    assert gpu_for_device("NVIDIA A100-SXM4-80GB").name == "A100"
    assert gpu_for_device("NVIDIA A10G").name == "A10G"
    assert gpu_for_device("NVIDIA RTX 6000 Ada", 89) is None
    assert gpu_for_device("Some future GPU", 90).name == "H100"


def test_the_model_ranks_contraction_tiles_as_the_size_model_does():
    """The tile size model's choices (the GEMM price) are the hardware model's too: wide tiles for a
    large GEMM, narrow deep ones for a decode step."""
    from linear import make_linear

    for func, before in ((make_matmul(4096, 4096, 4096), {"BLOCK_N": 128}),
                         (make_linear(16, 4096, 4096), {"BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3})):
        compiled = compile(func, verify=False)
        kernel = compiled.program.kernels[0]
        summary = summarize(compiled.program)[kernel.name]
        chosen = predict(summary, _default(kernel), H200, {})
        assert chosen.seconds < 0.9 * predict(summary, {**_default(kernel), **before}, H200, {}).seconds


def test_a_part_of_the_table_is_named_as_itself_and_its_variants_are_not():
    from tir_passes.contracts.gpu_specs import gpu_of_part

    assert gpu_of_part("NVIDIA H100 80GB HBM3").name == "H100"
    assert gpu_of_part("NVIDIA H200").name == "H200"
    # another board of the same chip: fewer multiprocessors, other memory; nor the nearest entry's guess
    assert gpu_of_part("NVIDIA H100 PCIe") is None and gpu_of_part("NVIDIA H100 NVL") is None
    assert gpu_of_part("NVIDIA GH200 480GB") is None and gpu_of_part("Some future GPU") is None
    assert gpu_for_device("NVIDIA H100 PCIe").name == "H100"   # the tuner's nearest entry is unchanged
