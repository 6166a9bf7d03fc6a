"""The backend seam: what the driver asks of a backend, and the registry it asks.

A backend is a value (its name, its pipeline, its capability check, its lowering, its emitter, its
kernel class, its last check and its op table); the driver never tests a backend's name to choose
a code path. A new backend is a folder with a module defining `BACKEND` and one line in
`REGISTERED` (docs/writing-a-backend.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

from tir_passes.errors import FrontendError

# name -> the module whose BACKEND it is (imported when first asked for: a backend's imports are its own)
REGISTERED = {
    "triton": "triton_codegen.triton_backend",
    "gluon": "triton_codegen.gluon.backend",
}


@dataclass(frozen=True)
class LowerOptions:
    """What the user chose that the lowering and emitter read (never re-derived by them)."""

    float32_matmul_precision: str = "highest"   # PyTorch's name (lowering/matmul_precision.py)
    debug: bool = False


@dataclass(frozen=True)
class Backend:
    name: str
    pipeline: Callable[[str], list]                       # gpu name -> the S-TIR passes to run
    check_supported: Callable[[object, str], None]        # (PrimFunc, name): raise before any pass runs
    lower: Callable[..., object]  # (PrimFunc, name, source_hash, passes, LowerOptions) -> program
    emit: Callable[[object], str]  # program -> the module's source
    kernel_class: type  # (name, source, program, tir, pipeline_result) -> kernel
    check_kernel: Callable[..., object]  # (kernel, ReferenceRun) -> CheckReport, or None to skip
    describe: Callable[[object], str]  # program -> its text, for dumps and reports
    expression_ops: frozenset[str]  # the lowering's expression ops the emitter writes
    deterministic: bool = False  # pipeline(gpu, deterministic=True) keeps the promise
    advise: Callable[..., tuple] = lambda program, func, spec: ()  # (program, final PrimFunc, GpuSpec) -> advice


def backend(name: str) -> Backend:
    """The registered backend called `name`."""
    if name not in REGISTERED:
        raise FrontendError(f"unknown backend {name!r}: choose one of {', '.join(sorted(REGISTERED))}")
    return import_module(REGISTERED[name]).BACKEND


def backends() -> list[Backend]:
    return [backend(name) for name in sorted(REGISTERED)]
