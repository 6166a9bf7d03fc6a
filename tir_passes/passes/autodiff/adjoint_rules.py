"""Adjoint rules: the partial derivative of a TIR expression with respect to one variable, one rule
per node kind and intrinsic, built as TIR in the accumulation dtype (float32, or float64 for
float64 programs).

Why: a block's contribution to the gradient of a buffer it reads is the upstream gradient times
the partial derivative of its value with respect to that read; the differentiation pass replaces
each differentiable read by a placeholder variable and asks this module for the partials.
Assumes: placeholders are float Vars; every other load, and every integer or bool
subexpression, is a constant (zero derivative). Conventions (docs/autodiff.md), as torch's:
  max/min(a, b)    the larger (smaller) operand takes the gradient; at a tie each takes half
                   (torch.maximum / torch.minimum)
  fabs             sign(a), 0 at a == 0 (torch.abs)
  floor, ceil, trunc, round, nearbyint   0 (torch's rounding functions)
  Select, if_then_else   the taken branch; the condition gets nothing
  casts            float to float carries the derivative; to or from an integer, nothing
An intrinsic without a rule is refused (NotDifferentiableError naming it and the block).
"""

from __future__ import annotations

import math

import tvm
from tvm import tirx

from ...errors import NotDifferentiableError

_ZERO_DERIVATIVE = frozenset({"floor", "ceil", "trunc", "round", "nearbyint", "isnan", "isinf", "isfinite"})


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def dtype_of(expr) -> str:
    return str(expr.ty.dtype)


class Partials:
    """d(expr)/d(var) for placeholders `var`; None stands for an exact zero (pruned as it goes)."""

    def __init__(self, acc: str, where: str):
        self.acc = acc
        self.where = where

    # --- constructors that fold zeros and ones, all in the accumulation dtype ---
    def const(self, value: float):
        return tirx.const(value, self.acc)

    def cast(self, expr):
        return expr if dtype_of(expr) == self.acc else tirx.Cast(self.acc, expr)

    def mul(self, a, b):
        if a is None or b is None:
            return None
        for x, y in ((a, b), (b, a)):
            if isinstance(x, tirx.FloatImm) and float(x.value) == 1.0:
                return y
        return a * b

    def add(self, a, b):
        if a is None:
            return b
        return a if b is None else a + b

    def neg(self, a):
        return None if a is None else self.const(0.0) - a

    def div(self, a, b):
        return None if a is None else a / self.cast(b)

    def select(self, cond, a, b):
        if a is None and b is None:
            return None
        return tirx.Select(cond, self.const(0.0) if a is None else a, self.const(0.0) if b is None else b)

    # --- the rules ---
    def d(self, expr, var):
        if not is_float(dtype_of(expr)):
            return None
        if isinstance(expr, tirx.Var):
            return self.const(1.0) if expr.same_as(var) else None
        if isinstance(expr, (tirx.FloatImm, tirx.IntImm, tvm.ir.TensorLoad)):
            return None
        rule = _NODE_RULES.get(type(expr))
        if rule is not None:
            return rule(self, expr, var)
        if isinstance(expr, tvm.ir.Call):
            return self._call(expr, var)
        raise NotDifferentiableError(f"{self.where}: no adjoint rule for {type(expr).__name__} ({expr})")

    def _add(self, e, var):
        return self.add(self.d(e.a, var), self.d(e.b, var))

    def _sub(self, e, var):
        return self.add(self.d(e.a, var), self.neg(self.d(e.b, var)))

    def _mul(self, e, var):
        return self.add(self.mul(self.d(e.a, var), self.cast(e.b)), self.mul(self.cast(e.a), self.d(e.b, var)))

    def _div(self, e, var):
        # d(a/b) = da/b - (a/b) * db/b
        quotient_term = self.mul(self.cast(e), self.div(self.d(e.b, var), e.b))
        return self.add(self.div(self.d(e.a, var), e.b), self.neg(quotient_term))

    def _max_min(self, e, var):
        wins = e.a > e.b if isinstance(e, tirx.Max) else e.a < e.b
        loses = e.a < e.b if isinstance(e, tirx.Max) else e.a > e.b
        half = self.const(0.5)
        weight_a = tirx.Select(wins, self.const(1.0), tirx.Select(loses, self.const(0.0), half))
        weight_b = tirx.Select(wins, self.const(0.0), tirx.Select(loses, self.const(1.0), half))
        return self.add(self.mul(self.d(e.a, var), weight_a), self.mul(self.d(e.b, var), weight_b))

    def _select(self, e, var):
        return self.select(e.condition, self.d(e.true_value, var), self.d(e.false_value, var))

    def _cast(self, e, var):
        return self.d(e.value, var) if is_float(dtype_of(e.value)) else None

    def _call(self, e, var):
        name = str(e.op.name).rsplit(".", 1)[-1]
        if name == "if_then_else":
            cond, a, b = e.args
            return self.select(cond, self.d(a, var), self.d(b, var))
        if name in _ZERO_DERIVATIVE:
            return None
        if name == "pow":
            return self._pow(e, var)
        rule = _UNARY_RULES.get(name)
        if rule is None or len(e.args) != 1:
            raise NotDifferentiableError(f"{self.where}: the intrinsic {e.op.name} has no adjoint rule "
                                         "(docs/autodiff.md lists the differentiated intrinsics)")
        inner = self.d(e.args[0], var)
        if inner is None:
            return None
        return self.mul(inner, rule(self, e, e.args[0]))

    def _pow(self, e, var):
        a, b = e.args
        da, db = self.d(a, var), self.d(b, var)
        base_term = self.mul(da, self.cast(b) * self.cast(tirx.pow(a, b - tirx.const(1.0, dtype_of(b)))))
        # only when the exponent depends on the variable: log(a) is nan for a < 0
        exponent_term = self.mul(db, self.cast(e) * self.cast(tirx.log(a))) if db is not None else None
        return self.add(base_term, exponent_term)


# f'(a) in terms of the call `e` = f(a) and its argument `a`
_UNARY_RULES = {
    "exp": lambda p, e, a: p.cast(e),
    "exp2": lambda p, e, a: p.cast(e) * p.const(math.log(2.0)),
    "exp10": lambda p, e, a: p.cast(e) * p.const(math.log(10.0)),
    "log": lambda p, e, a: p.const(1.0) / p.cast(a),
    "log2": lambda p, e, a: p.const(1.0 / math.log(2.0)) / p.cast(a),
    "log10": lambda p, e, a: p.const(1.0 / math.log(10.0)) / p.cast(a),
    "log1p": lambda p, e, a: p.const(1.0) / (p.const(1.0) + p.cast(a)),
    "sqrt": lambda p, e, a: p.const(0.5) / p.cast(e),
    "rsqrt": lambda p, e, a: p.const(-0.5) * p.cast(e) / p.cast(a),
    "tanh": lambda p, e, a: p.const(1.0) - p.cast(e) * p.cast(e),
    "sigmoid": lambda p, e, a: p.cast(e) * (p.const(1.0) - p.cast(e)),
    "erf": lambda p, e, a: p.const(2.0 / math.sqrt(math.pi)) * tirx.exp(p.const(0.0) - p.cast(a) * p.cast(a)),
    "sin": lambda p, e, a: tirx.cos(p.cast(a)),
    "cos": lambda p, e, a: p.const(0.0) - tirx.sin(p.cast(a)),
    "tan": lambda p, e, a: p.const(1.0) + p.cast(e) * p.cast(e),
    "fabs": lambda p, e, a: tirx.Select(a > tirx.const(0.0, dtype_of(a)), p.const(1.0),
                                        tirx.Select(a < tirx.const(0.0, dtype_of(a)), p.const(-1.0), p.const(0.0))),
}

_NODE_RULES = {
    tirx.Add: Partials._add, tirx.Sub: Partials._sub, tirx.Mul: Partials._mul, tirx.Div: Partials._div,
    tirx.Max: Partials._max_min, tirx.Min: Partials._max_min, tirx.Select: Partials._select,
    tirx.Cast: Partials._cast,
}
