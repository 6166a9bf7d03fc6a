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
import subprocess
import sys
from dataclasses import dataclass

from lowering.accesses import pointer_name, stride_name
from lowering.tile_ir import TileKernel

from .loader import import_module, triton_library_interpreted

_POINTER_TYPES = {"bool": "*i1", "int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
                  "uint8": "*u8", "uint16": "*u16", "uint32": "*u32", "uint64": "*u64", "float16": "*fp16",
                  "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64"}
_SCALAR_TYPES = {"int32": "i32", "int64": "i64", "float32": "fp32", "float64": "fp64", "bool": "i1"}


@dataclass(frozen=True)
class AotResult:
    kernel: str
    arch: int
    shared_bytes: int | None


class AotCompileError(RuntimeError):
    """Triton refused to compile a generated kernel for a GPU architecture."""


def kernel_signature(kernel: TileKernel, config: dict[str, int]) -> tuple[dict, dict]:
    signature, constexprs = {}, {}
    for buf in kernel.buffers:
        signature[pointer_name(buf.name)] = _POINTER_TYPES[buf.dtype]
        for axis in range(buf.ndim):
            signature[stride_name(buf.name, axis)] = "i64" if buf.name in kernel.int64_buffers else "i32"
    for scalar in kernel.scalars:
        signature[scalar.name] = _SCALAR_TYPES.get(scalar.dtype, "i32")
    for block in kernel.block_sizes:
        signature[block] = "constexpr"
        constexprs[block] = config[block]
    if kernel.group_m:
        signature["GROUP_M"] = "constexpr"
        constexprs["GROUP_M"] = kernel.group_m
    return signature, constexprs


def _compile_here(request: dict) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget

    module = import_module(request["path"], interpret=False)
    source = triton.compiler.ASTSource(fn=getattr(module, request["kernel"]), signature=request["signature"],
                                       constexprs=request["constexprs"])
    compiled = triton.compile(source, target=GPUTarget("cuda", request["arch"], 32), options=request["options"])
    return {"ok": True, "shared": getattr(compiled.metadata, "shared", None)}


class _Worker:
    process: subprocess.Popen | None = None

    @classmethod
    def ask(cls, request: dict) -> dict:
        if cls.process is None or cls.process.poll() is not None:
            env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1"}
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
            cls.process = subprocess.Popen([sys.executable, "-m", "triton_codegen.aot"], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True, env=env)
        cls.process.stdin.write(json.dumps(request) + "\n")
        cls.process.stdin.flush()
        line = cls.process.stdout.readline()
        if not line:
            raise AotCompileError(f"the ahead-of-time compile worker died compiling {request['kernel']}")
        return json.loads(line)


def compile_ahead_of_time(module_file: str, kernel: TileKernel, config: dict[str, int], arch: int) -> AotResult:
    signature, constexprs = kernel_signature(kernel, config)
    request = {"path": module_file, "kernel": kernel.name, "signature": signature, "constexprs": constexprs,
               "options": {"num_warps": config["num_warps"], "num_stages": config["num_stages"], "debug": kernel.debug},
               "arch": arch}
    if triton_library_interpreted():
        reply = _Worker.ask(request)
    else:
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        try:
            reply = _compile_here(request)
        except Exception as err:  # noqa: BLE001 - reported like the worker's failures
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    if not reply["ok"]:
        raise AotCompileError(f"{kernel.name} does not compile for sm_{arch} with {config}:\n{reply['error']}")
    return AotResult(kernel.name, arch, reply.get("shared"))


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
