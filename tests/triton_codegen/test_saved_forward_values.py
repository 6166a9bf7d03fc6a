"""Saved forward values: the training forward writes the row statistics (and a norm's mean and variance) as
extra outputs, and the backward made with `save="auto"` takes them as parameters, so it has no forward walk
(FlashAttention-2's split). The kernels run in the interpreter against torch autograd (fp32, 1e-3 relative) and
TVM's llvm build, and compile for sm_90/sm_80. The register budget is lowered (SMALL_REGISTERS) so that the
small, odd shapes take the path the H200's long rows take (streamed walks)."""

import os

import pytest
import torch
import torch.nn.functional as F

from attention import make_attention
from helpers import compile_and_check
from layernorm import make_layernorm
from test_backward_kernels import torch_reference
from tir_passes import differentiate, training_forward
from tir_passes.contracts.autodiff import signature
from tir_passes.contracts.fusion_record import fusion_steps
from tir_passes.pipeline import default_pipeline
from test_streamed_backward import SMALL_REGISTERS
from triton_codegen import compile

SHAPE = (1, 2, 21, 16)
pytestmark = pytest.mark.interpreter


def _pipeline():
    return default_pipeline("H200", limits=SMALL_REGISTERS)


def run_training(kernel, training, inputs: dict) -> dict:
    """The training forward's outputs (the forward's and the saved values), from inputs by name."""
    outputs = {p.name: torch.empty([int(x) for x in p.shape], dtype=inputs[next(iter(inputs))].dtype
                                   if p.dtype != "float32" else torch.float32)
               for p in training.params if p.name not in inputs}
    kernel(*[inputs.get(p.name, outputs.get(p.name)) for p in training.params])
    return outputs


def run_saved_backward(kernel, backward, values: dict, grad) -> dict:
    """The backward called as the op does: the forward values it reads, the saved ones, the output gradient."""
    sig = signature(backward)
    grads = {d: torch.empty_like(values[x]) for d, x in sig.grads}
    kernel(*[values[r] for r in sig.reads], *[values[s] for s in sig.saved], grad.contiguous(), *grads.values())
    return {x: grads[d] for d, x in sig.grads}


def _attention_kernels(dtype: str):
    forward = make_attention(*SHAPE, dtype=dtype)
    backward = differentiate(forward, ["Q", "K", "V"], save="auto")
    training = training_forward(forward, signature(backward).saved)
    aot = dtype == "float16"
    return (training, compile_and_check(training, aot=aot, passes=_pipeline()),
            backward, compile_and_check(backward, aot=aot, passes=_pipeline()))


def test_attention_backward_with_saved_statistics_has_no_forward_walk_and_matches_torch_autograd():
    training, forward_kernel, backward, backward_kernel = _attention_kernels("float32")
    # the training forward: one flash-attention kernel (online softmax: 2 dots per key tile) that also stores the
    # final m, l and acc of each row (compile_and_check compared them with TVM's build, as outputs)
    assert len(forward_kernel.program.kernels) == 1 and forward_kernel.tile_ir.count("= dot(") == 2
    assert {"row_max", "row_sum", "weighted_sum", "normalize"} <= set(forward_kernel.program.kernels[0].source_blocks)
    stored = [s for s in fusion_steps(forward_kernel.tir["main"]) if s.stored]
    assert stored and set(stored[0].stored) == {"row_sum", "acc"}   # read in registers by O's block, still stored
    # the backward: dQ and dK/dV walks and D = -Σ dO·acc/l² as a row kernel; no block computes a statistic
    # (before: 3 kernels and 9 dots, kernel 0 the flash forward's walk)
    assert backward_kernel.tile_ir.count("= dot(") == 7 and len(backward_kernel.program.kernels) == 3
    blocks = [set(k.source_blocks) for k in backward_kernel.program.kernels]
    assert not {"row_max", "row_sum", "weighted_sum"} & set().union(*blocks)
    assert {"d_row_sum_from_normalize"} in blocks
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(SHAPE, generator=generator) for _ in range(3))
    out, grad, expected = torch_reference(F.scaled_dot_product_attention, [q, k, v])
    saved = run_training(forward_kernel, training, {"Q": q, "K": k, "V": v})
    torch.testing.assert_close(saved["O"], out, rtol=1e-4, atol=1e-5)
    ours = run_saved_backward(backward_kernel, backward, {"Q": q, "K": k, "V": v, **saved}, grad)
    for name, value in zip("QKV", expected):
        error = ((ours[name] - value).abs().max() / value.abs().max()).item()
        assert error <= 1e-3, f"d{name} differs from torch autograd by {error:.2e}"


def test_fp16_training_forward_and_backward_verify_and_compile_for_sm90_and_sm80():
    """Every check of the pipeline on the fp16 training forward (its acc of fp16-rounded weights compared at fp16's
    tolerance: checks/rounded_operands.py) and on the backward; every kernel compiled ahead of time."""
    training, forward_kernel, _, backward_kernel = _attention_kernels("float16")
    assert len(forward_kernel.program.kernels) == 1
    # the default pipeline (the H200's register budget) too: one flash-attention kernel, every check
    assert len(compile_and_check(training, aot=False).program.kernels) == 1
    assert backward_kernel.tile_ir.count("= dot(") == 7 and "input_precision" not in backward_kernel.source


ROWS, COLS = 40, 24


def test_layernorm_backward_with_saved_mean_and_variance_matches_torch_autograd():
    forward = make_layernorm(ROWS, COLS)
    backward = differentiate(forward, ["X", "gamma", "beta"], save="auto")
    assert signature(backward).saved == ("mean", "var")
    training = training_forward(forward, signature(backward).saved)
    forward_kernel = compile_and_check(training, aot=False)
    backward_kernel = compile_and_check(backward, aot=False)
    # one row kernel, as the forward's: var's and normalize's nests moved under mean's, which stays whole
    # (the outputs mean and var sum apart and are scaled by 1/N once a row, in their copies: FactorOutOfSums)
    assert [k.source_blocks for k in forward_kernel.program.kernels] == [
        ("mean", "mean_copy", "var", "var_copy", "normalize")]
    generator = torch.Generator().manual_seed(0)
    x, g, b = torch.randn(ROWS, COLS, generator=generator), torch.randn(COLS, generator=generator), \
        torch.randn(COLS, generator=generator)
    out, grad, expected = torch_reference(lambda x, g, b: F.layer_norm(x, (COLS,), g, b, 1e-5), [x, g, b])
    saved = run_training(forward_kernel, training, {"X": x, "gamma": g, "beta": b})
    torch.testing.assert_close(saved["mean"], x.mean(-1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(saved["var"], x.var(-1, unbiased=False), rtol=1e-5, atol=1e-6)
    ours = run_saved_backward(backward_kernel, backward, {"X": x, "gamma": g, "beta": b, **saved}, grad)
    for name, value in zip(["X", "gamma", "beta"], expected):
        error = ((ours[name] - value).abs().max() / value.abs().max()).item()
        assert error <= 1e-3, f"d{name} differs from torch autograd by {error:.2e}"


def test_the_op_runs_the_training_forward_and_passes_the_saved_values_to_the_backward(tmp_path):
    """compile(func, wrt=..., save="auto"): the op returns O alone, its setup_context keeps the row statistics the
    training forward wrote, and the backward (no forward walk) gives torch autograd's gradients; the saved module
    carries all three files."""
    kernel = compile(make_attention(*SHAPE, dtype="float32"), wrt=["Q", "K", "V"], save="auto", verify=False,
                     passes=_pipeline())
    assert kernel.training is not None and kernel.backward_link.saved == ("row_max", "row_sum", "acc")
    assert len(kernel.training.program.kernels) == 1 and len(kernel.backward.program.kernels) == 3
    op = kernel.as_torch_op("tirsaved::attention")
    generator = torch.Generator().manual_seed(0)
    leaves = [torch.randn(SHAPE, generator=generator).requires_grad_() for _ in range(3)]
    out, grad, expected = torch_reference(F.scaled_dot_product_attention, [x.detach() for x in leaves])
    ours = op(*leaves)
    assert isinstance(ours, torch.Tensor) and ours.shape == SHAPE
    torch.testing.assert_close(ours.detach(), out, rtol=1e-4, atol=1e-5)
    ours.backward(grad)
    for leaf, value in zip(leaves, expected):
        torch.testing.assert_close(leaf.grad, value, rtol=1e-3, atol=1e-4)
    saved = kernel.save(str(tmp_path) + "/")
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(saved), kernel.backward_link.module,
                                                   kernel.backward_link.training])


def test_a_training_step_through_the_saved_values_op_compiles_with_fullgraph():
    """LayerNorm's op with saved mean and variance under torch.compile(fullgraph=True): the training forward's op,
    its saved outputs kept by setup_context, the backward traced into the backward graph; torch's gradients."""
    op = compile(make_layernorm(ROWS, COLS), wrt=["X", "gamma", "beta"], save="auto",
                 verify=False).as_torch_op("tirsaved::layernorm")
    generator = torch.Generator().manual_seed(1)
    x, target = torch.randn(ROWS, COLS, generator=generator), torch.randn(ROWS, COLS, generator=generator)
    gamma = torch.nn.Parameter(torch.randn(COLS, generator=generator))
    beta = torch.nn.Parameter(torch.randn(COLS, generator=generator))

    def loss_of(x, gamma, beta, norm):
        return ((norm(x, gamma, beta) - target) ** 2).mean()

    torch.compile(loss_of, fullgraph=True, backend="aot_eager")(x, gamma, beta, op).backward()
    ours = gamma.grad.clone(), beta.grad.clone()
    gamma.grad = beta.grad = None
    loss_of(x, gamma, beta, lambda x, g, b: F.layer_norm(x, (COLS,), g, b, 1e-5)).backward()
    torch.testing.assert_close(ours, (gamma.grad, beta.grad), rtol=1e-4, atol=1e-6)


def test_symbolic_rows_save_the_sum_of_squares_and_compile_with_every_check():
    """RMSNorm with symbolic rows: its (rows,) sum of squares is smaller than the (rows, 13) X it reads (a symbolic
    axis counts alike on both sides); the training forward (one kernel) and the backward pass every check."""
    from rmsnorm import make_rmsnorm

    forward = make_rmsnorm(13)
    backward = differentiate(forward, ["X", "weight"], save="auto")
    assert signature(backward).saved == ("sum_sq",)
    training = compile_and_check(training_forward(forward, signature(backward).saved), aot=False)
    assert len(training.program.kernels) == 1
    compile_and_check(backward, aot=False)
