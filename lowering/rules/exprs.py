"""Expression rules: one function per TIR expression kind, each returning the same expression
on tiles (lowering/tile_ir.py) over the tile ops of lowering/ops.py. The walk in from_tir.py
supplies an ExprContext that knows what variables and loads mean in the current block.

TIR semantics kept: floordiv/floormod round toward minus infinity (Triton's `//` and `%`
truncate, so a sign fix is emitted unless the analyzer proves both operands non-negative);
`Div`/`Mod` on integers truncate; casts follow TIR's dtype.

16-bit floats, as TVM's llvm build computes them (the reference):
- bfloat16 arithmetic runs in float32 (TVM's BF16ComputeLegalize): a bfloat16 load is widened,
  every operation on it yields float32, constants keep their float32 value, and a cast to
  bfloat16 inside an expression becomes a cast to float32, as that pass makes it (no rounding).
  The value is rounded once, where it is stored (the caller casts to the buffer's dtype). So
  `lower_expr` returns a value in its *compute dtype* (`compute_dtype`), which differs from the
  TIR dtype only for bfloat16.
- float16 arithmetic is native, rounded after every operation (LLVM promotes each half op to
  float and rounds back); the code generator computes math functions of float16 in float32 and
  rounds the result, as LLVM does.

Also the values reductions start from: each kind's identity, and the dtype an accumulator holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import tvm
from tvm import tirx

from tir_passes.errors import UnsupportedConstructError

from lowering.ops import BINARY_INTRINSICS, UNARY_INTRINSICS, fold
from tir_passes.infra.dtypes import DTYPES
from lowering.tile_ir import Binary, Cast, Const, Expr, Unary, Where

SUPPORTED_DTYPES = set(DTYPES)   # every dtype of the one table (tir_passes/infra/dtypes.py)


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


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def compute_dtype(dtype: str) -> str:
    """The dtype TVM's llvm build computes a value of `dtype` in: bfloat16 is legalized to float32."""
    return "float32" if dtype == "bfloat16" else dtype


def widen(x: Expr) -> Expr:
    """A bfloat16 value (a load, a register) as the float32 that arithmetic on it uses."""
    return Cast(x, "float32", x.dims) if x.dtype == "bfloat16" else x


TIR_BINARY_OPS = {  # TIR node -> tile op of lowering/ops.py
    tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.Min: "min", tirx.Max: "max",
    tirx.EQ: "==", tirx.NE: "!=", tirx.LT: "<", tirx.LE: "<=", tirx.GT: ">", tirx.GE: ">=",
    tirx.And: "and", tirx.Or: "or",
    tirx.BitwiseAnd: "&", tirx.BitwiseOr: "|", tirx.BitwiseXor: "^", tirx.LShift: "<<", tirx.RShift: ">>",
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
    """`expr` on tiles, in its compute dtype (float32 for bfloat16 arithmetic, see above)."""
    fn = RULES.get(type(expr))
    if fn is None:
        raise UnsupportedConstructError(f"{ctx.where()}: no Triton mapping for the TIR expression "
                                        f"{type(expr).__name__} `{expr}`")
    return fn(ctx, expr, guards)


def operand(ctx: ExprContext, expr, guards: tuple) -> Expr:
    """An operand of arithmetic: lowered, and widened to float32 if it is bfloat16."""
    return widen(lower_expr(ctx, expr, guards))


@rule(tirx.IntImm)
def _int(ctx, expr, guards) -> Expr:
    dtype = dtype_of(expr)
    return Const(bool(expr.value) if dtype == "bool" else int(expr.value), dtype)


@rule(tirx.FloatImm)
def _float(ctx, expr, guards) -> Expr:
    dtype = check_dtype(dtype_of(expr), "a constant", ctx.where())
    return Const(float(expr.value), compute_dtype(dtype))  # a bfloat16 constant keeps its float32 value


@rule(tirx.Var)
def _var(ctx, expr, guards) -> Expr:
    return ctx.variable(expr)


@rule(tvm.ir.TensorLoad)
def _load(ctx, expr, guards) -> Expr:
    return ctx.load(expr, guards)


def _is_const(expr: Expr, value) -> bool:
    return isinstance(expr, Const) and not expr.dims and not isinstance(expr.value, bool) and expr.value == value


def _is_bool_const(expr: Expr, value: bool) -> bool:
    return _scalar_const(expr) and expr.dtype == "bool" and bool(expr.value) == value


def _scalar_const(expr: Expr) -> bool:
    return isinstance(expr, Const) and not expr.dims


def fold_binary(op: str, a: Expr, b: Expr, dtype: str, dims: tuple[str, ...]) -> Expr:
    """Binary with its constants folded: two constants give a constant (a condition that folds
    must never reach the kernel as a Python expression: `~(0 == 0)` is -2, which is true), and
    the identities the substitutions leave (`0 * 128 + t` -> `t`)."""
    if _scalar_const(a) and _scalar_const(b):
        folded = fold_constants(op, a, b, dtype)
        if folded is not None:
            return folded
    integral = dtype.startswith(("int", "uint"))
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
    if op in ("and", "or"):   # a Python `and` in TVMScript leaves `T.And(T.bool(True), c)`: c
        identity = op == "and"
        if _is_bool_const(a, identity) and b.dtype == dtype:
            return b
        if _is_bool_const(b, identity) and a.dtype == dtype:
            return a
    return Binary(op, a, b, dtype, dims)


def fold_constants(op: str, a: Const, b: Const, dtype: str) -> Const | None:
    """`a op b` as a constant, computed as TVM's build would (ops.fold), or None."""
    value = fold(op, a.value, b.value, a.dtype, dtype)
    return None if value is None else Const(value, dtype)


def binary(ctx, op: str, a: Expr, b: Expr, dtype: str) -> Expr:
    return fold_binary(op, a, b, dtype, ctx.merge_dims(a.dims, b.dims))


def _float_operands(ctx, expr, op: str, operands) -> None:
    for x in operands:
        if not is_float(x.dtype):
            raise UnsupportedConstructError(f"{ctx.where()}: `{expr}` applies {op} to a {x.dtype} value; "
                                            "it is defined on floats only (TVM's llvm build refuses it too)")


@rule(*TIR_BINARY_OPS)
def _binary(ctx, expr, guards) -> Expr:
    a, b = operand(ctx, expr.a, guards), operand(ctx, expr.b, guards)
    dtype = check_dtype(dtype_of(expr), "an operation", ctx.where())
    return binary(ctx, TIR_BINARY_OPS[type(expr)], a, b, compute_dtype(dtype))


@rule(tirx.Div, tirx.Mod)
def _div_mod(ctx, expr, guards) -> Expr:
    dtype = compute_dtype(dtype_of(expr))
    a, b = operand(ctx, expr.a, guards), operand(ctx, expr.b, guards)
    if is_float(dtype):
        return binary(ctx, "/" if isinstance(expr, tirx.Div) else "fmod", a, b, dtype)
    # TIR's Div and Mod truncate on integers, as Triton's // and % do
    return binary(ctx, "//" if isinstance(expr, tirx.Div) else "%", a, b, dtype)


@rule(tirx.FloorDiv, tirx.FloorMod)
def _floor_div_mod(ctx, expr, guards) -> Expr:
    dtype = compute_dtype(dtype_of(expr))
    a, b = operand(ctx, expr.a, guards), operand(ctx, expr.b, guards)
    is_div = isinstance(expr, tirx.FloorDiv)
    if is_float(dtype):
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
    if _scalar_const(x):
        return Const(not x.value, "bool")
    return Unary("not", x, "bool", x.dims)


@rule(tirx.BitwiseNot)
def _bitnot(ctx, expr, guards) -> Expr:
    x = lower_expr(ctx, expr.a, guards)
    return Unary("bitnot", x, dtype_of(expr), x.dims)


@rule(tirx.Select)
def _select(ctx, expr, guards) -> Expr:
    condition = decided_condition(ctx, expr.condition)
    if isinstance(condition, bool):
        return operand(ctx, expr.true_value if condition else expr.false_value, guards)
    cond = lower_expr(ctx, condition, guards)
    if _scalar_const(cond):  # a condition that folded: the one value it picks
        return operand(ctx, expr.true_value if cond.value else expr.false_value, guards)
    # Select evaluates both sides: loads in them need no extra guard
    a, b = operand(ctx, expr.true_value, guards), operand(ctx, expr.false_value, guards)
    return Where(cond, a, b, compute_dtype(dtype_of(expr)), ctx.merge_dims(cond.dims, a.dims, b.dims))


@rule(tirx.Cast)
def _cast(ctx, expr, guards) -> Expr:
    x = lower_expr(ctx, expr.value, guards)
    # BF16ComputeLegalize turns a cast to bfloat16 inside an expression into a cast to float32
    dtype = compute_dtype(check_dtype(dtype_of(expr), "a cast", ctx.where()))
    if isinstance(x, Const) and not x.dims:
        return Const(_convert(x.value, dtype), dtype)
    return x if x.dtype == dtype else Cast(x, dtype, x.dims)


def cast(value: Expr, dtype: str) -> Expr:
    return value if value.dtype == dtype else Cast(value, dtype, value.dims)


def identity(kind: str, dtype: str) -> Const:
    """The value that leaves a sum, product, max or min unchanged (the fill of masked lanes)."""
    if kind == "prod":
        return Const(1.0 if dtype.startswith(("float", "bfloat")) else 1, dtype)
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
    if is_float(dtype):
        return float(value)
    return int(value)


# the calls `_call` lowers besides the intrinsics of ops.py (T.assume is a statement: from_tir.py)
VALUE_CALLS = {"if_then_else": "a select whose untaken side is not read", "likely": "a branch hint: its argument"}


def supported_calls() -> list[str]:
    """Every call name (the last part of the op name) the rules below lower, sorted."""
    return sorted(set(UNARY_INTRINSICS) | set(BINARY_INTRINSICS) | set(VALUE_CALLS))


def call_name(expr) -> str:
    return expr.op.name.split(".")[-1] if isinstance(expr.op, tvm.ir.Op) else str(expr.op)


@rule(tvm.ir.Call)
def _call(ctx, expr, guards) -> Expr:
    name = call_name(expr)
    if name == "if_then_else":
        return _if_then_else(ctx, expr, guards)
    if name == "likely" and len(expr.args) == 1:  # a branch-prediction hint: the value itself
        return lower_expr(ctx, expr.args[0], guards)
    if name in UNARY_INTRINSICS and len(expr.args) == 1:
        op = UNARY_INTRINSICS[name]
        x = operand(ctx, expr.args[0], guards)
        _float_operands(ctx, expr, name, [x])
        return Unary(op, x, compute_dtype(dtype_of(expr)), x.dims)
    if name in BINARY_INTRINSICS and len(expr.args) == 2:
        a, b = (operand(ctx, arg, guards) for arg in expr.args)
        _float_operands(ctx, expr, name, [a, b])
        return binary(ctx, BINARY_INTRINSICS[name], a, b, compute_dtype(dtype_of(expr)))
    raise UnsupportedConstructError(f"{ctx.where()}: the call `{expr}` ({name}) has no Triton mapping")


def decided_condition(ctx, cond_tir):
    """`cond_tir` with what the context decides (a window's interior tiles: the masks' bounds on
    j - i hold or fail everywhere there) folded away: a Python bool when that decides it all, else
    the TIR condition with its decided parts dropped. Masks compose their bounds with `and`, `or`
    and `not` (a sliding window written `j > i or i - j >= W`, or as what it keeps), and constant
    parts (`T.And(T.bool(True), ...)` from a Python `and`) fold too."""
    decide = getattr(ctx, "interior", None)
    if decide is None:
        return cond_tir
    return _decided(decide, cond_tir)


def _decided(decide, cond):
    """`cond` under `decide` (condition -> True/False/None), through And, Or and Not."""
    if isinstance(cond, tirx.IntImm):
        return bool(cond.value)
    whole = decide(cond)
    if whole is not None:
        return whole
    if isinstance(cond, (tirx.And, tirx.Or)):
        return _decided_pair(type(cond), _decided(decide, cond.a), _decided(decide, cond.b), cond)
    if isinstance(cond, tirx.Not):
        inner = _decided(decide, cond.a)
        return (not inner) if isinstance(inner, bool) else (cond if inner.same_as(cond.a) else tirx.Not(inner))
    return cond


def _decided_pair(kind, a, b, cond):
    """An And or Or of two decided parts (each a bool or what is left of it)."""
    absorbing = kind is tirx.Or      # True absorbs an or, False an and; the other value drops out
    if a is absorbing or b is absorbing:
        return absorbing
    if a is (not absorbing):
        return b
    if b is (not absorbing):
        return a
    return cond if a.same_as(cond.a) and b.same_as(cond.b) else kind(a, b)


def _if_then_else(ctx, expr, guards) -> Expr:
    cond_tir, then_tir, else_tir = expr.args
    cond_tir = decided_condition(ctx, cond_tir)
    if isinstance(cond_tir, bool):
        return operand(ctx, then_tir if cond_tir else else_tir, guards)
    cond = lower_expr(ctx, cond_tir, guards)
    if _scalar_const(cond):  # a condition that folded: only the taken side exists (and is read)
        return operand(ctx, then_tir if cond.value else else_tir, guards)
    # only the taken side may be read: loads of each side are masked by its condition
    a = operand(ctx, then_tir, guards + (cond_tir,))
    b = operand(ctx, else_tir, guards + (tirx.Not(cond_tir),))
    return Where(cond, a, b, compute_dtype(dtype_of(expr)), ctx.merge_dims(cond.dims, a.dims, b.dims))
