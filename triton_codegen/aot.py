"""Compile generated kernels ahead of time for a real GPU architecture, on a machine with no GPU.

The interpreter accepts kernels that no GPU would (non-power-of-two aranges, tl.dot tiles under
16, too much shared memory); compiling to PTX/cubin for sm_90 and sm_80 catches those here.

Triton binds its library helpers to one mode at import, so a process that runs the interpreter
cannot also compile: then the compile runs in a worker process (`python -m triton_codegen.aot`)
that imports Triton in compiled mode, started once and reused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from triton_codegen.environment import compiled_mode_environment, default_fp_fusion
from tir_passes.infra.dtypes import pointer_types
from tir_passes.infra.names import pointer_name, python_name, stride_name
from lowering.tile_ir import BufferArg, ScalarArg, TileKernel

from .descriptors import DescriptorPlan
from .jit_options import unspecialized_scalars
from .loader import import_module, triton_library_interpreted

_POINTER_TYPES = pointer_types()
_SCALAR_TYPES = {"int32": "i32", "int64": "i64", "float32": "fp32", "float64": "fp64", "bool": "i1"}


@dataclass(frozen=True)
class AotResult:
    kernel: str
    arch: int
    shared_bytes: int | None
    registers: int | None = None       # per thread, from the cubin (cuobjdump)
    spilled_bytes: int | None = None   # local memory per thread: register spills
    tma_copies: int = 0                # TMA instructions (cp.async.bulk.tensor) in the PTX
    ttgir: str = ""                    # with listings=True: Triton's GPU IR (the layouts) and the PTX
    ptx: str = ""


@dataclass(frozen=True)
class SavedKernel:
    """What the ahead-of-time compile reads of a TileKernel (its arguments, block constexprs and
    options), from a saved module's TILE_SUMMARY entry: no TileProgram, no TVM."""

    name: str
    buffers: tuple[BufferArg, ...]
    scalars: tuple[ScalarArg, ...]
    int64_buffers: tuple[str, ...]
    block_sizes: dict[str, int]
    group_m: int | None
    debug: bool = False
    deterministic: bool = False   # compiled as the program's arithmetic (jit_options.py)

    @classmethod
    def of(cls, name: str, summary: dict) -> "SavedKernel":
        arguments = summary.get("arguments")
        if arguments is None:
            raise AotCompileError(f"{name}: the module's TILE_SUMMARY does not list the kernel's arguments (a module "
                                  "written before they were recorded): compile the PrimFunc again")
        blocks: dict[str, int] = {}
        for dim in summary["dims"]:
            blocks.setdefault(dim["block"], dim["default"])
        return cls(name, tuple(BufferArg(n, dtype, ndim) for n, dtype, ndim in arguments["buffers"]),
                   tuple(ScalarArg(*entry[:2], entry[2] if len(entry) > 2 else python_name(entry[0]))
                         for entry in arguments["scalars"]), tuple(arguments["int64"]),
                   blocks, summary.get("group_m"), bool(arguments.get("debug", False)),
                   bool(arguments.get("deterministic", False)))


def saved_arguments(kernel: TileKernel) -> dict:
    """The kernel's arguments as its signature takes them, written in a module's TILE_SUMMARY
    (hardware_model) and read back by SavedKernel.of, so a saved module is compiled ahead of time
    without its TileProgram (`tir-triton model` without TVM)."""
    return {"buffers": [[b.name, b.dtype, b.ndim] for b in kernel.buffers],
            "scalars": [[s.name, s.dtype, s.param] for s in kernel.scalars],
            "int64": list(kernel.int64_buffers), "debug": kernel.debug, "deterministic": kernel.deterministic}


class AotCompileError(RuntimeError):
    """Triton refused to compile a generated kernel for a GPU architecture."""


def kernel_signature(
    kernel: TileKernel, config: dict[str, int], plan: DescriptorPlan | None = None
) -> tuple[dict, dict]:
    """The pointer kernel's signature, or with a plan its `_tma` variant's (descriptors typed
    `tensordesc<fp16[128, 64]>` with the config's block sizes, as Triton types a launch's)."""
    signature, constexprs = {}, {}
    dtypes = {buf.name: buf.dtype for buf in kernel.buffers}
    for buf in kernel.buffers:
        signature[pointer_name(buf.name)] = _POINTER_TYPES[buf.dtype]
        for axis in range(buf.ndim):
            signature[stride_name(buf.name, axis)] = "i64" if buf.name in kernel.int64_buffers else "i32"
    for scalar in kernel.scalars:
        signature[scalar.param] = _SCALAR_TYPES.get(scalar.dtype, "i32")
    for descriptor in plan.descriptors if plan else ():
        block = ", ".join(str(config[name]) if name else "1" for name in descriptor.blocks)
        signature[descriptor.param] = f"tensordesc<{_POINTER_TYPES[dtypes[descriptor.buffer]][1:]}[{block}]>"
    for block in kernel.block_sizes:
        signature[block] = "constexpr"
        constexprs[block] = config[block]
    if kernel.group_m:
        signature["GROUP_M"] = "constexpr"
        constexprs["GROUP_M"] = config.get("GROUP_M", kernel.group_m)
    return signature, constexprs


def specialized_signature(
    kernel: TileKernel, config: dict[str, int], values: dict[str, int]
) -> tuple[dict, dict, list]:
    """The signature a launch with these integer arguments compiles (strides, sizes by name), as
    Triton specializes it: an integer equal to 1 becomes a constant, multiples of 16 and pointers
    (torch allocations are 256-byte aligned) are marked divisible by 16. Returns (signature,
    constexprs, [argument index, ...] of the divisible ones)."""
    signature, constexprs = kernel_signature(kernel, config)
    divisible = []
    unspecialized = unspecialized_scalars(kernel)  # do_not_specialize (deterministic kernels)
    for index, (name, kind) in enumerate(signature.items()):
        if kind.startswith("*"):
            divisible.append(index)
        elif kind != "constexpr" and name in values and name not in unspecialized:
            if values[name] == 1:
                signature[name], constexprs[name] = "constexpr", 1
            elif values[name] % 16 == 0:
                divisible.append(index)
    return signature, constexprs, divisible


def _compile_here(request: dict) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget

    module = import_module(request["path"], interpret=False)
    attrs = {(index,): [["tt.divisibility", 16]] for index in request.get("divisible", ())}
    source = triton.compiler.ASTSource(
        fn=getattr(module, request["kernel"]),
        signature=request["signature"],
        constexprs=request["constexprs"],
        attrs=attrs,
    )
    compiled = triton.compile(source, target=GPUTarget("cuda", request["arch"], 32), options=request["options"])
    reply = {
        "ok": True,
        "shared": getattr(compiled.metadata, "shared", None),
        "tma_copies": compiled.asm["ptx"].count("cp.async.bulk.tensor"),
    }
    if request.get("resources"):
        reply.update(_cubin_resources(compiled.asm["cubin"]))
    if request.get("listings"):
        reply.update(ttgir=compiled.asm["ttgir"], ptx=compiled.asm["ptx"])
    return reply


def _cubin_resources(cubin: bytes) -> dict:
    """Registers and local memory per thread, as `cuobjdump -res-usage` reads them from the cubin
    (Triton reports them only once a GPU loads the kernel). Empty when cuobjdump is missing."""
    import triton

    bundled = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    tool = bundled if os.path.exists(bundled) else shutil.which("cuobjdump")
    if tool is None:
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        report = subprocess.run([tool, "-res-usage", handle.name], capture_output=True, text=True).stdout
    usage = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", report)
    if usage is None:
        return {}
    return {"registers": int(usage.group(1)), "spilled": max(int(usage.group(2)), int(usage.group(3)))}


class _Worker:
    process: subprocess.Popen | None = None

    @classmethod
    def ask(cls, request: dict) -> dict:
        if cls.process is None or cls.process.poll() is not None:
            env = compiled_mode_environment()
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
            cls.process = subprocess.Popen(
                [sys.executable, "-m", "triton_codegen.aot"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
        cls.process.stdin.write(json.dumps(request) + "\n")
        cls.process.stdin.flush()
        line = cls.process.stdout.readline()
        if not line:
            raise AotCompileError(f"the ahead-of-time compile worker died compiling {request['kernel']}")
        return json.loads(line)


def compile_ahead_of_time(
    module_file: str,
    kernel: TileKernel,
    config: dict[str, int],
    arch: int,
    values: dict[str, int] | None = None,
    plan: DescriptorPlan | None = None,
    listings: bool = False,
) -> AotResult:
    """Compile one kernel at one config for sm_`arch`, or with a plan its `_tma` variant
    (descriptors.plan_descriptors). With `values` (the launch's integer arguments by name) the
    pointer kernel is specialized as that launch would be, and the result has the registers and
    spills the hardware model needs; with `listings` the TTGIR and PTX (tests compare two
    launches' codegen with them)."""
    if values is None:
        (signature, constexprs), divisible = kernel_signature(kernel, config, plan), []
    elif plan is None:
        signature, constexprs, divisible = specialized_signature(kernel, config, values)
    else:
        raise ValueError("a specialized compile (values) is of the pointer kernel only")
    name = plan.variant if plan else kernel.name
    request = {
        "path": module_file,
        "kernel": name,
        "signature": signature,
        "constexprs": constexprs,
        "options": {"num_warps": config["num_warps"], "num_stages": config["num_stages"], "debug": kernel.debug,
                    "enable_fp_fusion": not kernel.deterministic},
        "arch": arch,
        "divisible": divisible,
        "resources": values is not None,
        "listings": listings,
    }
    if triton_library_interpreted():
        reply = _Worker.ask(request)
    else:
        default_fp_fusion()
        try:
            reply = _compile_here(request)
        except Exception as err:  # noqa: BLE001 - reported like the worker's failures
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    if not reply["ok"]:
        raise AotCompileError(f"{name} does not compile for sm_{arch} with {config}:\n{reply['error']}")
    return AotResult(
        name, arch, reply.get("shared"), reply.get("registers"), reply.get("spilled"), reply.get("tma_copies", 0),
        reply.get("ttgir", ""), reply.get("ptx", ""),
    )


def _serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = _compile_here(request)
        except Exception as err:  # noqa: BLE001 - sent back to the caller, which raises
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
