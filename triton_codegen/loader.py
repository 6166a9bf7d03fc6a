"""Write generated modules to files and import them (compiled `@triton.jit` refuses exec'd code).

`TRITON_INTERPRET` is read when `@triton.jit` runs, that is when the module is imported, so each
mode gets its own module object: interpreted (CPU tensors) or compiled (GPU, or ahead of time).

The module cache lives in the shared temporary folder, where anything may sit at a path: a module
is written atomically (a temporary file of a unique name, then rename), and a file found at its
path is read and compared with the source before it is used (a half-written file, or another
file, is replaced). A PrimFunc's name (`global_symbol`, any string) becomes part of a file name
only through `file_stem`, so `"../..$TMPDIR/x"` or `"sub/dir"` cannot leave the folder or name one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
from types import ModuleType

from .environment import triton_mode

_CACHE_DIR = os.path.join(tempfile.gettempdir(), "tir-triton-modules")


def file_stem(name: str) -> str:
    """`name` as a file name without a folder: letters, digits and `_` kept, anything else `_`, no
    leading dot, at most 100 characters; never empty."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", name)[:100]
    return stem if stem.strip("_") else "kernel"


def module_path(source: str, name: str, directory: str | None = None) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    folder = directory or _CACHE_DIR
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{file_stem(name)}_{digest}.py")
    if _content(path) != source:
        write_atomically(path, source)
    return path


def _content(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def write_atomically(path: str, text: str) -> None:
    """`path` holds `text` or what it held before, never a part: written beside it, then renamed."""
    descriptor, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                             dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def module_pair_path(source: str, name: str, backward_source: str, backward_file: str,
                     siblings: tuple[tuple[str, str], ...] = ()) -> str:
    """A module and its backward, `<name>.py` and `backward_file` in one folder of their own (the
    forward imports the backward, and any (file, source) `siblings` such as a training forward, from
    beside itself); returns the forward's path."""
    texts = [source, backward_source, *(text for _, text in siblings)]
    digest = hashlib.sha256("".join(texts).encode()).hexdigest()[:12]
    folder = os.path.join(_CACHE_DIR, f"{file_stem(name)}_{digest}")
    os.makedirs(folder, exist_ok=True)
    for file_name, text in ((f"{file_stem(name)}.py", source), (backward_file, backward_source), *siblings):
        path = os.path.join(folder, file_name)
        if _content(path) != text:
            write_atomically(path, text)
    return os.path.join(folder, f"{file_stem(name)}.py")


GENERATED_MARKER = "TILE_SUMMARY = "   # a line every module tir-triton writes holds (emit_module.py)


def is_generated_module(path: str) -> bool:
    """Whether `path` is a module tir-triton wrote (not a TVMScript program): read, not imported."""
    content = _content(path) if path.endswith(".py") else None
    return content is not None and any(line.startswith(GENERATED_MARKER) for line in content.splitlines())


def triton_library_interpreted() -> bool:
    """Triton binds its own @jit helpers (tl.sum, tl.cdiv) to one mode when it is imported: the
    interpreter needs them interpreted, ahead-of-time compiles need them compiled."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    return not isinstance(tl.cdiv, JITFunction)


def import_module(path: str, interpret: bool) -> ModuleType:
    """The module at `path` in one Triton mode, imported once per path and content: two modules of
    one file name in different folders (`a/matmul.py`, `b/matmul.py`), or a file rewritten with
    other source, are different modules."""
    mode = "interp" if interpret else "gpu"
    identity = os.path.abspath(path) + "\0" + (_content(path) or "")
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    name = f"tir_triton_generated_{os.path.splitext(os.path.basename(path))[0]}_{digest}_{mode}"
    if name in sys.modules:
        return sys.modules[name]
    with triton_mode(interpret):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module
