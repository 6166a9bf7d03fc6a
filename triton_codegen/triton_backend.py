"""The Triton backend: the default pass pipeline, the TileProgram lowering, the standalone Triton
module, and its last check (the emitted kernel in Triton's interpreter, or on the GPU)."""

from __future__ import annotations

from dataclasses import replace

from lowering.from_tir import lower_program
from lowering.printer import format_program
from lowering.support import check_supported
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.pipeline import default_pipeline

from . import loader
from .advice import program_advice
from .backend import Backend, LowerOptions
from .check import CheckReport, check_kernel
from .emit_kernel import BINARY_RULES, UNARY_RULES
from .emit_module import emit_module
from .kernel import TritonKernel, interpret_mode


# what Triton kernels can hold (tl.dot's 16-element minimum, the widest tile, ...): handed to the
# passes with the GPU spec, recorded by Tiling, read back by the lowering and the config space
TRITON_LIMITS = BackendLimits()


def _pipeline(gpu: str = "H200", deterministic: bool = False) -> list:
    return default_pipeline(gpu, deterministic, TRITON_LIMITS)


def _lower(func, name: str, source_hash: str, passes: tuple[str, ...], options: LowerOptions):
    program = lower_program(func, name, source_hash, passes, options.float32_matmul_precision)
    if options.debug:
        program = replace(program, kernels=tuple(replace(k, debug=True) for k in program.kernels))
    return program


def _check(kernel: TritonKernel, reference) -> CheckReport:
    """The kernel against TVM's build, in the interpreter (on a GPU when there is one)."""
    interpret = interpret_mode(None)
    if interpret and not loader.triton_library_interpreted():
        return CheckReport(kernel.name, [], seconds=0.0, skipped="Triton was imported in compiled mode and there is "
                           "no GPU")
    return check_kernel(kernel, reference, interpret)


BACKEND = Backend(
    name="triton",
    pipeline=_pipeline,
    check_supported=check_supported,
    lower=_lower,
    emit=emit_module,
    kernel_class=TritonKernel,
    check_kernel=_check,
    describe=format_program,
    expression_ops=frozenset(UNARY_RULES) | frozenset(BINARY_RULES),
    deterministic=True,
    advise=program_advice,
)
