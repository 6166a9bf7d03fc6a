"""A norm backward's row sums wait only for what their terms read (FactorOutOfSums takes a row value
factor out of a sum): LayerNorm's d_var and d_mean sums read neither var nor d_var (the variance's term
of d_mean is zero), RMSNorm's d_sum_sq sum not sum_sq, and the walk reduces them together (Tiling's
sums_together); the gradients still match torch autograd, and the full-size row kernels still compile for
sm_90 without a spill."""

import sys

import pytest
import tvm

from test_norm_backward_prefetch import _gradients, _layernorm, _rmsnorm
from lowering.tile_ir import CombineAssign, Loop, SumsCombine
from tir_passes import default_pipeline, differentiate
from tir_passes.pipeline import pass_names
from tir_passes.analyses.nest import block_accesses, realizes_under
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time


def _after_factoring(backward):
    mod = tvm.IRModule({"main": backward})
    for pass_ in default_pipeline():
        mod = pass_(mod)
        if pass_names([pass_])[0] == "FactorOutOfSums":
            return mod["main"]
    raise AssertionError("FactorOutOfSums is not in the default pipeline")


def _sum_reads(func) -> dict[str, set[str]]:
    """Each reduction block's name -> the buffers its sum reads (its own accumulator left out)."""
    reads = {}
    for realize in realizes_under(func.body):
        block = realize.block
        if block.init is not None:
            own = block.body.buffer.name
            reads[block.name_hint] = {a.name for a in block_accesses(block) if not a.is_store and a.name != own}
    return reads


@pytest.mark.parametrize("program, waits, together", [
    (lambda: _layernorm(37, 45), {"d_var_from_normalize": {"mean"}, "d_mean_from_normalize": set()}, 3),
    (lambda: _rmsnorm(150, 20), {"d_sum_sq_from_normalize": set()}, 2)])
def test_row_sums_wait_only_for_what_their_terms_read(program, waits, together):
    """After FactorOutOfSums each row sum of the backward reads the inputs and at most the mean: the
    statistics' functions (rsqrt(var + eps), d_var) multiply the sums' readers instead. Tiling marks the
    walk `sums_together`, and the lowering reduces the sums that no longer wait for each other as one
    (LayerNorm: var, d_var, d_mean after the mean, the variance's term of d_mean being zero,
    centered_sums.py; RMSNorm: both). The kernel then matches
    torch autograd (d_X, d_weight: rel. 1e-3)."""
    func, names, shapes, reference = program()
    backward = differentiate(func, names)
    reads = _sum_reads(_after_factoring(backward))
    inputs = {"X", "d_Y", "gamma", "weight"}
    for block, statistics in waits.items():
        assert reads[block] - inputs == statistics, f"{block} reads {sorted(reads[block])}"
    kernel = compile(backward, verify=False)
    walk = next(stmt for stmt in kernel.program.kernels[0].body if isinstance(stmt, Loop))
    sums = [stmt for stmt in walk.body if isinstance(stmt, CombineAssign)]
    assert walk.sums_together and [s.combine for s in sums] == [SumsCombine(together, 0, "float32")], sums
    assert f"_tir_sums{together}_0(" in kernel.source
    _gradients(kernel, backward, names, shapes, reference, tuple(names))


@pytest.mark.aot
@pytest.mark.skipif(sys.platform != "linux", reason="ptxas")
@pytest.mark.parametrize("program", [lambda: _layernorm(16384, 8192, "float16"),
                                     lambda: _rmsnorm(16384, 8192, "float16")])
def test_full_size_factored_row_kernels_compile_for_sm90_without_a_spill(program):
    """16384×8192 fp16 (the suite's cases), the row kernel at its default config: at most 255 registers, no spill."""
    func, names, _, _ = program()
    kernel = compile(differentiate(func, names), verify=False)
    row_kernel = kernel.program.kernels[0]
    config = dict(row_kernel.block_sizes, num_warps=row_kernel.num_warps, num_stages=row_kernel.num_stages)
    strides = {f"{b.name}_stride{axis}": 8192 if (axis == 0 and b.ndim == 2) else 1
               for b in row_kernel.buffers for axis in range(b.ndim)}
    sizes = {s.param: 16384 for s in row_kernel.scalars if s.name == "rows"}   # RMSNorm's symbolic rows
    result = compile_ahead_of_time(kernel.module_file(), row_kernel, config, 90, {**strides, **sizes})
    print(row_kernel.name, result.registers, result.spilled_bytes)
    assert result.spilled_bytes == 0 and 0 < result.registers <= 255, result
