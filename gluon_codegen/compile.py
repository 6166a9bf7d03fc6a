"""`compile(..., backend="gluon")`: the pass that decides shared layouts (BankConflictFreeTiling
with XOR swizzles and tensor-core layouts allowed), the lowering to a GluonProgram, one
standalone module. The kernel object is the Triton backend's (save, module, manifest) with what
differs for Gluon: it runs on a GPU only, and its manifest lists each kernel's shared layouts.
"""

from __future__ import annotations

import builtins
import pprint

from tir_passes.bank_conflict_free_tiling import GLUON_LAYOUTS, BankConflictFreeTiling
from tir_passes.errors import LaunchError, VerificationError
from tir_passes.frontend import as_module
from tir_passes.pipeline import CHECKS, run_pipeline
from triton_codegen import loader
from triton_codegen.check import CheckReport, check_kernel
from triton_codegen.compile import TritonKernel, structural_hash_hex
from triton_codegen.emit_module import VERSION

from .emit import emit_module
from .from_tir import lower_gluon
from .interpret import run_erased


def gluon_pipeline():
    return [BankConflictFreeTiling(GLUON_LAYOUTS)]


class GluonKernel(TritonKernel):
    """A PrimFunc compiled to Gluon: `.source`, `.save(path)`, `.module()`, `.manifest()`,
    `__call__` (on a GPU)."""

    backend = "gluon"

    @property
    def tile_ir(self) -> str:
        return pprint.pformat(self.program, width=110)

    def module(self, interpret: bool | None = None):
        return loader.import_module(self.module_file(), False)

    def __call__(self, *args, interpret: bool | None = None, **kwargs):
        """Run on a GPU; with interpret=True (or when Triton is in interpreter mode) run the kernels
        with their layouts erased in Triton's interpreter (gluon_codegen/interpret.py)."""
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

    def manifest(self) -> dict:
        return {
            "name": self.name,
            "backend": "gluon",
            "entry_point": "run",
            "tir_triton_version": VERSION,
            "source_structural_hash": self.program.source_hash,
            "passes": list(self.program.passes),
            "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "shape": list(p.shape), "written": p.written,
                        "read": p.read} for p in self.program.params],
            "kernels": [{"name": k.name, "grid": [extent for _, extent in k.grid], "num_warps": k.num_warps,
                         "shared": {t.name: t.decision.to_annotation() for t in k.shared}}
                        for k in self.program.kernels],
        }


def compile_gluon(func_or_module, *, func_name: str | None = None, dump_dir: str | None = None,
                  verify: bool = True, passes=None, disable=()) -> GluonKernel:
    """Compile a thread-bound S-TIR PrimFunc with shared staging to a Gluon module. `verify` runs
    the pass checks (the numerics check builds the schedule with its threads serialized) and then
    the kernels, layouts erased, in Triton's interpreter against TVM's build (interpret.py); the
    layouts are checked by compiling for sm_90 and on a GPU (benchmarks/gluon_gpu.py)."""
    mod = as_module(func_or_module, func_name)
    name = str(mod["main"].attrs["global_symbol"])
    pipeline = list(passes) if passes is not None else gluon_pipeline()
    result = run_pipeline(mod, pipeline, dump_dir=dump_dir, checks=CHECKS if verify else (), disable=disable)
    applied = tuple(s.name for s in result.stages)
    program = lower_gluon(result.module["main"], name, structural_hash_hex(mod["main"]), applied)
    source = emit_module(program)
    builtins.compile(source, f"<tir-triton gluon {name}>", "exec")
    kernel = GluonKernel(name, source, program, result.module, result)
    if verify:
        kernel.check_report = _verify_erased(kernel, result, name)
    return kernel


def _verify_erased(kernel: GluonKernel, result, name: str) -> CheckReport:
    """The last check: the kernels, layouts erased, in the interpreter against TVM's build of the
    input (or of its shape-reduced copy, as the Triton backend does)."""
    if not loader.triton_library_interpreted():
        return CheckReport(name, [], skipped="Triton was imported in compiled mode: the layout-erased check needs "
                           "the interpreter (TRITON_INTERPRET=1)")
    numerics = result.numerics
    checked = kernel
    if numerics.reduced:
        program = lower_gluon(numerics.final_module["main"], name, kernel.program.source_hash, kernel.program.passes)
        checked = GluonKernel(name, emit_module(program), program, numerics.final_module)
    report = check_kernel(checked, numerics.reference, True)
    report.where = numerics.describe()
    if not report.ok:
        raise VerificationError("lowering", "kernel", f"the Gluon kernel, layouts erased, differs from TVM's build of "
                                f"the input (at {numerics.describe()}): the lowering or the code generator is wrong\n"
                                + "\n".join(report.problems[:10]))
    return report
