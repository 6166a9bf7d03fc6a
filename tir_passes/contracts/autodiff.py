"""What the differentiation decided, typed, on the backward PrimFunc's root block.

  root annotation "autodiff.values"     ForwardValue per forward buffer the backward reads: passed in
                                         (an input), saved (an output of the forward, kept by the op's
                                         setup_context; or, `training_output`, an intermediate that the
                                         training forward writes as an extra output) or recomputed (an
                                         intermediate, its blocks copied into the backward), with the reason
  root annotation "autodiff.contractions" ContractionAdjoint per forward contraction whose operands are
                                         narrower than its accumulator (fp16 x fp16 -> fp32): the dtype
                                         the incoming gradient is rounded to in its adjoints, so they are
                                         tl.dots of the forward's operand dtype, with the reason
  root annotation "autodiff.zero_gradients" ZeroGradient, of one of two kinds, with the reason:
                                         ZERO_REDUCTION per forward max/min reduction whose result no
                                         output depends on (a shift every output is invariant to, proven
                                         by passes/autodiff/shift_invariance.py): its gradient is zero, so
                                         no adjoint is built for it; ZERO_CONTRIBUTION per single term of
                                         a gradient proven zero (a centered sum over the axis its mean
                                         averages, passes/autodiff/centered_sums.py): that term is not built
  root annotation "autodiff.signature"  GradientSignature: which backward parameter is which: the
                                         forward parameters it reads, the saved intermediates (the
                                         training forward's extra outputs), the gradient of each forward
                                         output it takes, the gradient of each `wrt` it writes

`differentiate` is the only writer (`write_records`); `triton_codegen` (the op's autograd
registration, the CLI) and the dump's readers read them with `forward_values` and `signature`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir

from ..errors import NotDifferentiableError

VALUES_KEY, SIGNATURE_KEY, CONTRACTIONS_KEY = "autodiff.values", "autodiff.signature", "autodiff.contractions"
ZERO_GRADIENTS_KEY = "autodiff.zero_gradients"
INPUT, SAVED, RECOMPUTED = "input", "saved", "recomputed"
# ZeroGradient's kinds: a reduction whose whole gradient is zero, or one block's term in another buffer's gradient
ZERO_REDUCTION, ZERO_CONTRIBUTION = "reduction", "contribution"


@dataclass(frozen=True)
class ForwardValue:
    buffer: str
    decision: str            # INPUT, SAVED or RECOMPUTED
    blocks: tuple[str, ...]  # RECOMPUTED: the forward blocks copied into the backward, in order;
                             # SAVED with training_output: the block that writes it
    reason: str
    training_output: bool = False  # SAVED: an intermediate the training forward writes (not a forward output)


@dataclass(frozen=True)
class ContractionAdjoint:
    block: str               # the forward contraction
    gradient: str            # the gradient buffer its adjoints read
    operand_dtype: str       # what that gradient is rounded to in the adjoints (the forward's operand dtype)
    reason: str


@dataclass(frozen=True)
class ZeroGradient:
    kind: str                # ZERO_REDUCTION or ZERO_CONTRIBUTION
    block: str               # ZERO_REDUCTION: the forward max/min reduction; ZERO_CONTRIBUTION: the block
                             # whose term is zero
    buffer: str              # ZERO_REDUCTION: its result, whose gradient is zero; ZERO_CONTRIBUTION: the
                             # buffer whose gradient that term would add to
    reason: str


@dataclass(frozen=True)
class GradientSignature:
    forward: str                               # the forward PrimFunc's name
    reads: tuple[str, ...]                     # forward parameters, passed in this order first
    output_grads: tuple[tuple[str, str], ...]  # (backward parameter, forward output) it takes
    grads: tuple[tuple[str, str], ...]         # (backward parameter, forward input) it writes
    # intermediates saved by the training forward, passed after `reads`, in the order the training forward
    # appends them to its parameters (tir_passes.training_forward(forward, saved))
    saved: tuple[str, ...] = ()


def write_records(block: s_tir.SBlock, values: list[ForwardValue], sig: GradientSignature,
                  contractions: list[ContractionAdjoint] = (), zero: list[ZeroGradient] = ()) -> dict:
    """The root block's annotations with the records added."""
    annotations = dict(block.annotations.items())
    annotations[ZERO_GRADIENTS_KEY] = [{"kind": z.kind, "block": z.block, "buffer": z.buffer, "reason": z.reason}
                                         for z in zero]
    annotations[CONTRACTIONS_KEY] = [{"block": c.block, "gradient": c.gradient, "operand_dtype": c.operand_dtype,
                                      "reason": c.reason} for c in contractions]
    annotations[VALUES_KEY] = [{"buffer": v.buffer, "decision": v.decision, "blocks": list(v.blocks),
                                "reason": v.reason, "training_output": v.training_output} for v in values]
    annotations[SIGNATURE_KEY] = {"forward": sig.forward, "reads": list(sig.reads),
                                  "output_grads": [list(pair) for pair in sig.output_grads],
                                  "grads": [list(pair) for pair in sig.grads], "saved": list(sig.saved)}
    return annotations


def forward_values(func) -> tuple[ForwardValue, ...]:
    raw = _root_annotation(func, VALUES_KEY)
    return tuple(ForwardValue(str(v["buffer"]), str(v["decision"]), tuple(str(b) for b in v["blocks"]),
                              str(v["reason"]), bool(v.get("training_output", False))) for v in raw)


def contraction_adjoints(func) -> tuple[ContractionAdjoint, ...]:
    raw = _root_annotation(func, CONTRACTIONS_KEY)
    return tuple(ContractionAdjoint(str(c["block"]), str(c["gradient"]), str(c["operand_dtype"]), str(c["reason"]))
                 for c in raw)


def zero_gradients(func) -> tuple[ZeroGradient, ...]:
    raw = _root_annotation(func, ZERO_GRADIENTS_KEY)
    return tuple(ZeroGradient(str(z["kind"]), str(z["block"]), str(z["buffer"]), str(z["reason"])) for z in raw)


def signature(func) -> GradientSignature:
    raw = _root_annotation(func, SIGNATURE_KEY)
    return GradientSignature(str(raw["forward"]), tuple(str(r) for r in raw["reads"]),
                             tuple((str(a), str(b)) for a, b in raw["output_grads"]),
                             tuple((str(a), str(b)) for a, b in raw["grads"]),
                             tuple(str(s) for s in raw.get("saved", ())))


def _root_annotation(func, key: str):
    raw = func.body.block.annotations.get(key)
    if raw is None:
        raise NotDifferentiableError(f'PrimFunc has no "{key}" record: it was not made by tir_passes.differentiate')
    return raw
