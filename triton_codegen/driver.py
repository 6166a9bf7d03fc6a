"""The public API: `compile(func_or_module) -> kernel`, the one driver every backend goes through.

frontend (one PrimFunc as an IRModule) -> input checks -> the backend's capability check -> the
backend's pass pipeline (verified after every pass unless verify=False) -> the backend's lowering
-> its emitter -> the emitted module's last check against TVM's build of the input (what is
verified is what is compiled). The backend is a value from `backend.py`'s registry; nothing here
depends on which one it is.
"""

from __future__ import annotations

import builtins
import os
import tempfile

import tvm_ffi

from lowering.matmul_precision import resolve_precision
from tir_passes.checks.input_checks import check_input
from tir_passes.contracts.autodiff import signature
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.errors import FrontendError, VerificationError
from tir_passes.infra.frontend import as_module
from tir_passes.passes.autodiff import differentiate, training_forward
from tir_passes.pipeline import CHECKS, run_pipeline

from . import loader
from .backend import Backend, LowerOptions, backend as registered_backend
from .backward_link import link_for
from .check import CheckReport
from .kernel import CompiledKernel, TritonKernel

__all__ = ["CompiledKernel", "TritonKernel", "compile", "structural_hash_hex"]


def structural_hash_hex(func) -> str:
    return f"0x{tvm_ffi.structural_hash(func, map_free_vars=True) & 0xFFFFFFFFFFFFFFFF:016x}"


def compile(func_or_module, *, func_name: str | None = None, dump_dir: str | None = None, verify: bool = True,
            gpu: str = "H200", passes=None, disable=(), float32_matmul_precision: str | None = None,
            allow_tf32: bool | None = None, debug: bool = False, backend: str = "triton",
            wrt=None, save=None, deterministic: bool = False) -> CompiledKernel:  # noqa: A001
    """Compile an S-TIR PrimFunc (or one PrimFunc of an IRModule) with a registered backend.

    float32_matmul_precision: how every tl.dot with fp32 operands computes, in PyTorch's names
    ("highest": IEEE fp32, "high": TF32, "medium": bf16 operands; lowering/matmul_precision.py);
    default `torch.get_float32_matmul_precision()` now. `allow_tf32=True` is an old spelling of
    "high". The result's `advice` says what in the program costs speed (advice.py).

    wrt: parameter names; the backward (`tir_passes.differentiate(func, wrt)`) is compiled too, the
    same way (its dumps in `dump_dir/backward`), as `kernel.backward`; the module names it, so
    `as_torch_op` registers its autograd formula and `save` writes both (docs/autodiff.md).
    save: with wrt, which forward intermediates a training forward saves for the backward instead of it
    recomputing them (`differentiate(func, wrt, save=...)`: None, "auto" or names). The training forward
    (`tir_passes.training_forward`) is compiled too, as `kernel.training` (dumps in `dump_dir/training`); the
    op runs it, keeps the saved values in setup_context and passes them to the backward.

    backend="gluon": a thread-bound schedule with shared staging (examples/shared_memory.py) to a
    Gluon module whose shared layouts are BankConflictFreeTiling's (triton_codegen/gluon; GPU only).

    debug: an index read from memory that is out of range fails a device assertion naming the
    access and its TVMScript line (also where a `T.assume` claimed it in range), instead of
    reading zero or dropping the store. Triton's interpreter ignores device assertions: this
    acts on a GPU.

    deterministic: every output element's bits are a fixed function of the inputs it reads, whatever
    the batch, the other axes' sizes, the tuned config and the GPU's scheduling: Tiling pins every
    order-sensitive reduction's tiles and warps (tir_passes/analyses/determinism.py), the contract
    check verifies the pins, and every config of the module and the tuner keeps them
    (docs/determinism.md)."""
    chosen = registered_backend(backend)
    if deterministic and not chosen.deterministic:
        raise FrontendError(f"deterministic=True is a promise the {chosen.name} backend's pipeline does not make")
    precision = resolve_precision(float32_matmul_precision, allow_tf32)
    mod = as_module(func_or_module, func_name)
    name = str(mod["main"].attrs["global_symbol"])
    # before the pipeline's checks build anything with TVM: the input's structure, then what the
    # backend can express (an external symbol would be JIT-linked by the numerics reference)
    check_input(mod)
    chosen.check_supported(mod["main"], name)
    backward = training = None
    if save is not None and wrt is None:
        raise FrontendError("save names forward values to keep for the backward; give wrt too")
    if wrt is not None:
        def compile_part(func, folder: str):
            return compile(func, dump_dir=os.path.join(dump_dir, folder) if dump_dir else None,
                           verify=verify, gpu=gpu, passes=passes, disable=disable, float32_matmul_precision=precision,
                           debug=debug, backend=backend, deterministic=deterministic)

        backward_func = differentiate(mod["main"], wrt, save=save)
        backward = compile_part(backward_func, "backward")
        saved = signature(backward_func).saved
        training = compile_part(training_forward(mod["main"], saved), "training") if saved else None
        link = link_for(signature(backward_func), backward.name, training.name if training is not None else None)
    pipeline = list(passes) if passes is not None else \
        chosen.pipeline(gpu, deterministic=True) if deterministic else chosen.pipeline(gpu)
    result = run_pipeline(mod, pipeline, dump_dir=dump_dir, checks=CHECKS if verify else (), disable=disable)
    options = LowerOptions(float32_matmul_precision=precision, debug=debug)
    kernel = _emit(chosen, result.module, name, structural_hash_hex(mod["main"]),
                   tuple(s.name for s in result.stages), options, result)
    if deterministic and not getattr(kernel.program, "deterministic", False):
        raise FrontendError("deterministic=True, but the passes given do not tile deterministically (build them "
                            "with default_pipeline(gpu, deterministic=True))")
    if backward is not None:
        kernel = kernel.with_backward(backward, link, training)
    kernel.float32_matmul_precision = precision
    kernel.advice = chosen.advise(kernel.program, result.module["main"], gpu_spec(gpu))
    if dump_dir:
        with open(os.path.join(dump_dir, "tile_program.txt"), "w") as handle:
            handle.write(chosen.describe(kernel.program))
    if verify:
        kernel.check_report = verify_kernel(chosen, kernel, result, options, dump_dir)
    return kernel


def _emit(chosen: Backend, module, name: str, source_hash: str, passes: tuple[str, ...], options: LowerOptions,
          result=None) -> CompiledKernel:
    program = chosen.lower(module["main"], name, source_hash, passes, options)
    source = chosen.emit(program)
    builtins.compile(source, f"<tir-triton {chosen.name} {name}>", "exec")  # catches indentation bugs at once
    return chosen.kernel_class(name, source, program, module, result)


def verify_kernel(chosen: Backend, kernel: CompiledKernel, result, options: LowerOptions,
                  dump_dir: str | None) -> CheckReport:
    """The last check: the emitted kernel (or, for a program checked at reduced sizes, the same
    pipeline's kernel for the reduced copy) against TVM's build of the input. Raises
    VerificationError when it differs."""
    numerics = result.numerics
    checked = kernel
    if numerics.reduced:
        checked = _emit(chosen, numerics.final_module, kernel.name, kernel.program.source_hash,
                        kernel.program.passes, options)
    report = chosen.check_kernel(checked, numerics.reference)
    if report.skipped:
        return report
    report.where = numerics.describe()
    if not report.ok:
        raise VerificationError("lowering", "kernel", f"the {chosen.name} kernel differs from TVM's build of the input "
                                f"(at {numerics.describe()}), although every stage matched: a decision the llvm "
                                "build does not see, the lowering or the code generator is wrong (second opinion: "
                                f"{getattr(report, 'second_opinion', '') or 'none'})\n"
                                + "\n".join(report.problems[:10]), _write_kernel_failure(chosen, dump_dir, checked))
    return report


def _write_kernel_failure(chosen: Backend, dump_dir: str | None, kernel: CompiledKernel) -> str:
    folder = os.path.join(dump_dir, "failure_kernel") if dump_dir else tempfile.mkdtemp(prefix="tir-triton-failure-kernel-")  # noqa: E501
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{loader.file_stem(kernel.name)}.py"), "w") as handle:
        handle.write(kernel.source)
    with open(os.path.join(folder, "tile_program.txt"), "w") as handle:
        handle.write(chosen.describe(kernel.program))
    return folder
