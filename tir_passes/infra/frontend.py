"""Load user PrimFuncs from a Python file (`FILE.py[:FUNC]`) or from objects, as an IRModule.

Errors name the file and line (TVMScript parse errors carry `--> file:line:col`), the
function names that exist when a `:FUNC` is missing or ambiguous, and never show a TVM
backtrace. The classic mistakes of a user coming from an older TVM or a tutorial get what to
write instead (docs/bad-input.md): a `@T.prim_func` without `s_tir=True` around `T.sblock`s
(TVM's own message suggests turning its well-formedness check off), `from tvm.script import tir`,
`T.block` and the other renames of TVM 0.27 (`_RENAMED`), TE tensors or a Python function where a
PrimFunc is expected.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re
import sys

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import FrontendError, UnsupportedConstructError
from tir_passes.infra.pass_util import replace_block

_DIAGNOSTIC_LOCATION = re.compile(r"-->\s*(\S+):(\d+):(\d+)")
# TVM's internal phrasing, rewritten for a user: a failed C++ check, a mistyped FFI argument
_FAILED_CHECK = re.compile(r"Check failed: \(.*?\) is false: ")
_MISTYPED_ARGUMENT = re.compile(r"Mismatched type on argument #(\d+) when calling: `script\.ir_builder\.\w+\.(\w+)\(.*"
                                r"Expected `(.+?)` but got `(.+?)`")
_BUILDER_ARGUMENTS = {"match_buffer": "T.match_buffer(handle, shape, dtype) binds a T.handle parameter"}
_NOT_WELL_FORMED = "Program is not well-formed"
_PRIM_FUNC_DECORATOR = re.compile(r"^\s*@\s*\w+\.prim_func\b(.*)$")
_MISSING_NAME = (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"),
                 re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"),
                 re.compile(r"No module named '([\w.]+)\.(\w+)'"),
                 re.compile(r"'(\w+)' object has no attribute '(\w+)'"))
# (the module or class TVM 0.27 says lacks it, the name) -> what to write instead: the renames of
# TVM 0.27 that a user's file meets (tutorials written for older TVM use the left-hand names)
_RENAMED = {
    ("tvm.script", "tir"): "`from tvm.script import tirx as T` (TVM 0.27 renamed tir to tirx), "
                           "and `@T.prim_func(s_tir=True)` for functions with T.sblock blocks",
    ("tvm", "tir"): "`from tvm import tirx` for IR nodes and ops, `from tvm import s_tir` for SBlock and Schedule "
                    "(TVM 0.27 split tvm.tir)",
    ("tvm.tirx.script", "block"): '`with T.sblock("name"):` inside `@T.prim_func(s_tir=True)` '
                                  "(TVM 0.27 renamed T.block to T.sblock)",
    ("tvm.tirx.script", "block_attr"): "`T.sblock_attr` (TVM 0.27 renamed T.block_attr)",
    ("tvm.tirx.script", "Block"): '`with T.sblock("name"):` (TVM 0.27 renamed T.block to T.sblock)',
    ("Schedule", "get_block"): "`sch.get_sblock(name)` (TVM 0.27 renamed blocks to sblocks)",
    ("tvm", "arith"): "`tvm.sym` (TVM 0.27 renamed tvm.arith)",
    ("tvm", "nd"): "`tvm.runtime.tensor(array, device)` (TVM 0.27 removed tvm.nd)",
    ("tvm", "build"): "`tvm.compile(...)` or `tvm.tirx.build(...)`",
}


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
    if not match:
        return f"{path}: {message}"
    where, line = match.group(1), int(match.group(2))
    instead = _renamed(message)
    if instead:
        message = f"{message}; write {instead}"
    elif message.startswith(_NOT_WELL_FORMED):
        # TVM suggests check_well_formed=False: that hides the mistake until a later stage
        line, message = _undeclared_buffer(where, line, text) or _not_well_formed(where, line)
    # TVM names the file by its absolute path: name it as the user did, as the other errors do
    return f"{path if os.path.abspath(where) == os.path.abspath(path) else where}:{line}: {message}"


_UNDECLARED = re.compile(r"buffer (\w+) is used at .* without a prior DeclBuffer")


def _undeclared_buffer(path: str, line: int, text: str) -> tuple[int, str] | None:
    """`t = T.alloc_buffer(...)` inside a T.sblock: TVM's parser declares no buffer there and its
    well-formedness check refuses the function at its decorator; name the allocation's line."""
    found = _UNDECLARED.search(text)
    if not found:
        return None
    allocation = re.compile(rf"^\s*{re.escape(found.group(1))}\s*=\s*T\.alloc_buffer\(")
    for number in range(line, line + 400):
        if allocation.match(linecache.getline(path, number)):
            return number, (f"`{found.group(1)} = T.alloc_buffer(...)` inside a T.sblock declares no buffer in S-TIR "
                            "(TVM's well-formedness check: it is used without a declaration); write "
                            f"`{found.group(1)} = T.sblock_alloc_buffer(...)` for a buffer of the block, or "
                            "T.alloc_buffer at the function's top level")
    return None


def _not_well_formed(path: str, line: int) -> tuple[int, str]:
    """Without s_tir=True, T.sblock blocks make a function TVM refuses: say so at its decorator
    (the diagnostic points at the outermost decorator, an @I.ir_module's class for a method)."""
    for number in range(line, line + 40):
        decorator = _PRIM_FUNC_DECORATOR.match(linecache.getline(path, number))
        if decorator and "s_tir" not in decorator.group(1):
            return number, ("@T.prim_func without s_tir=True: a function with T.sblock blocks is S-TIR; "
                            "write @T.prim_func(s_tir=True)")
        if decorator:
            break
    return line, ("TVM's well-formedness check refused the program (turning it off with check_well_formed=False "
                  "only moves the failure: tir-triton needs well-formed S-TIR, written with @T.prim_func(s_tir=True))")


def _renamed(message: str) -> str | None:
    """What to write instead of a name TVM 0.27 renamed or removed, from its error message."""
    for pattern in _MISSING_NAME:
        found = pattern.search(message)
        if found:
            first, second = found.groups()
            owner, name = (second, first) if pattern is _MISSING_NAME[0] else (first, second)
            return _RENAMED.get((owner, name))
    return None


def _without_paths(message: str) -> str:
    """Python's ImportError names the installed package's file: not the user's concern."""
    return re.sub(r" \((?:/|[A-Za-z]:\\)[^)]*\)", "", message)


def _raising_line(err: BaseException, path: str) -> str:
    """`path:line` of the deepest frame of the user's file in the traceback, else the path."""
    line = None
    frame = err.__traceback__
    target = os.path.abspath(path)
    while frame is not None:
        if os.path.abspath(frame.tb_frame.f_code.co_filename) == target:
            line = frame.tb_lineno
        frame = frame.tb_next
    return f"{path}:{line}" if line else path


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
        where = _raising_line(err, path)
        instead = _renamed(str(err))
        if instead:
            raise FrontendError(f"{where}: {_without_paths(str(err))}; write {instead}") from None
        raise FrontendError(f"{where}: executing the file raised {type(err).__name__}: {err}") from None
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


def _te_tensors(value) -> list | None:
    """The TE tensors `value` is or holds (a tensor, a list/tuple of them), else None."""
    from tvm import te

    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if items and all(isinstance(item, te.Tensor) for item in items):
        return items
    return None


def _create_prim_func_call(named: list[tuple[str, object]]) -> str:
    """`te.create_prim_func([A, B, C])`: the placeholders first, then the computed tensors."""
    from tvm import te

    inputs = [name for name, tensor in named if isinstance(tensor.op, te.PlaceholderOp)]
    outputs = [name for name, tensor in named if not isinstance(tensor.op, te.PlaceholderOp)]
    return f"te.create_prim_func([{', '.join(inputs + outputs)}])"


def _what_the_file_has(namespace: dict) -> str:
    """A hint for a file without PrimFuncs: its TE tensors, or the Python functions that may build one."""
    tensors = [(name, value) for name, value in namespace.items()
               if not name.startswith("_") and _te_tensors(value) and not isinstance(value, (list, tuple))]
    if tensors:
        return (f"; it defines TE tensors ({', '.join(name for name, _ in tensors)}): add "
                f"`func = {_create_prim_func_call(tensors)}` at module level (its list is the parameter order: "
                "inputs, then outputs)")
    module = namespace.get("__name__")
    functions = [name for name, value in namespace.items()
                 if not name.startswith("_") and callable(value) and getattr(value, "__module__", None) == module]
    if functions:
        return (f"; its Python functions ({', '.join(functions)}) are not PrimFuncs: decorate one with "
                "@T.prim_func(s_tir=True), or call the one that builds a PrimFunc at module level "
                f"(`func = {functions[0]}(...)`)")
    return ""


def _reachable_placeholders(tensors: list) -> list:
    """The placeholders the tensors read, in first-reached order (the inputs a PrimFunc needs)."""
    from tvm import te

    found, pending = [], list(tensors)
    while pending:
        tensor = pending.pop(0)
        if isinstance(tensor.op, te.PlaceholderOp):
            if not any(tensor.same_as(seen) for seen in found):
                found.append(tensor)
        else:
            pending.extend(tensor.op.input_tensors)
    return found


def _not_a_function(value) -> FrontendError:
    """What to pass instead of a value that is no PrimFunc or IRModule."""
    tensors = _te_tensors(value)
    if tensors:
        inputs = [t for t in _reachable_placeholders(tensors) if not any(t.same_as(g) for g in tensors)]
        named = [(tensor.op.name, tensor) for tensor in inputs + tensors]
        return FrontendError(f"got TE tensors ({', '.join(t.op.name for t in tensors)}), not a PrimFunc: pass "
                             f"{_create_prim_func_call(named)} (its list is the parameter order: inputs, then outputs)")
    if callable(value):
        name = getattr(value, "__name__", type(value).__name__)
        return FrontendError(f"got the Python function {name}, not a PrimFunc: decorate it with "
                             f"@T.prim_func(s_tir=True), or pass what it returns ({name}(...)) if it builds one")
    return FrontendError(f"expected a tvm PrimFunc or IRModule, got {type(value).__name__}: write the function as "
                         "@T.prim_func(s_tir=True) or build it with te.create_prim_func")


def _not_a_primfunc_in_file(path: str, name: str, value) -> FrontendError:
    """What to write when `FILE.py:NAME` names a TE tensor or a Python function, not a PrimFunc."""
    tensors = _te_tensors(value)
    if tensors:
        inputs = [t for t in _reachable_placeholders(tensors) if not any(t.same_as(g) for g in tensors)]
        call = _create_prim_func_call([(tensor.op.name, tensor) for tensor in inputs + tensors])
        return FrontendError(f"{path}:{name} is TE tensors ({', '.join(t.op.name for t in tensors)}), not a PrimFunc: "
                             f"add `func = {call}` at module level and compile {path}:func")
    if callable(value):
        return FrontendError(f"{path}:{name} is a Python function, not a PrimFunc: decorate it with "
                             f"@T.prim_func(s_tir=True), or, if it builds one, add `func = {name}(...)` at module "
                             f"level and compile {path}:func")
    return FrontendError(f"{path}:{name} is a {type(value).__name__}, not a PrimFunc: write the function as "
                         "@T.prim_func(s_tir=True) or build it with te.create_prim_func")


def _as_single_module(func: tirx.PrimFunc, name: str, where: str = "") -> tvm.IRModule:
    attrs = func.attrs
    if attrs is None or not bool(attrs.get("s_tir", False)):
        raise UnsupportedConstructError(
            f"{where}PrimFunc '{name}' is not S-TIR: write it as @T.prim_func(s_tir=True) with T.sblock "
            "blocks (or build it with te.create_prim_func)")
    return tvm.IRModule({"main": ordered_as_spatial(func).with_attr("global_symbol", name.split(".")[-1])})


def ordered_as_spatial(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Scan-ordered block iterators (`T.axis.scan`) as data-parallel ones. Why: s_tir's schedule
    refuses to reorder or split a loop over an ordered iterator (Tiling failed with TVM's raw
    ScheduleError), while the pipeline never reads the iterator type for order: the dependence
    analysis finds the carried dependence of a scan from its accesses, as for the same scan written
    with `T.axis.spatial` (examples/cumsum.py), and keeps the axis in order (a scan tile, or a serial
    loop). TVM's build computes both forms alike (the type does not change code generation)."""

    def spatial(block):
        if not any(iv.iter_type == tirx.IterVar.Ordered for iv in block.iter_vars):
            return block
        iter_vars = [tirx.IterVar(iv.dom, iv.var, tirx.IterVar.DataPar, iv.thread_tag)
                     if iv.iter_type == tirx.IterVar.Ordered else iv for iv in block.iter_vars]
        return replace_block(block, iter_vars=iter_vars)

    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, spatial))
    return func if body.same_as(func.body) else func.with_body(body)


def load_target(target: str) -> tuple[tvm.IRModule, str]:
    """Read `FILE.py[:FUNC]` and return (module with the PrimFunc as "main", its name)."""
    path, wanted = split_target(target)
    namespace = _execute_file(path)
    found = _candidates(namespace)
    if not found:
        if wanted in namespace:
            raise _not_a_primfunc_in_file(path, wanted, namespace[wanted])
        raise FrontendError(f"{path}: no @T.prim_func or @I.ir_module with PrimFuncs in this file"
                            + _what_the_file_has(namespace))
    names = ", ".join(found)
    if wanted is None:
        if len(found) > 1:
            raise FrontendError(f"{path} defines several PrimFuncs ({names}); pick one as {path}:NAME")
        wanted = next(iter(found))
    matches = [n for n in found if n == wanted] or \
        [n for n in found if wanted in (n.split(".")[-1], n.split(".")[0], _symbol(found[n]))]
    if not matches and wanted in namespace:
        raise _not_a_primfunc_in_file(path, wanted, namespace[wanted])
    if len(matches) != 1:
        raise FrontendError(f"{path}: no PrimFunc named '{wanted}' (defined here: {names})")
    func = found[matches[0]]
    # a dump's `Module.main` keeps the user's function name in its global_symbol
    name = _symbol(func) if "." in matches[0] and _symbol(func) else matches[0]
    return _as_single_module(func, name, where=f"{path}: "), name


def _symbol(func: tirx.PrimFunc) -> str | None:
    symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
    return str(symbol) if symbol is not None else None


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
                raise FrontendError(f"the IRModule holds several PrimFuncs ({', '.join(sorted(funcs))}); pass func_name=")  # noqa: E501
            func_name = next(iter(funcs))
        if func_name not in funcs:
            raise FrontendError(f"the IRModule has no PrimFunc '{func_name}' (it has {', '.join(sorted(funcs))})")
        func = funcs[func_name]
        symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
        return _as_single_module(func, str(symbol) if symbol is not None else func_name)
    raise _not_a_function(func_or_module)
