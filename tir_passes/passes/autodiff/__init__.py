"""Reverse-mode differentiation of S-TIR programs (docs/autodiff.md).

forward.py reads the forward program into typed blocks, adjoint_rules.py differentiates
expressions, read_inversion.py writes an overlapping read's adjoint as a gather, build.py writes
S-TIR, forward_values.py decides what is passed in, saved or recomputed, training_forward.py writes the
forward that saves intermediates, differentiate.py is the pass; its typed records are tir_passes/contracts/autodiff.py.
"""

from .differentiate import differentiate
from .training_forward import training_forward
from ...contracts.autodiff import ForwardValue, GradientSignature, forward_values, signature

__all__ = ["ForwardValue", "GradientSignature", "differentiate", "forward_values", "signature", "training_forward"]
