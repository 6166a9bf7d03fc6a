"""compile(deterministic=True) as the GPU compiles it: two launches, one reduction tree (sm_90, AOT).

The interpreter's tl.sum is numpy's, whatever the layout, so the bitwise tests of
test_determinism.py cannot see what the H200 showed (2026-12-01: LayerNorm fp32, rows of 700,
other bits at a batch of 1 row). Three things changed with the batch there, each read here from
the TTGIR and PTX that Triton compiles for each launch (its own specialization of the arguments):

- the variant: the launcher took the `_tma` variant when the tiles did not divide the tensor (7,
  33, 300 rows) and the pointer kernel otherwise (the 1-row compile has no 2-D tiles, so no
  variant); a tile read from shared memory got 4 elements per thread, a pointer load of rows
  of 700 (a stride Triton does not know to be a multiple of 16) 1: another tl.sum tree;
- FMA contraction: LLVM fused `x - mean * c` into one fma in the 1-row plan's unrolled loop and
  not in the 7-row one (each product rounded or not, by the code's shape);
- an integer size of 1 is compiled as a constant (Triton's specialization), other code.
"""

from __future__ import annotations

import re

import pytest

from layernorm import make_layernorm
from rmsnorm import make_rmsnorm
from lowering.rewrites.tile_access import with_tile_accesses
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.configs import config_space
from tir_passes.contracts.tile_contract import PIN_LAYOUT, PIN_REDUCTION, PIN_SCAN
from triton_codegen.descriptors import LOADED_TILE_ORDER_PINS, plan_descriptors

pytestmark = pytest.mark.aot

N = 700
_REDUCE = re.compile(r'"tt\.reduce"\(.*?<\{axis = (\d+) : i32\}>')
_OPERAND = re.compile(r"\}\) : \(tensor<([\dx]+)x\w+, #(\w+)>")
_BLOCKED = re.compile(r"^#(\w+) = #ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], threadsPerWarp = \[([\d, ]+)\], "
                      r"warpsPerCTA = \[([\d, ]+)\]", re.M)


def _numbers(text: str) -> list[int]:
    return [int(x) for x in text.replace("x", ",").split(",") if x.strip()]


def reduction_splits(ttgir: str) -> list[tuple[int, int, int, int]]:
    """Per tt.reduce, how its layout splits the reduced axis: (tile length, elements per thread,
    lanes, warps) along it. Equal splits (and num_warps) mean the same tree for every row."""
    layouts = {name: tuple(map(_numbers, parts)) for name, *parts in _BLOCKED.findall(ttgir)}
    splits, axis = [], None
    for line in ttgir.splitlines():
        if (found := _REDUCE.search(line)) is not None:
            axis = int(found.group(1))
        elif axis is not None and (operand := _OPERAND.search(line)) is not None:
            shape, (per_thread, lanes, warps) = _numbers(operand.group(1)), layouts[operand.group(2)]
            splits.append((shape[axis], per_thread[axis], lanes[axis], warps[axis]))
            axis = None
    return splits


def _launch_values(kernel, sizes: dict[str, int]) -> dict[str, int]:
    """The integer arguments a launch on contiguous tensors passes: each buffer's strides, and
    every integer scalar (a size) at `sizes`."""
    shapes = {p.name: [sizes.get(d, d) if isinstance(d, str) else d for d in p.shape] for p in kernel.program.params}
    values = {}
    for tile_kernel in kernel.program.kernels:
        for buffer in tile_kernel.buffers:
            shape = shapes.get(buffer.name, [1] * buffer.ndim)   # a scratch buffer: one axis here
            for axis in range(buffer.ndim):
                values[f"{buffer.name}_stride{axis}"] = _product(shape[axis + 1:])
        values.update({s.name: sizes[s.name] for s in tile_kernel.scalars if s.name in sizes})
    return values


def _product(dims) -> int:
    result = 1
    for dim in dims:
        result *= dim
    return result


def _compiled(kernel, sizes: dict[str, int]):
    """Every variant a launch at `sizes` may run, compiled as that launch specializes it."""
    values = _launch_values(kernel, sizes)
    results = []
    for tile_kernel in with_tile_accesses(kernel.program).kernels:
        config = config_space(tile_kernel)[0]
        results.append(compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, values, listings=True))
        plan = plan_descriptors(tile_kernel)
        if plan is not None:
            results.append(compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=plan,
                                                 listings=True))
    return results


def test_one_seven_and_300_rows_compile_the_same_reduction_trees_without_contraction():
    """The H200's broken case: every variant either launch may pick splits each row alike, and no
    product is fused into an add."""
    splits = {}
    for rows in (1, 7, 300):
        kernel = compile(make_layernorm(rows, N), deterministic=True, verify=False)
        compiled = _compiled(kernel, {})
        assert LOADED_TILE_ORDER_PINS == (PIN_REDUCTION, PIN_LAYOUT, PIN_SCAN)
        assert all(result.tma_copies == 0 for result in compiled), "a deterministic reduction kernel has a TMA variant"
        assert all("fma.rn" not in result.ptx for result in compiled), "a product was contracted into an fma"
        splits[rows] = {split for result in compiled for split in reduction_splits(result.ttgir)}
        assert splits[rows], "no reduction found in the TTGIR"
    assert len(set.union(*splits.values())) == 1, f"the launches split a row differently: {splits}"


def test_without_the_flag_the_variants_and_the_contraction_differ():
    """The mechanism the flag removes is there without it (the test has teeth)."""
    one = _compiled(compile(make_layernorm(1, N), verify=False), {})
    seven = _compiled(compile(make_layernorm(7, N), verify=False), {})
    assert any("fma.rn" in result.ptx for result in one + seven)
    splits = {split for result in seven for split in reduction_splits(result.ttgir)}
    assert len(splits) > 1, f"the pointer kernel and its TMA variant split the rows alike: {splits}"


def test_a_batch_of_one_row_runs_the_code_of_every_other_batch():
    """A symbolic row count is not specialized: 1 row compiles what 300 rows do (Triton would
    make a size of 1 a constant, and a multiple of 16 a wider vector)."""
    kernel = compile(make_rmsnorm(N), deterministic=True, verify=False)
    size = next(s.name for k in kernel.program.kernels for s in k.scalars)
    assert "do_not_specialize" in kernel.source
    one, many = (_compiled(kernel, {size: rows}) for rows in (1, 304))
    assert [r.ttgir for r in one] == [r.ttgir for r in many]
