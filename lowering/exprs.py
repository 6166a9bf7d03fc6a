"""Expression rules: one function per TIR expression kind, each returning the same expression
on tiles (lowering/tile_ir.py). The walk in from_tir.py supplies an ExprContext that knows what
variables and loads mean in the current block.

TIR semantics kept: floordiv/floormod round toward minus infinity (Triton's `//` and `%`
truncate, so a sign fix is emitted unless the analyzer proves both operands non-negative);
`Div`/`Mod` on integers truncate; casts follow TIR's dtype. Also the values reductions start
from: each kind's identity, and the dtype an accumulator holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import tvm
from tvm import tirx

from tir_passes.errors import UnsupportedConstructError

from .tile_ir import Binary, Cast, Const, Expr, Unary, Where

SUPPORTED_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "bfloat16", "float32", "float64"}


class ExprContext(Protocol):
    def variable(self, var: tirx.Var) -> Expr: ...
    def load(self, load: tvm.ir.TensorLoad, guards: tuple) -> Expr: ...
    def proven_non_negative(self, expr) -> bool: ...
    def merge_dims(self, *dims: tuple[str, ...]) -> tuple[str, ...]: ...
    def where(self) -> str: ...


def dtype_of(expr) -> str:
    ty = expr.ty
    dtype = str(ty.dtype)
    if dtype == "uint1":
        dtype = "bool"
    if getattr(ty, "lanes", 1) not in (1, None) or "x" in dtype:
        raise UnsupportedConstructError(f"vector dtype {dtype} is not supported")
    return dtype


def check_dtype(dtype: str, what: str, where: str) -> str:
    if dtype not in SUPPORTED_DTYPES:
        raise UnsupportedConstructError(f"{where}: {what} has dtype {dtype}, which tir-triton cannot express in Triton "
                                        f"(supported: {', '.join(sorted(SUPPORTED_DTYPES))})")
    return dtype


_BINARY_OPS = {
    tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.Min: "min", tirx.Max: "max",
    tirx.EQ: "==", tirx.NE: "!=", tirx.LT: "<", tirx.LE: "<=", tirx.GT: ">", tirx.GE: ">=",
    tirx.And: "and", tirx.Or: "or",
}
for _name, _op in (("BitwiseAnd", "&"), ("BitwiseOr", "|"), ("BitwiseXor", "^"), ("LShift", "<<"), ("RShift", ">>")):
    if hasattr(tirx, _name):
        _BINARY_OPS[getattr(tirx, _name)] = _op

_CALLS = {  # TIR intrinsic (suffix of op name) -> unary tile op
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "tanh": "tanh", "erf": "erf", "fabs": "abs", "floor": "floor", "ceil": "ceil", "sin": "sin",
    "cos": "cos", "sigmoid": "sigmoid", "isnan": "isnan", "trunc": "trunc", "round": "round",
    "nearbyint": "round", "log1p": "log1p", "exp10": "exp10", "log10": "log10",
}

RULES: dict[type, Callable] = {}


def rule(*node_types):
    def register(fn):
        for node_type in node_types:
            assert node_type not in RULES, f"two rules for {node_type.__name__}"
            RULES[node_type] = fn
        return fn
    return register


def lower_expr(ctx: ExprContext, expr, guards: tuple = ()) -> Expr:
    fn = RULES.get(type(expr))
    if fn is None:
        raise UnsupportedConstructError(f"{ctx.where()}: no Triton mapping for the TIR expression "
                                        f"{type(expr).__name__} `{expr}`")
    return fn(ctx, expr, guards)


@rule(tirx.IntImm)
def _int(ctx, expr, guards) -> Expr:
    dtype = dtype_of(expr)
    return Const(bool(expr.value) if dtype == "bool" else int(expr.value), dtype)


@rule(tirx.FloatImm)
def _float(ctx, expr, guards) -> Expr:
    return Const(float(expr.value), check_dtype(dtype_of(expr), "a constant", ctx.where()))


@rule(tirx.Var)
def _var(ctx, expr, guards) -> Expr:
    return ctx.variable(expr)


@rule(tvm.ir.TensorLoad)
def _load(ctx, expr, guards) -> Expr:
    return ctx.load(expr, guards)


_FOLDABLE = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def _is_const(expr: Expr, value) -> bool:
    return isinstance(expr, Const) and not expr.dims and not isinstance(expr.value, bool) and expr.value == value


def fold_binary(op: str, a: Expr, b: Expr, dtype: str, dims: tuple[str, ...]) -> Expr:
    """Binary with the constant folding the substitutions need (`0 * 128 + t` -> `t`)."""
    integral = dtype.startswith(("int", "uint"))
    if integral and op in _FOLDABLE and isinstance(a, Const) and isinstance(b, Const) and not a.dims and not b.dims:
        return Const(_FOLDABLE[op](a.value, b.value), dtype)
    if op == "+" and _is_const(a, 0) and b.dtype == dtype:
        return b
    if op in ("+", "-") and _is_const(b, 0) and a.dtype == dtype:
        return a
    if op == "*" and _is_const(a, 1) and b.dtype == dtype:
        return b
    if op == "*" and _is_const(b, 1) and a.dtype == dtype:
        return a
    if op == "*" and integral and (_is_const(a, 0) or _is_const(b, 0)):
        return Const(0, dtype)
    return Binary(op, a, b, dtype, dims)


def binary(ctx, op: str, a: Expr, b: Expr, dtype: str) -> Expr:
    return fold_binary(op, a, b, dtype, ctx.merge_dims(a.dims, b.dims))


@rule(*_BINARY_OPS)
def _binary(ctx, expr, guards) -> Expr:
    a, b = lower_expr(ctx, expr.a, guards), lower_expr(ctx, expr.b, guards)
    return binary(ctx, _BINARY_OPS[type(expr)], a, b, check_dtype(dtype_of(expr), "an operation", ctx.where()))


@rule(tirx.Div, tirx.Mod)
def _div_mod(ctx, expr, guards) -> Expr:
    dtype = dtype_of(expr)
    a, b = lower_expr(ctx, expr.a, guards), lower_expr(ctx, expr.b, guards)
    if dtype.startswith(("float", "bfloat")):
        return binary(ctx, "/" if isinstance(expr, tirx.Div) else "fmod", a, b, dtype)
    # TIR's Div and Mod truncate on integers, as Triton's // and % do
    return binary(ctx, "//" if isinstance(expr, tirx.Div) else "%", a, b, dtype)


@rule(tirx.FloorDiv, tirx.FloorMod)
def _floor_div_mod(ctx, expr, guards) -> Expr:
    dtype = dtype_of(expr)
    a, b = lower_expr(ctx, expr.a, guards), lower_expr(ctx, expr.b, guards)
    is_div = isinstance(expr, tirx.FloorDiv)
    if dtype.startswith(("float", "bfloat")):
        quotient = Unary("floor", binary(ctx, "/", a, b, dtype), dtype, ctx.merge_dims(a.dims, b.dims))
        if is_div:
            return quotient
        return binary(ctx, "-", a, binary(ctx, "*", quotient, b, dtype), dtype)
    if ctx.proven_non_negative(expr.a) and ctx.proven_non_negative(expr.b):
        return binary(ctx, "//" if is_div else "%", a, b, dtype)
    return binary(ctx, "floordiv" if is_div else "floormod", a, b, dtype)


@rule(tirx.Not)
def _not(ctx, expr, guards) -> Expr:
    x = lower_expr(ctx, expr.a, guards)
    return Unary("not", x, "bool", x.dims)


if hasattr(tirx, "BitwiseNot"):
    @rule(tirx.BitwiseNot)
    def _bitnot(ctx, expr, guards) -> Expr:
        x = lower_expr(ctx, expr.a, guards)
        return Unary("bitnot", x, dtype_of(expr), x.dims)


@rule(tirx.Select)
def _select(ctx, expr, guards) -> Expr:
    cond = lower_expr(ctx, expr.condition, guards)
    # Select evaluates both sides: loads in them need no extra guard
    a, b = lower_expr(ctx, expr.true_value, guards), lower_expr(ctx, expr.false_value, guards)
    return Where(cond, a, b, dtype_of(expr), ctx.merge_dims(cond.dims, a.dims, b.dims))


@rule(tirx.Cast)
def _cast(ctx, expr, guards) -> Expr:
    x = lower_expr(ctx, expr.value, guards)
    dtype = check_dtype(dtype_of(expr), "a cast", ctx.where())
    if isinstance(x, Const) and not x.dims:
        return Const(_convert(x.value, dtype), dtype)
    return x if x.dtype == dtype else Cast(x, dtype, x.dims)


def cast(value: Expr, dtype: str) -> Expr:
    return value if value.dtype == dtype else Cast(value, dtype, value.dims)


def identity(kind: str, dtype: str) -> Const:
    """The value that leaves a sum, max or min unchanged (the fill of masked lanes)."""
    if kind == "sum":
        return Const(0.0 if dtype.startswith(("float", "bfloat")) else 0, dtype)
    if dtype.startswith(("float", "bfloat")):
        return Const(float("-inf") if kind == "max" else float("inf"), dtype)
    bits = int("".join(c for c in dtype if c.isdigit()))
    if dtype.startswith("uint"):
        return Const(0 if kind == "max" else 2**bits - 1, dtype)
    return Const(-(2 ** (bits - 1)) if kind == "max" else 2 ** (bits - 1) - 1, dtype)


def accumulator_dtype(dtype: str) -> str:
    """16-bit floats accumulate (and compare) in fp32."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _convert(value, dtype: str):
    if dtype == "bool":
        return bool(value)
    if dtype.startswith(("float", "bfloat")):
        return float(value)
    return int(value)


@rule(tvm.ir.Call)
def _call(ctx, expr, guards) -> Expr:
    name = expr.op.name.split(".")[-1] if isinstance(expr.op, tvm.ir.Op) else str(expr.op)
    if name == "if_then_else":
        cond_tir, then_tir, else_tir = expr.args
        cond = lower_expr(ctx, cond_tir, guards)
        # only the taken side may be read: loads of each side are masked by its condition
        a = lower_expr(ctx, then_tir, guards + (cond_tir,))
        b = lower_expr(ctx, else_tir, guards + (tirx.Not(cond_tir),))
        return Where(cond, a, b, dtype_of(expr), ctx.merge_dims(cond.dims, a.dims, b.dims))
    if name in _CALLS and len(expr.args) == 1:
        x = lower_expr(ctx, expr.args[0], guards)
        dtype = dtype_of(expr)
        return Unary(_CALLS[name], x, "bool" if name == "isnan" else dtype, x.dims)
    if name == "pow" and len(expr.args) == 2:
        a, b = (lower_expr(ctx, arg, guards) for arg in expr.args)
        return binary(ctx, "pow", a, b, dtype_of(expr))
    raise UnsupportedConstructError(f"{ctx.where()}: the call `{expr}` ({name}) has no Triton mapping")
