"""Write generated modules to files and import them (compiled `@triton.jit` refuses exec'd code).

`TRITON_INTERPRET` is read when `@triton.jit` runs, that is when the module is imported, so each
mode gets its own module object: interpreted (CPU tensors) or compiled (GPU, or ahead of time).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from types import ModuleType

from .environment import triton_mode

_CACHE_DIR = os.path.join(tempfile.gettempdir(), "tir-triton-modules")


def module_path(source: str, name: str, directory: str | None = None) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    folder = directory or _CACHE_DIR
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}_{digest}.py")
    if not os.path.exists(path):
        with open(path, "w") as handle:
            handle.write(source)
    return path


def triton_library_interpreted() -> bool:
    """Triton binds its own @jit helpers (tl.sum, tl.cdiv) to one mode when it is imported: the
    interpreter needs them interpreted, ahead-of-time compiles need them compiled."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    return not isinstance(tl.cdiv, JITFunction)


def import_module(path: str, interpret: bool) -> ModuleType:
    mode = "interp" if interpret else "gpu"
    name = f"tir_triton_generated_{os.path.splitext(os.path.basename(path))[0]}_{mode}"
    if name in sys.modules:
        return sys.modules[name]
    with triton_mode(interpret):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module
