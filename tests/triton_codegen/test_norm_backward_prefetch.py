"""The prefetch of a norm backward's row walk (Tiling's LoopPrefetch, lowering/rewrites/prefetch_loads.py):
shown in the tile program and the kernel, the same bits as the kernel without it (it moves loads only, with
deterministic=True too), masked where the rows are ragged, and compiled for sm_90 at the full size without
a spill."""

import sys

import pytest
import torch

from test_backward_kernels import run_backward, torch_reference
from tir_passes import differentiate
from tir_passes.passes import tiling_prefetch
from triton_codegen import compile
from triton_codegen.aot import compile_ahead_of_time


def _walk(kernel):
    """The row kernel's walk of its rows (the loop in its body)."""
    return next(stmt for stmt in kernel.program.kernels[0].body if type(stmt).__name__ == "Loop")


def _layernorm(rows, cols, dtype="float32"):
    import layernorm

    def reference(x, g, b):
        return torch.nn.functional.layer_norm(x, (cols,), g, b, 1e-5)

    return (layernorm.make_layernorm(rows, cols, dtype), ["X", "gamma", "beta"], [(rows, cols), (cols,), (cols,)],
            reference)


def _rmsnorm(rows, cols, dtype="float32"):
    import rmsnorm

    def reference(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w

    return rmsnorm.make_rmsnorm(cols, dtype), ["X", "weight"], [(rows, cols), (cols,)], reference


def _gradients(kernel, backward, names, shapes, reference, checked):
    """The kernel's gradients of `checked`, each against torch autograd (rel. 1e-3: neither kernel is wrong)."""
    generator = torch.Generator().manual_seed(7)
    inputs = [torch.randn(shape, generator=generator) for shape in shapes]
    _, grad, expected = torch_reference(reference, inputs)
    ours = run_backward(kernel, backward, names, inputs, grad, {})
    for name, value in zip(names, expected):
        if name in checked:
            assert ((ours[name] - value).abs().max() / value.abs().max()).item() <= 1e-3, f"d{name} against torch"
    return {name: ours[name] for name in checked}


@pytest.mark.parametrize("program, deterministic, budget, checked", [
    (lambda: _layernorm(37, 45), False, None, ("X", "gamma", "beta")),
    (lambda: _rmsnorm(150, 20), False, None, ("X", "weight")),
    (lambda: _layernorm(40, 24), True, 1024, ("X", "gamma", "beta"))])
def test_prefetched_walk_gives_the_bits_of_the_walk_without_it(program, deterministic, budget, checked, monkeypatch):
    """LayerNorm at 37 rows (3 programs of 16, the last ragged: the early loads masked by the clamped row),
    RMSNorm with symbolic rows at 150 (3 programs of 64, the last ragged), and LayerNorm deterministic (its
    pinned tiles of 16 rows × 512 columns are over the register budget, raised here: the prefetch changes no
    order, so determinism allows it): every gradient equal bit for bit to the kernel whose walk loads each
    row in its own iteration."""
    func, names, shapes, reference = program()
    backward = differentiate(func, names)
    if budget is not None:
        monkeypatch.setattr(tiling_prefetch, "PREFETCH_REGISTERS", budget)
    prefetched = compile(backward, verify=False, deterministic=deterministic)
    walk = _walk(prefetched)
    assert walk.prefetch_distance == 1 and [p.first[0].buffer for p in walk.prefetched][:2] == ["X", "d_Y"]
    assert all(p.ahead.mask for p in walk.prefetched)   # ragged rows: every early load keeps the row's mask
    assert "tl.minimum((r + 1), " in prefetched.source and "Tiling's prefetch" in prefetched.source
    monkeypatch.setattr(tiling_prefetch, "PREFETCH_REGISTERS", 0)   # every walk over budget: no prefetch
    plain = compile(backward, verify=False, deterministic=deterministic)
    assert not _walk(plain).prefetched and "Tiling's prefetch" not in plain.source
    ours = _gradients(prefetched, backward, names, shapes, reference, checked)
    theirs = _gradients(plain, backward, names, shapes, reference, checked)
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), f"d{name} differs from the unprefetched walk's"


@pytest.mark.aot
@pytest.mark.skipif(sys.platform != "linux", reason="ptxas")
def test_full_size_layernorm_walk_compiles_for_sm90_without_a_spill():
    """16384×8192 fp16 (the suite's case): the row kernel at its 16 warps holds X's and dY's next rows beside
    this row's (16 registers per thread by Tiling's estimate) and compiles to at most 255 registers, no
    spill (measured here: 127)."""
    func, names, _, _ = _layernorm(16384, 8192, "float16")
    kernel = compile(differentiate(func, names), verify=False)
    row_kernel, walk = kernel.program.kernels[0], _walk(kernel)
    assert row_kernel.num_warps == 16 and walk.prefetch_buffers == ("X", "d_Y")
    config = dict(row_kernel.block_sizes, num_warps=row_kernel.num_warps, num_stages=row_kernel.num_stages)
    strides = {f"{b.name}_stride{axis}": 8192 if (axis == 0 and b.ndim == 2) else 1
               for b in row_kernel.buffers for axis in range(b.ndim)}
    result = compile_ahead_of_time(kernel.module_file(), row_kernel, config, 90, strides)
    assert result.spilled_bytes == 0 and 0 < result.registers <= 255, result


def test_the_prefetch_survives_rewrites_of_the_program():
    """LayerNorm renamed, or with its spatial loops reversed: each one's backward has the same plan, its walk's two row loads (X, dY) one ahead included (lowering/kernel_plan.py;
    the rewrites of tests/plan_invariance)."""
    from plan_invariance.check import plan
    from plan_invariance.rewrites import rewrites

    func, _, _, _ = _layernorm(48, 24)

    def backward_plan(forward):
        return plan(differentiate(forward, [p.name for p in forward.params[:3]]))

    expected = backward_plan(func)
    assert expected.kernels[0].prefetches == ((1, 2),)
    families = ["rename", "spatial_loops_reversed"]
    checked = [(family, backward_plan(rewritten)) for family, rewritten in rewrites(func, families)]
    assert len(checked) == len(families) and all(got == expected for _, got in checked), [family for family, got in checked if got != expected]
