"""How a forward module finds and calls its backward: the typed link `compile(func, wrt=...)` builds
from differentiate's GradientSignature record and emit_module writes as the BACKWARD literal
(read by torch_op_support.register_backward, in the generated module).

Why: the op's autograd formula needs to know which forward values to save and which backward
parameter is which; that was decided once, by differentiate, and is carried here as it is. With saved
intermediates (`compile(func, wrt=..., save=...)`), the link also names the training forward's module, which
the op runs instead of the forward (it returns the forward's outputs and then the saved values, which
setup_context keeps and the backward takes after the forward values it reads).
"""

from __future__ import annotations

import pprint
from dataclasses import dataclass

from .loader import file_stem


@dataclass(frozen=True)
class BackwardLink:
    module: str                                # the backward module's file name, beside the forward's
    reads: tuple[str, ...]                     # forward parameters the backward takes first
    output_grads: tuple[tuple[str, str], ...]  # (backward parameter, forward output)
    grads: tuple[tuple[str, str], ...]         # (backward parameter, forward input)
    saved: tuple[str, ...] = ()                # intermediates the training forward writes, passed after `reads`
    training: str | None = None                # the training forward's module file, beside the forward's


def link_for(signature, backward_name: str, training_name: str | None = None) -> BackwardLink:
    training = f"{file_stem(training_name)}.py" if training_name is not None else None
    return BackwardLink(f"{file_stem(backward_name)}.py", signature.reads, signature.output_grads, signature.grads,
                        signature.saved, training)


def backward_literal(link: BackwardLink | None) -> str:
    if link is None:
        return "BACKWARD = None"
    value = {"module": link.module, "reads": link.reads, "output_grads": link.output_grads, "grads": link.grads}
    if link.training is not None:
        value.update(saved=link.saved, training=link.training)
    return ("# the backward (tir_passes.differentiate): its module beside this one, what it reads, its gradients\n"
            "BACKWARD = " + pprint.pformat(value, width=100, sort_dicts=False))
