"""A deterministic GEMM's configs as the GPU compiles them: one MMA instruction family (sm_90, AOT).

A kernel whose only sums are tl.dots pins BLOCK_K alone; its M/N tiles, warps, stages and both
variants (pointer loads, TMA descriptors) are configs (docs/determinism.md). That keeps every
element's sum only while Triton lowers the dot to the same instruction family in each: read here
from the TTGIR of every config, both variants, the wide tiles included. The bits themselves are
the GPU's to show (benchmarks/determinism_gpu.py compares every config there).
"""

from __future__ import annotations

import re

import pytest

from matmul import make_matmul
from lowering.rewrites.tile_access import with_tile_accesses
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.descriptors import plan_descriptors

pytestmark = pytest.mark.aot

_MMA = re.compile(r"#ttg\.nvidia_mma<\{versionMajor = (\d+), versionMinor = \d+, warpsPerCTA = \[[\d, ]+\], "
                  r"instrShape = \[([\d, ]+)\]")


def mma_families(ttgir: str) -> set[tuple[int, int | None]]:
    """Each MMA layout's (version, k of its instruction): 3 is wgmma (instrShape m, n, k), 2
    mma.sync (instrShape m, n: its k is the dtype's)."""
    found = set()
    for version, shape in _MMA.findall(ttgir):
        sizes = [int(x) for x in shape.split(",")]
        found.add((int(version), sizes[2] if len(sizes) == 3 else None))
    return found


def _configs(kernel) -> list[dict]:
    """The module's configs, and the wide tiles beside them (128x256 and 256x128 at 8 warps)."""
    configs = list(kernel.module(interpret=True).CONFIGS["matmul_kernel0"])
    default = configs[0]
    return configs + [{**default, "BLOCK_M": m, "BLOCK_N": n, "num_warps": 8, "num_stages": 3}
                      for m, n in ((128, 256), (256, 128))]


def test_every_config_and_variant_of_a_deterministic_gemm_runs_one_mma_family():
    kernel = compile(make_matmul(300, 512, 1024), deterministic=True, verify=False)
    (tile_kernel,) = with_tile_accesses(kernel.program).kernels
    plan = plan_descriptors(tile_kernel)
    assert plan is not None, "a deterministic tl.dot kernel keeps its descriptor variant"
    families, shapes, configs = set(), set(), _configs(kernel)
    for index, config in enumerate(configs):
        shapes.add((config["BLOCK_M"], config["BLOCK_N"], config["num_warps"]))
        # both variants of the default and of the wide tiles (the rest: the pointer kernel, to keep it quick)
        for variant in (None, plan) if index == 0 or index >= len(configs) - 2 else (None,):
            result = compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=variant, listings=True)
            found = mma_families(result.ttgir)
            assert found, f"no MMA layout in the TTGIR of {config}"
            families |= found
    assert len(shapes) >= 5, shapes
    assert families == {(3, 16)}, f"the configs run other MMA instructions: {families}"


def test_under_the_floor_the_dot_runs_another_instruction():
    """The floors have teeth: 32 rows, or 2 warps, of the same kernel compile to mma.sync (the
    config a floor refuses: configs.py, search_space.py)."""
    kernel = compile(make_matmul(300, 512, 1024), deterministic=True, verify=False)
    (tile_kernel,) = with_tile_accesses(kernel.program).kernels
    default = kernel.module(interpret=True).CONFIGS["matmul_kernel0"][0]
    rows = compile_ahead_of_time(kernel.module_file(), tile_kernel, {**default, "BLOCK_M": 32}, 90, listings=True)
    warps = compile_ahead_of_time(kernel.module_file(), tile_kernel, {**default, "num_warps": 2}, 90, listings=True)
    assert mma_families(rows.ttgir) == mma_families(warps.ttgir) == {(2, None)}


def test_the_floor_is_on_the_outputs_rows_when_the_lowering_swaps_the_operands():
    """matmul's dB = Aᵀ·dC, written as differentiate writes it (`dB += dC · A`, the factor along
    dB's columns first: CanonicalUpdates, which would put A first, is disabled to keep that form):
    the lowering writes tl.dot(A_tile, dCᵀ), so the MMA's rows are the plan's BLOCK_N: that one is
    floored, and its configs all run wgmma; 32 columns (BLOCK_M) still do, 32 rows do not."""
    from tir_passes import differentiate

    backward = differentiate(make_matmul(300, 512, 1024, "float16", "float32"), ["A", "B"])
    kernel = compile(backward, deterministic=True, verify=False, disable=("CanonicalUpdates",))
    tile_kernel = next(k for k in with_tile_accesses(kernel.program).kernels if k.name.endswith("kernel1"))
    assert [d.block for d in tile_kernel.dims][:2] == ["BLOCK_N", "BLOCK_M"]   # rows, columns
    assert ("BLOCK_N", 64, "mma") in tile_kernel.floors and not any(f[0] == "BLOCK_M" for f in tile_kernel.floors)
    configs = kernel.module(interpret=True).CONFIGS[tile_kernel.name]
    assert min(c["BLOCK_N"] for c in configs) >= 64
    default = configs[0]
    families = set()
    for config in configs + [{**default, "BLOCK_M": 32}]:
        families |= mma_families(compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90,
                                                       listings=True).ttgir)
    assert families == {(3, 16)}, families
    narrow = compile_ahead_of_time(kernel.module_file(), tile_kernel, {**default, "BLOCK_N": 32}, 90, listings=True)
    assert mma_families(narrow.ttgir) == {(2, None)}
