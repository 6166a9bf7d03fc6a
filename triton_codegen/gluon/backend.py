"""The Gluon backend: the pass that decides shared layouts (BankConflictFreeTiling with XOR
swizzles and tensor-core layouts allowed), the lowering to a GluonProgram, one standalone module,
and its last check (the kernels, layouts erased, in Triton's interpreter). Its kernels run on a
GPU only, and its manifest lists each kernel's shared layouts.
"""

from __future__ import annotations

import pprint

from tir_passes.errors import LaunchError
from tir_passes.passes.bank_conflict_free_tiling import GLUON_LAYOUTS, BankConflictFreeTiling
from triton_codegen import loader
from triton_codegen.backend import Backend, LowerOptions
from triton_codegen.check import CheckReport, check_kernel
from triton_codegen.kernel import CompiledKernel

from .emit import BINARY_RULES, UNARY_RULES, emit_module
from .from_tir import lower_gluon
from .interpret import run_erased


def gluon_pipeline(gpu: str = "H200"):
    return [BankConflictFreeTiling(GLUON_LAYOUTS)]


class GluonKernel(CompiledKernel):
    """A PrimFunc compiled to Gluon: `.source`, `.save(path)`, `.module()`, `.manifest()`,
    `__call__` (on a GPU)."""

    backend = "gluon"

    @property
    def tile_ir(self) -> str:
        return _describe(self.program)

    def module(self, interpret: bool | None = None):
        return loader.import_module(self.module_file(), False)

    def __call__(self, *args, interpret: bool | None = None, **kwargs):
        """Run on a GPU; with interpret=True (or when Triton is in interpreter mode) run the kernels
        with their layouts erased in Triton's interpreter (triton_codegen/gluon/interpret.py)."""
        if interpret or (interpret is None and loader.triton_library_interpreted()):
            try:
                return run_erased(self.source, self.name, *args, **kwargs)
            except LaunchError as err:
                raise LaunchError(f"{self.name}: {err}") from None
        module = self.module()
        try:
            return module.run(*args, **kwargs)
        except module.LaunchError as err:
            raise LaunchError(f"{self.name}: {err}") from None

    def as_torch_op(self, qualname: str, interpret: bool | None = None):
        raise LaunchError(f"{self.name}: as_torch_op is not available for the Gluon backend yet; call the kernel")

    def kernels_manifest(self) -> list[dict]:
        return [{"name": k.name, "grid": [extent for _, extent in k.grid], "num_warps": k.num_warps,
                 "shared": {t.name: t.decision.to_annotation() for t in k.shared}}
                for k in self.program.kernels]


def _check_supported(func, name: str) -> None:
    """Thread-bound schedules are this backend's input (the Triton backend refuses them); what the
    Gluon lowering cannot express it refuses itself, naming the construct."""


def _describe(program) -> str:
    return pprint.pformat(program, width=110)


def _lower(func, name: str, source_hash: str, passes: tuple[str, ...], options: LowerOptions):
    return lower_gluon(func, name, source_hash, passes)


def _check(kernel: GluonKernel, reference) -> CheckReport:
    """The kernels, layouts erased, in the interpreter against TVM's build of the input; the layouts
    themselves are checked by compiling for sm_90 and on a GPU (benchmarks/gluon_gpu.py)."""
    if not loader.triton_library_interpreted():
        return CheckReport(
            kernel.name,
            [],
            skipped="Triton was imported in compiled mode: the layout-erased check needs "
            "the interpreter (TRITON_INTERPRET=1)",
        )
    return check_kernel(kernel, reference, True)


BACKEND = Backend(
    name="gluon",
    pipeline=gluon_pipeline,
    check_supported=_check_supported,
    lower=_lower,
    emit=emit_module,
    kernel_class=GluonKernel,
    check_kernel=_check,
    describe=_describe,
    expression_ops=frozenset(UNARY_RULES) | frozenset(BINARY_RULES),
)
