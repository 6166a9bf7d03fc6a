"""A second opinion: an independent evaluation of an S-TIR PrimFunc, in Python.

When TVM's llvm build of the input and the generated kernel disagree, one of them is wrong, and
TVM's build is not always the right one (it computes `floordiv(floormod(a, 2), -2)` as 0 where
the answer is -1; its 16-bit accumulation is rewritten away before it builds, checks/accumulation.py).
This evaluator shares no code with either: it walks the TIR itself with exact integers (Python
ints, wrapped to the dtype only when stored or cast) and float64 for every float, so a 16-bit
reduction accumulates wider than fp32, as docs/verification.md's accumulation rule asks. The
kernel check asks it only on a disagreement (triton_codegen/check.py: second_opinion): it is slow
(one Python call per node), so it refuses programs above MAX_STEPS stores.

Semantics followed: a block runs under its predicate with its iteration variables bound to their
values, its `T.init` when every reduction variable is at the start of its domain; loops of every
kind run in order; `T.assume` is skipped; `T.if_then_else` evaluates one branch, `T.Select`
both; min/max of floats propagate NaN (as the reference and torch do); integer `//`/`%` of TIR's
`Div`/`Mod` truncate, `FloorDiv`/`FloorMod` floor.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import tvm
from tvm import s_tir, tirx

MAX_STEPS = 4_000_000


class NotEvaluated(Exception):
    """The evaluator cannot (or will not) evaluate this program; the reason is the message."""


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _wrap(value: int, dtype: str) -> int:
    if dtype == "bool":
        return bool(value)
    bits = int(dtype[4:] if dtype.startswith("uint") else dtype[3:])
    value &= (1 << bits) - 1
    if dtype.startswith("int") and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _cast(value, dtype: str):
    if _is_float(dtype):
        return np.float64(value)
    if dtype == "bool":
        return bool(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise NotEvaluated(f"a cast of {value} to {dtype}")
        value = math.trunc(value)
    return _wrap(int(value), dtype)


def _nan_max(a, b):
    return a if a != a else b if b != b else max(a, b)


def _nan_min(a, b):
    return a if a != a else b if b != b else min(a, b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _divide(kind: str, a, b, is_float: bool):
    if not is_float and b == 0:
        raise NotEvaluated("an integer division by zero")
    if is_float:
        a, b = np.float64(a), np.float64(b)
        with np.errstate(all="ignore"):
            quotient = a / b
            return {"div": quotient, "mod": np.fmod(a, b), "floordiv": np.floor(quotient),
                    "floormod": a - np.floor(quotient) * b}[kind]
    if kind == "div":
        return _trunc_div(a, b)
    if kind == "mod":
        return a - _trunc_div(a, b) * b
    return a // b if kind == "floordiv" else a % b


_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "fabs": np.abs, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "nearbyint": np.rint, "trunc": np.trunc,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "erf": lambda x: np.float64(math.erf(x)),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "likely": lambda x: x,
}

_BINARY = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
           tirx.EQ: lambda a, b: a == b, tirx.NE: lambda a, b: a != b, tirx.LT: lambda a, b: a < b,
           tirx.LE: lambda a, b: a <= b, tirx.GT: lambda a, b: a > b, tirx.GE: lambda a, b: a >= b,
           tirx.BitwiseAnd: lambda a, b: a & b, tirx.BitwiseOr: lambda a, b: a | b,
           tirx.BitwiseXor: lambda a, b: a ^ b, tirx.LShift: lambda a, b: a << b, tirx.RShift: lambda a, b: a >> b}
_DIVISIONS = {tirx.Div: "div", tirx.Mod: "mod", tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod"}


class Evaluator:
    """Compiles each expression once into a closure over an environment of variable values."""

    def __init__(self):
        self.env: dict[int, object] = {}
        self.arrays: dict[int, np.ndarray] = {}
        self.steps = 0

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, node):
        kind = type(node)
        dtype = node.ty.dtype if hasattr(node, "ty") and hasattr(node.ty, "dtype") else ""
        if kind is tirx.IntImm:
            value = bool(node.value) if dtype == "bool" else int(node.value)
            return lambda: value
        if kind is tirx.FloatImm:
            value = np.float64(node.value)
            return lambda: value
        if isinstance(node, tvm.ir.TensorLoad):
            return self._load(node)
        if isinstance(node, tirx.Var):
            key, env = node.__chandle__(), self.env
            return lambda: env[key]
        if kind in _BINARY:
            return self._binary(node, _BINARY[kind], dtype)
        if kind in _DIVISIONS:
            a, b, division = self.expr(node.a), self.expr(node.b), _DIVISIONS[kind]
            is_float = _is_float(dtype)
            return lambda: self._fit(_divide(division, a(), b(), is_float), dtype)
        if kind in (tirx.Min, tirx.Max):
            a, b = self.expr(node.a), self.expr(node.b)
            if _is_float(dtype):
                pick = _nan_max if kind is tirx.Max else _nan_min
            else:
                pick = max if kind is tirx.Max else min
            return lambda: pick(a(), b())
        if kind is tirx.And:
            a, b = self.expr(node.a), self.expr(node.b)
            return lambda: bool(a()) and bool(b())
        if kind is tirx.Or:
            a, b = self.expr(node.a), self.expr(node.b)
            return lambda: bool(a()) or bool(b())
        if kind is tirx.Not:
            a = self.expr(node.a)
            return lambda: not a()
        if kind is tirx.BitwiseNot:
            a = self.expr(node.a)
            return lambda: _wrap(~a(), dtype)
        if kind is tirx.Select:
            cond, yes, no = self.expr(node.condition), self.expr(node.true_value), self.expr(node.false_value)
            return lambda: (lambda c, t, f: t if c else f)(cond(), yes(), no())
        if kind is tirx.Cast:
            value = self.expr(node.value)
            return lambda: _cast(value(), dtype)
        if kind is tirx.Let:
            key, value, body = node.var.__chandle__(), self.expr(node.value), self.expr(node.body)
            return lambda: (self.env.__setitem__(key, value()), body())[1]
        if isinstance(node, tvm.ir.Call) and isinstance(node.op, tvm.ir.Op):
            return self._call(node, dtype)
        raise NotEvaluated(f"no evaluation of {kind.__name__} ({node})")

    def _fit(self, value, dtype: str):
        return value if _is_float(dtype) or dtype == "bool" else int(value)

    def _binary(self, node, op, dtype: str):
        a, b = self.expr(node.a), self.expr(node.b)
        if _is_float(dtype):
            def floating():
                with np.errstate(all="ignore"):
                    return op(np.float64(a()), np.float64(b()))
            return floating
        return lambda: op(a(), b())

    def _load(self, node):
        key = node.source.__chandle__()
        indices = [self.expr(i) for i in node.indices]
        arrays, dtype = self.arrays, str(node.source.dtype)
        is_float = _is_float(dtype)

        def load():
            value = arrays[key][tuple(int(i()) for i in indices)]
            return np.float64(value) if is_float else (bool(value) if dtype == "bool" else int(value))
        return load

    def _call(self, node, dtype: str):
        name = node.op.name.split(".")[-1]
        args = [self.expr(a) for a in node.args]
        if name == "if_then_else":
            cond, yes, no = args
            return lambda: yes() if cond() else no()
        if name == "pow":
            a, b = args
            return lambda: np.power(np.float64(a()), np.float64(b()))
        if name in ("max_value", "min_value"):
            raise NotEvaluated(f"T.{name} as a call")
        if name in _UNARY and len(args) == 1:
            fn, (a,) = _UNARY[name], args

            def unary():
                with np.errstate(all="ignore"):
                    return fn(np.float64(a()) if _is_float(dtype) or name.startswith("is") else a())
            return unary
        raise NotEvaluated(f"no evaluation of the call {node.op.name}")

    # -- statements ------------------------------------------------------------------------------
    def stmt(self, node):
        kind = type(node)
        if kind is tirx.SeqStmt:
            parts = [self.stmt(s) for s in node.seq]
            return lambda: [p() for p in parts] and None
        if kind is tirx.For:
            return self._for(node)
        if kind is tirx.BufferStore:
            return self._store(node)
        if kind is s_tir.SBlockRealize:
            return self._realize(node)
        if kind is tirx.IfThenElse:
            cond, then = self.expr(node.condition), self.stmt(node.then_case)
            other = self.stmt(node.else_case) if node.else_case is not None else (lambda: None)
            return lambda: then() if cond() else other()
        if kind is tirx.Evaluate:
            return lambda: None   # T.assume, and calls without a result
        if kind in (tirx.LetStmt, getattr(tirx, "Bind", None)) and hasattr(node, "body"):
            key, value, body = node.var.__chandle__(), self.expr(node.value), self.stmt(node.body)
            return lambda: (self.env.__setitem__(key, value()), body())[1]
        if kind in (tirx.AllocBuffer, tirx.DeclBuffer):
            self._allocate(node.buffer)
            return self.stmt(node.body) if getattr(node, "body", None) is not None else (lambda: None)
        if kind is tirx.AttrStmt:
            return self.stmt(node.body)
        raise NotEvaluated(f"no evaluation of the statement {kind.__name__}")

    def _for(self, node):
        var, body = node.loop_var.__chandle__(), self.stmt(node.body)
        low, extent = self.expr(node.min), self.expr(node.extent)
        env = self.env

        def loop():
            start = int(low())
            for value in range(start, start + int(extent())):
                env[var] = value
                body()
        return loop

    def _store(self, node):
        key, dtype = node.buffer.__chandle__(), str(node.buffer.dtype)
        indices, value = [self.expr(i) for i in node.indices], self.expr(node.value)
        arrays = self.arrays

        def store():
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise NotEvaluated(f"more than {MAX_STEPS} stores")
            result = value()
            arrays[key][tuple(int(i()) for i in indices)] = result if _is_float(dtype) else _cast(result, dtype)
        return store

    def _realize(self, node):
        block = node.block
        for buf in block.alloc_buffers:
            self._allocate(buf)
        if block.match_buffers:
            raise NotEvaluated("T.match_buffer inside a block")
        predicate = self.expr(node.predicate)
        bindings = [(iv.var.__chandle__(), self.expr(v)) for iv, v in zip(block.iter_vars, node.iter_values)]
        starts = [(iv.var.__chandle__(), self.expr(iv.dom.min)) for iv in block.iter_vars
                  if iv.iter_type == tirx.IterVar.CommReduce]
        init = self.stmt(block.init) if block.init is not None else None
        body, env = self.stmt(block.body), self.env

        def run():
            if not predicate():
                return
            for key, value in bindings:
                env[key] = value()
            if init is not None and all(env[key] == start() for key, start in starts):
                init()
            body()
        return run

    def _allocate(self, buf) -> None:
        shape = tuple(int(d.value) for d in buf.shape)
        dtype = str(buf.dtype)
        self.arrays[buf.__chandle__()] = np.zeros(shape, _storage(dtype))


def _storage(dtype: str):
    return np.float64 if _is_float(dtype) else (bool if dtype == "bool" else object)


def _output(array: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return array.astype(np.float32).astype(ml_dtypes.bfloat16)
    return array.astype(dtype)


def evaluate(func: tirx.PrimFunc, arrays: dict[str, np.ndarray], scalars: dict[str, object]) -> dict[str, np.ndarray]:
    """Every buffer parameter after running `func` (static shapes) on copies of `arrays`."""
    evaluator = Evaluator()
    for param in func.params:
        key = param.__chandle__()
        if tirx.is_buffer_var(param):
            data = np.asarray(arrays[param.name])
            dtype = str(param.dtype)
            evaluator.arrays[key] = data.astype(_storage(dtype)) if _is_float(dtype) or dtype == "bool" else \
                np.array([int(v) for v in data.reshape(-1)], dtype=object).reshape(data.shape)
        else:
            evaluator.env[key] = _cast(scalars[param.name], param.ty.dtype)
    evaluator.stmt(func.body)()
    return {p.name: _output(evaluator.arrays[p.__chandle__()], str(p.dtype)) for p in func.params
            if tirx.is_buffer_var(p)}
