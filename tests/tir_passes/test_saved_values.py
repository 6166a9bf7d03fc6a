"""differentiate(..., save=...): which forward intermediates a training forward saves instead of the backward
recomputing them (forward_values.py's cost rule), the backward's signature with them, training_forward's
promotion of them to outputs, the refusals, and the numerics rule for values computed from rounded operands."""

import re

import numpy as np
import pytest
import torch
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.script import tirx as T

from attention import make_attention
from attention_forms import make_attention_inline_mask
from layernorm import make_layernorm
from tir_passes import NotDifferentiableError, differentiate, training_forward
from tir_passes.checks.numerics import ReferenceRun
from tir_passes.checks.rounded_operands import rounded_buffers
from tir_passes.contracts.autodiff import RECOMPUTED, SAVED, forward_values, signature

SHAPE = (1, 2, 21, 16)


def _decisions(backward) -> dict[str, str]:
    return {v.buffer: v.decision + (" (training forward)" if v.training_output else "")
            for v in forward_values(backward)}


def _copied_blocks(backward) -> set[str]:
    blocks: list = []
    tvm_ffi.structural_walk(backward.body, (s_tir.SBlock, blocks.append))
    return {b.name_hint for b in blocks}


def test_by_default_every_intermediate_is_recomputed():
    backward = differentiate(make_attention(*SHAPE), ["Q", "K", "V"])
    assert signature(backward).saved == ()
    assert {v.buffer for v in forward_values(backward) if v.decision == RECOMPUTED} == \
        {"scores", "row_max", "weights", "row_sum", "acc"}


def test_auto_saves_the_row_statistics_and_acc_and_recomputes_the_square_tiles():
    """Attention: the row max, the row sum (B·H·S against the S x S tiles their blocks read) and acc (S x D against
    the S x S weights) are saved; the S x S scores (a contraction of the S x D rows of Q and K, larger than them)
    and the elementwise weights are recomputed; the backward copies no block that computes a saved value."""
    backward = differentiate(make_attention(*SHAPE), ["Q", "K", "V"], save="auto")
    assert _decisions(backward) == {
        "Q": "input", "K": "input", "V": "input",
        "row_max": "saved (training forward)", "row_sum": "saved (training forward)", "acc": "saved (training forward)",
        "scores": "recomputed", "weights": "recomputed"}
    sig = signature(backward)
    assert sig.saved == ("row_max", "row_sum", "acc")
    # after the forward parameters it reads, before the gradients
    assert [p.name for p in backward.params] == ["Q", "K", "V", "row_max", "row_sum", "acc", "d_O", "d_Q", "d_K", "d_V"]
    assert not {"row_max", "row_sum", "weighted_sum"} & _copied_blocks(backward)
    reason = next(v.reason for v in forward_values(backward) if v.buffer == "acc")
    assert "672 elements, smaller than the 882" in reason


def test_auto_saves_a_norms_mean_and_variance():
    backward = differentiate(make_layernorm(5, 7), ["X", "gamma", "beta"], save="auto")
    assert signature(backward).saved == ("mean", "var")
    assert not {"mean", "var"} & _copied_blocks(backward)
    assert all(v.decision == SAVED for v in forward_values(backward) if v.buffer in ("mean", "var"))


def test_save_by_name():
    backward = differentiate(make_attention(*SHAPE), ["Q", "K", "V"], save=["row_sum"])
    assert signature(backward).saved == ("row_sum",)
    assert _decisions(backward)["row_max"] == "recomputed"
    assert "chosen by save=" in next(v.reason for v in forward_values(backward) if v.buffer == "row_sum")


def test_save_refuses_a_name_the_backward_does_not_read():
    with pytest.raises(NotDifferentiableError, match=r"save names 'O', which is not an intermediate the backward "
                                                     r"reads \(those it reads: scores, row_max, weights, row_sum, acc\)"):
        differentiate(make_attention(*SHAPE), ["Q", "K", "V"], save=["O"])
    with pytest.raises(NotDifferentiableError, match="save names 'nowhere'"):
        differentiate(make_attention(*SHAPE), ["Q", "K", "V"], save=["row_sum", "nowhere"])


@T.prim_func(s_tir=True)
def squared_shifted_sums(X: T.Buffer((6, 5), "float32"), Y: T.Buffer((6,), "float32")):
    total = T.sblock_alloc_buffer((6,), "float32")
    shifted = T.sblock_alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 5):
        with T.sblock("total"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                total[vi] = T.float32(0)
            total[vi] = total[vi] + X[vi, vk]
    for i in range(6):
        with T.sblock("shifted"):
            vi = T.axis.remap("S", [i])
            shifted[vi] = total[vi] + T.float32(1)
    for i in range(6):
        with T.sblock("square"):
            vi = T.axis.remap("S", [i])
            Y[vi] = shifted[vi] * shifted[vi]


def test_save_refuses_a_name_read_only_to_recompute_another_saved_value():
    """Y = (Σ_k X + 1)²: the adjoints read `shifted` only; with it saved, `total` is read by nothing the
    backward still computes."""
    assert signature(differentiate(squared_shifted_sums, ["X"], save=["total"])).saved == ("total",)
    with pytest.raises(NotDifferentiableError, match="save names total, which the backward does not read once "
                                                     "the other saved values are passed in"):
        differentiate(squared_shifted_sums, ["X"], save=["total", "shifted"])


def test_save_refuses_what_is_not_a_list_of_names():
    with pytest.raises(NotDifferentiableError, match="save is 3; pass None, \"auto\" or a list"):
        differentiate(make_attention(*SHAPE), ["Q", "K", "V"], save=3)


def _renamed(func, names: dict):
    text = func.script()
    for old, new in names.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return tvm.script.from_source(text)


def test_the_decision_survives_rewrites_that_keep_the_meaning():
    """Renamed buffers and blocks, and the mask written inline in every stage (attention_forms.py): the same
    values saved, by their roles (a max, a sum of exponentials, the weighted sum), not their names."""
    renamed = _renamed(make_attention(*SHAPE), {"row_max": "m", "row_sum": "l", "acc": "o_unnormalized",
                                                "scores": "s", "weights": "p"})
    assert signature(differentiate(renamed, ["Q", "K", "V"], save="auto")).saved == ("m", "l", "o_unnormalized")
    inline = differentiate(make_attention_inline_mask(*SHAPE), ["Q", "K", "V"], save="auto")
    assert signature(inline).saved == ("row_max", "row_sum", "acc")
    assert _decisions(inline)["scores"] == "recomputed"


def test_training_forward_promotes_the_saved_intermediates_to_outputs():
    forward = make_attention(*SHAPE)
    backward = differentiate(forward, ["Q", "K", "V"], save="auto")
    training = training_forward(forward, signature(backward).saved)
    assert [p.name for p in training.params] == ["Q", "K", "V", "O", "row_max", "row_sum", "acc"]
    assert [b.name for b in training.body.block.alloc_buffers] == ["scores", "weights"]
    assert str(training.attrs["global_symbol"]) == "attention_training"
    # the order of the names given does not matter: the program's order is the signature's
    assert [p.name for p in training_forward(forward, ["acc", "row_max", "row_sum"]).params][4:] == \
        ["row_max", "row_sum", "acc"]
    s_tir.analysis.verify_well_formed(training)
    tvm.ir.assert_structural_equal(tvm.script.from_source(training.script()), training)


def test_training_forward_refuses_what_is_not_an_intermediate():
    with pytest.raises(NotDifferentiableError, match="training_forward names 'O', which is a parameter already"):
        training_forward(make_attention(*SHAPE), ["O"])
    with pytest.raises(NotDifferentiableError, match=r"'lse', which is not a buffer it allocates; it saves "
                                                     r"intermediates \(root allocations: scores, row_max"):
        training_forward(make_attention(*SHAPE), ["lse"])


def test_training_forward_computes_what_the_forward_does():
    """TVM's llvm build of the training forward: O as the forward's, the saved values as torch computes them."""
    forward = make_attention(*SHAPE, dtype="float32", weights_dtype="float32")
    training = training_forward(forward, ["row_max", "row_sum", "acc"])
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(SHAPE, generator=generator) for _ in range(3))
    outs = [torch.zeros(SHAPE), torch.zeros(SHAPE[:3]), torch.zeros(SHAPE[:3]), torch.zeros(SHAPE)]
    tensors = [tvm.runtime.tensor(x.numpy(), tvm.cpu(0)) for x in (q, k, v, *outs)]
    tvm.compile(tvm.IRModule({"main": training}), target="llvm")(*tensors)
    o, row_max, row_sum, acc = (torch.from_numpy(t.numpy()) for t in tensors[3:])
    scores = q @ k.transpose(-1, -2)
    p = torch.exp((scores - scores.amax(-1, keepdim=True)) / SHAPE[3] ** 0.5)
    torch.testing.assert_close(row_max, scores.amax(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(row_sum, p.sum(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(acc, p @ v, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(o, torch.nn.functional.scaled_dot_product_attention(q, k, v), rtol=1e-5, atol=1e-5)


def test_values_computed_from_rounded_operands_are_checked_at_the_narrow_tolerance():
    """acc of fp16-rounded weights (and O, from it) carry fp16's rounding; an fp32 program, or one whose casts only
    widen (LayerNorm's fp32 statistics of fp16 rows), carries none."""
    assert rounded_buffers(training_forward(make_attention(*SHAPE), ["row_max", "row_sum", "acc"])) == \
        {"acc": "float16", "O": "float16"}
    assert rounded_buffers(make_attention(*SHAPE, dtype="float32")) == {}
    assert rounded_buffers(make_layernorm(5, 7, "float16")) == {}   # its one narrowing cast is the store's


def test_an_fp16_output_keeps_its_own_tolerance():
    """A store's own rounding to fp16 loosens nothing: a small element of an fp16 result off by 0.05 (five
    times fp16's absolute tolerance) is still a mismatch, however large the result's other elements."""
    reference = ReferenceRun.of(make_layernorm(5, 7, "float16"))
    assert not reference.rounded
    results = [dict(out) for out in reference.outputs]
    y = results[0]["Y"].astype("float32")
    small = np.unravel_index(np.argmin(np.abs(y)), y.shape)
    y[small] += 0.05
    results[0]["Y"] = y.astype(results[0]["Y"].dtype)
    assert any("Y" in problem for problem in reference.mismatches(results))
