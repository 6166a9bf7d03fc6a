"""Load user PrimFuncs from a Python file (`FILE.py[:FUNC]`) or from objects, as an IRModule.

Errors name the file and line (TVMScript parse errors carry `--> file:line:col`), the
function names that exist when a `:FUNC` is missing or ambiguous, and never show a TVM
backtrace.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys

import tvm
from tvm import tirx

from tir_passes.errors import FrontendError, UnsupportedConstructError

_DIAGNOSTIC_LOCATION = re.compile(r"-->\s*(\S+):(\d+):(\d+)")
# TVM's internal phrasing, rewritten for a user: a failed C++ check, a mistyped FFI argument
_FAILED_CHECK = re.compile(r"Check failed: \(.*?\) is false: ")
_MISTYPED_ARGUMENT = re.compile(r"Mismatched type on argument #(\d+) when calling: `script\.ir_builder\.\w+\.(\w+)\(.*"
                                r"Expected `(.+?)` but got `(.+?)`")
_BUILDER_ARGUMENTS = {"match_buffer": "T.match_buffer(handle, shape, dtype) binds a T.handle parameter"}


def split_target(target: str) -> tuple[str, str | None]:
    """`examples/softmax.py:softmax` -> (path, "softmax"); a bare path -> (path, None)."""
    path, sep, func = target.rpartition(":")
    if sep and path.endswith(".py") and func.isidentifier():
        return path, func
    return target, None


def _diagnostic_message(err: BaseException, path: str) -> str:
    text = str(err).strip()
    match = _DIAGNOSTIC_LOCATION.search(text)
    message = _readable(text.splitlines()[0].removeprefix("error:").strip()) if text else type(err).__name__
    if match:
        return f"{match.group(1)}:{match.group(2)}: {message}"
    return f"{path}: {message}"


def _readable(message: str) -> str:
    """TVM's message without its C++ check expression or FFI signature dump."""
    mistyped = _MISTYPED_ARGUMENT.search(message)
    if mistyped:
        position, builder, expected, got = mistyped.groups()
        construct = re.sub(r"(?<!^)(?=[A-Z])", "_", builder).lower()
        hint = _BUILDER_ARGUMENTS.get(construct)
        return (f"T.{construct}: argument #{position} has the wrong type (expected {expected}, got {got})"
                + (f"; {hint}" if hint else ""))
    return _FAILED_CHECK.sub("", message)


def _execute_file(path: str) -> dict:
    if not os.path.isfile(path):
        raise FrontendError(f"{path}: no such file")
    name = "tir_triton_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FrontendError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # TVMScript reads the source through the module
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)  # as `python FILE.py` would: the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise FrontendError(f"{err.filename}:{err.lineno}: Python syntax error: {err.msg}") from None
    except tvm.error.DiagnosticError as err:
        raise FrontendError(f"TVMScript error at {_diagnostic_message(err, path)}") from None
    except Exception as err:  # noqa: BLE001 - the user's module raised: report, don't crash
        raise FrontendError(f"{path}: executing the file raised {type(err).__name__}: {err}") from None
    finally:
        sys.path.remove(folder)
    return vars(module)


def _candidates(namespace: dict) -> dict[str, tirx.PrimFunc]:
    """PrimFuncs defined in the file, by name, in definition order; IRModules are expanded."""
    found: dict[str, tirx.PrimFunc] = {}
    for name, value in namespace.items():
        if name.startswith("_"):
            continue
        if isinstance(value, tirx.PrimFunc):
            found[name] = value
        elif isinstance(value, tvm.IRModule):
            for gvar, func in sorted(value.functions.items(), key=lambda kv: kv[0].name_hint):
                if isinstance(func, tirx.PrimFunc):
                    found[f"{name}.{gvar.name_hint}"] = func
    return found


def _as_single_module(func: tirx.PrimFunc, name: str) -> tvm.IRModule:
    attrs = func.attrs
    if attrs is None or not bool(attrs.get("s_tir", False)):
        raise UnsupportedConstructError(
            f"PrimFunc '{name}' is not S-TIR: write it as @T.prim_func(s_tir=True) with T.sblock "
            "blocks (or build it with te.create_prim_func)")
    return tvm.IRModule({"main": func.with_attr("global_symbol", name.split(".")[-1])})


def load_target(target: str) -> tuple[tvm.IRModule, str]:
    """Read `FILE.py[:FUNC]` and return (module with the PrimFunc as "main", its name)."""
    path, wanted = split_target(target)
    found = _candidates(_execute_file(path))
    if not found:
        raise FrontendError(f"{path}: no @T.prim_func or @I.ir_module with PrimFuncs in this file")
    names = ", ".join(found)
    if wanted is None:
        if len(found) > 1:
            raise FrontendError(f"{path} defines several PrimFuncs ({names}); pick one as {path}:NAME")
        wanted = next(iter(found))
    matches = [n for n in found if n == wanted] or [n for n in found if wanted in (n.split(".")[-1], n.split(".")[0])]
    if len(matches) != 1:
        raise FrontendError(f"{path}: no PrimFunc named '{wanted}' (defined here: {names})")
    return _as_single_module(found[matches[0]], matches[0]), matches[0]


def as_module(func_or_module, func_name: str | None = None) -> tvm.IRModule:
    """A PrimFunc or IRModule given from Python -> a module whose "main" is the function."""
    if isinstance(func_or_module, tirx.PrimFunc):
        attrs = func_or_module.attrs
        default = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "main"
        return _as_single_module(func_or_module, func_name or default)
    if isinstance(func_or_module, tvm.IRModule):
        funcs = {g.name_hint: f for g, f in func_or_module.functions.items() if isinstance(f, tirx.PrimFunc)}
        if not funcs:
            raise FrontendError("the IRModule holds no PrimFunc")
        if func_name is None:
            if len(funcs) > 1:
                raise FrontendError(f"the IRModule holds several PrimFuncs ({', '.join(sorted(funcs))}); pass func_name=")
            func_name = next(iter(funcs))
        if func_name not in funcs:
            raise FrontendError(f"the IRModule has no PrimFunc '{func_name}' (it has {', '.join(sorted(funcs))})")
        func = funcs[func_name]
        symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
        return _as_single_module(func, str(symbol) if symbol is not None else func_name)
    raise FrontendError(f"expected a tvm PrimFunc or IRModule, got {type(func_or_module).__name__}")
