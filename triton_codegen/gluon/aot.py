"""Gluon modules on a machine without a GPU: compile their kernels ahead of time for sm_90 (what
the PTX says about shared-memory instructions), and ask Gluon how many bank conflicts each
register/shared layout pair has (`gl.bank_conflicts`, evaluated while Gluon traces a probe).

Both need Triton in compiled mode, which a process running the interpreter cannot switch to, so
they run in a worker process (`python -m triton_codegen.gluon.aot`), one per call; a call takes many
modules or many layout pairs at once, since starting the worker (importing Triton) is the slow part.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

from tir_passes.infra.dtypes import pointer_types
from tir_passes.infra.names import pointer_name, stride_name
from triton_codegen.environment import compiled_mode_environment

_POINTER_TYPES = pointer_types()


class GluonAotError(RuntimeError):
    """Triton refused to compile a generated Gluon kernel."""


@dataclass(frozen=True)
class GluonAotResult:
    kernel: str
    arch: int
    shared_bytes: int
    num_warps: int
    shared_instructions: dict     # PTX shared-memory instruction -> count (ld.shared.v4.b32, stmatrix..., ...)
    barriers: int                 # bar.sync / barrier.sync in the PTX
    mma: int                      # wgmma instructions in the PTX
    triton: str                   # the Triton version that compiled it


def kernel_signature(kernel, params) -> dict:
    dtypes = {p.name: p.dtype for p in params}
    shapes = {p.name: p.shape for p in params}
    signature = {}
    for buffer in kernel.buffers:
        signature[pointer_name(buffer)] = _POINTER_TYPES[dtypes[buffer]]
        for axis in range(len(shapes[buffer])):
            signature[stride_name(buffer, axis)] = "i32"
    return signature


def _ask(request: dict) -> dict:
    env = compiled_mode_environment()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-m", "triton_codegen.gluon.aot"], input=json.dumps(request), text=True,
                          capture_output=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise GluonAotError(f"the Gluon compile worker failed:\n{done.stderr[-3000:]}")
    reply = json.loads(lines[-1])
    if not reply["ok"]:
        raise GluonAotError(reply["error"])
    return reply


def compile_ahead_of_time(module_file: str, program, arch: int = 90) -> list[GluonAotResult]:
    """Compile every kernel of a generated module for sm_`arch` (no GPU needed)."""
    return compile_modules([(module_file, program)], arch)[0]


def compile_modules(modules: list[tuple[str, object]], arch: int = 90) -> list[list[GluonAotResult]]:
    """`compile_ahead_of_time` for each (module file, GluonProgram), in one worker."""
    request = [{"path": path, "kernels": [{"name": k.name, "signature": kernel_signature(k, program.params),
                                           "num_warps": k.num_warps} for k in program.kernels]}
               for path, program in modules]
    reply = _ask({"do": "compile", "modules": request, "arch": arch})
    return [[GluonAotResult(r["kernel"], arch, r["shared"], r["num_warps"], r["shared_instructions"], r["barriers"],
                            r["mma"], r["triton"]) for r in results] for results in reply["results"]]


def bank_conflicts(pairs: list[dict]) -> list[int]:
    """gl.bank_conflicts for each {"dtype", "shape", "register": layout source, "shared": layout
    source}: the conflicts Gluon counts per wavefront of the ld/st.shared it would emit."""
    return _ask({"do": "bank_conflicts", "pairs": pairs})["conflicts"]


# --- the worker ------------------------------------------------------------------------------------
def _compile(request: dict) -> dict:
    return {"ok": True, "results": [_compile_module(module, request["arch"]) for module in request["modules"]]}


def _compile_module(request: dict, arch: int) -> list[dict]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from triton_codegen.loader import import_module

    module = import_module(request["path"], interpret=False)
    results = []
    for kernel in request["kernels"]:
        source = GluonASTSource(getattr(module, kernel["name"]), kernel["signature"], {})
        compiled = triton.compile(
            source, target=GPUTarget("cuda", arch, 32), options={"num_warps": kernel["num_warps"]}
        )
        ptx = compiled.asm["ptx"]
        counts: dict[str, int] = {}
        for op in re.findall(r"\b((?:ld|st)\.shared(?:\.v\d)?\.\w+|(?:ld|st)matrix[\w.]*)", ptx):
            counts[op] = counts.get(op, 0) + 1
        results.append(
            {
                "kernel": kernel["name"],
                "shared": compiled.metadata.shared,
                "triton": triton.__version__,
                "num_warps": compiled.metadata.num_warps,
                "shared_instructions": dict(sorted(counts.items())),
                "barriers": len(re.findall(r"\bbar(?:rier)?\.sync", ptx)),
                "mma": len(re.findall(r"\bwgmma\.mma_async", ptx)),
            }
        )
    return results


def _bank_conflicts(request: dict) -> dict:
    import contextlib
    import io

    from triton._filecheck import run_parser
    from triton.backends.compiler import GPUTarget
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def probe(register: gl.constexpr, shared: gl.constexpr):
        gl.static_print("bank_conflicts:", gl.bank_conflicts(register, shared))

    names = {"gl": gl}
    counted = []
    for pair in request["pairs"]:
        dtype = getattr(gl, pair["dtype"])
        shape = pair["shape"]
        register = gl.distributed_type(dtype, shape, eval(pair["register"], names))  # noqa: S307 - our own layout text
        shared = gl.shared_memory_descriptor_type(dtype, shape, eval(pair["shared"], names), shape)  # noqa: S307
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            run_parser(probe, (register, shared), {"num_warps": pair["num_warps"]}, target=GPUTarget("cuda", 90, 32))
        counted.append(int(printed.getvalue().split("bank_conflicts:")[-1].split()[0]))
    return {"ok": True, "conflicts": counted}


def _serve() -> None:
    request = json.loads(sys.stdin.read())
    try:
        reply = _compile(request) if request["do"] == "compile" else _bank_conflicts(request)
    except Exception as err:  # noqa: BLE001 - sent back to the caller, which raises
        reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    sys.stdout.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    _serve()
