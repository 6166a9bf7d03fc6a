"""The public API: `compile(func_or_module) -> TritonKernel`.

Runs the pass pipeline (verified after every pass unless verify=False), lowers the result to a
TileProgram, emits one standalone module, and wraps it: `.source`, `.save(path)`, `__call__`.
With verification, the last check runs the emitted kernel against TVM's build of the input
(`verify_kernel`): what is verified is what is compiled.
"""

from __future__ import annotations

import builtins
import json
import os
import tempfile
from dataclasses import replace

import torch
import tvm_ffi

from lowering.from_tir import lower_program
from lowering.printer import format_program
from lowering.support import check_supported
from tir_passes.errors import FrontendError, LaunchError, VerificationError
from tir_passes.frontend import as_module
from tir_passes.input_checks import check_input
from tir_passes.pipeline import CHECKS, default_pipeline, run_pipeline

from . import loader
from .check import CheckReport, check_kernel
from .configs import config_space
from .emit_module import VERSION, emit_module


class TritonKernel:
    """A compiled PrimFunc: the generated module's source, and a callable that runs it."""

    def __init__(self, name: str, source: str, program, tir_module, pipeline_result=None):
        self.name = name
        self.source = source
        self.program = program
        self.tir = tir_module
        self.pipeline = pipeline_result
        self.check_report: CheckReport | None = None   # the kernel check compile(verify=True) ran
        self._path: str | None = None

    @property
    def tile_ir(self) -> str:
        return format_program(self.program)

    def save(self, path: str) -> str:
        """Write the module (a directory gets `<name>.py`); returns the file written."""
        if os.path.isdir(path) or path.endswith(os.sep):
            os.makedirs(path, exist_ok=True)
            path = os.path.join(path, f"{self.name}.py")
        try:
            with open(path, "w") as handle:
                handle.write(self.source)
        except OSError as err:
            raise FrontendError(f"cannot write {path}: {err.strerror or err}") from None
        return path

    def module_file(self) -> str:
        if self._path is None:
            self._path = loader.module_path(self.source, self.name)
        return self._path

    def module(self, interpret: bool | None = None):
        return loader.import_module(self.module_file(), _interpreting(interpret))

    def __call__(self, *args, interpret: bool | None = None, **kwargs):
        """Run the module's `run`: arguments by position or by the PrimFunc's parameter names (a
        parameter named `interpret` can only be given by position)."""
        interpret = _interpreting(interpret)
        if interpret and not loader.triton_library_interpreted():
            raise LaunchError(f"{self.name}: running on the CPU needs Triton's interpreter, but Triton was imported "
                              "in compiled mode: set TRITON_INTERPRET=1 before anything imports triton")
        module = self.module(interpret)
        try:
            with loader.triton_mode(interpret):
                return module.run(*args, **kwargs)
        except module.LaunchError as err:
            raise LaunchError(f"{self.name}: {err}") from None

    def as_torch_op(self, qualname: str, interpret: bool | None = None):
        """Register the kernel as the PyTorch op `qualname` ("namespace::name") and return it: it
        takes the parameters the program reads, allocates and returns those it only writes; see
        docs/pytorch.md. The same as a saved module's `as_torch_op(qualname)`."""
        interpret = _interpreting(interpret)
        if interpret and not loader.triton_library_interpreted():
            raise LaunchError(f"{self.name}: an op running on the CPU needs Triton's interpreter, but Triton was "
                              "imported in compiled mode: set TRITON_INTERPRET=1 before anything imports triton")
        module = self.module(interpret)
        try:
            return module.as_torch_op(qualname)
        except module.LaunchError as err:
            raise LaunchError(f"{self.name}: {err}") from None

    def manifest(self) -> dict:
        return {
            "name": self.name,
            "entry_point": "run",
            "tir_triton_version": VERSION,
            "source_structural_hash": self.program.source_hash,
            "passes": list(self.program.passes),
            "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "shape": list(p.shape), "written": p.written,
                        "read": p.read}
                       for p in self.program.params],
            "kernels": [{"name": k.name, "blocks": list(k.source_blocks), "block_sizes": k.block_sizes,
                         "num_warps": k.num_warps, "num_stages": k.num_stages, "configs": config_space(k)}
                        for k in self.program.kernels],
        }

    def write_manifest(self, path: str) -> str:
        with open(path, "w") as handle:
            json.dump(self.manifest(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        return path


def _interpreting(interpret: bool | None) -> bool:
    """Interpret on CPU-only machines or when TRITON_INTERPRET=1; compile for the GPU otherwise."""
    if interpret is not None:
        return interpret
    return os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()


def structural_hash_hex(func) -> str:
    return f"0x{tvm_ffi.structural_hash(func, map_free_vars=True) & 0xFFFFFFFFFFFFFFFF:016x}"


def compile(func_or_module, *, func_name: str | None = None, dump_dir: str | None = None, verify: bool = True,
            gpu: str = "H200", passes=None, disable=(), allow_tf32: bool = False,
            debug: bool = False, backend: str = "triton") -> TritonKernel:  # noqa: A001
    """Compile an S-TIR PrimFunc (or one PrimFunc of an IRModule) to a Triton module.

    backend="gluon": a thread-bound schedule with shared staging (examples/shared_memory.py) to a
    Gluon module whose shared layouts are BankConflictFreeTiling's (gluon_codegen; GPU only).

    debug: an index read from memory that is out of range fails a device assertion naming the
    access and its TVMScript line (also where a `T.assume` claimed it in range), instead of
    reading zero or dropping the store. Triton's interpreter ignores device assertions: this
    acts on a GPU."""
    if backend == "gluon":
        from gluon_codegen import compile_gluon

        return compile_gluon(func_or_module, func_name=func_name, dump_dir=dump_dir, verify=verify, passes=passes,
                             disable=disable)
    if backend != "triton":
        raise FrontendError(f"unknown backend {backend!r}: choose triton or gluon")
    mod = as_module(func_or_module, func_name)
    name = str(mod["main"].attrs["global_symbol"])
    # before the pipeline's checks build anything with TVM: the input's structure, then what the
    # lowering can express (an external symbol would be JIT-linked by the numerics reference)
    check_input(mod)
    check_supported(mod["main"], name)
    pipeline = list(passes) if passes is not None else default_pipeline(gpu)
    result = run_pipeline(mod, pipeline, dump_dir=dump_dir, checks=CHECKS if verify else (), disable=disable)
    applied = tuple(s.name for s in result.stages)
    program = lower_program(result.module["main"], name, structural_hash_hex(mod["main"]), applied, allow_tf32)
    if debug:
        program = replace(program, kernels=tuple(replace(k, debug=True) for k in program.kernels))
    source = emit_module(program)
    builtins.compile(source, f"<tir-triton {name}>", "exec")  # catches indentation bugs at once
    if dump_dir:
        with open(os.path.join(dump_dir, "tile_program.txt"), "w") as handle:
            handle.write(format_program(program))
    kernel = TritonKernel(name, source, program, result.module, result)
    if verify:
        kernel.check_report = verify_kernel(kernel, result, name, allow_tf32, dump_dir)
    return kernel


def verify_kernel(kernel: TritonKernel, result, name: str, allow_tf32: bool, dump_dir: str | None) -> CheckReport:
    """The last check: the compiled kernel (or, for a program checked at reduced sizes, the same
    pipeline's kernel for the reduced copy) against TVM's build of the input, in the interpreter
    (on a GPU, when there is one). Raises VerificationError when it differs."""
    numerics = result.numerics
    checked = kernel
    if numerics.reduced:
        program = lower_program(numerics.final_module["main"], name, kernel.program.source_hash,
                                kernel.program.passes, allow_tf32)
        checked = TritonKernel(name, emit_module(program), program, numerics.final_module)
    interpret = _interpreting(None)
    if interpret and not loader.triton_library_interpreted():
        return CheckReport(name, [], seconds=0.0, skipped="Triton was imported in compiled mode and there is no GPU")
    report = check_kernel(checked, numerics.reference, interpret)
    report.where = numerics.describe()
    if not report.ok:
        raise VerificationError("lowering", "kernel", f"the kernel differs from TVM's build of the input (at "
                                f"{numerics.describe()}), although every stage matched: a decision the llvm "
                                "build does not see, the lowering or the code generator is wrong\n"
                                + "\n".join(report.problems[:10]), _write_kernel_failure(dump_dir, checked))
    return report


def _write_kernel_failure(dump_dir: str | None, kernel: TritonKernel) -> str:
    folder = os.path.join(dump_dir, "failure_kernel") if dump_dir else tempfile.mkdtemp(prefix="tir-triton-failure-kernel-")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{kernel.name}.py"), "w") as handle:
        handle.write(kernel.source)
    with open(os.path.join(folder, "tile_program.txt"), "w") as handle:
        handle.write(format_program(kernel.program))
    return folder

