"""The tile ops: every name a `Unary` or `Binary` of a TileProgram may carry, with its meaning.

One table for both sides: the lowering produces only these names (exprs.py maps TIR nodes and
intrinsics onto them; kernel_scope.py and reductions.py use a few arithmetic ones), and the code
generator (triton_codegen/emit_kernel.py) has exactly one rendering rule per name.
tests/lowering/test_intrinsics.py checks both directions.

Meanings are TIR's as TVM 0.27's llvm build computes them (the reference every kernel is checked
against), not numpy's: `round` is llvm.nearbyint there, so it rounds half to even, like
`nearbyint`. The intrinsics below take float operands only, as on TVM's llvm build.
"""

from __future__ import annotations

import math

import numpy as np

UNARY_OPS = {
    "not": "logical not of a bool",
    "bitnot": "bitwise not of an integer",
    "abs": "absolute value of a float (TIR writes integer abs as a Select)",
    "floor": "round toward minus infinity",
    "ceil": "round toward plus infinity",
    "trunc": "round toward zero",
    "round": "round to nearest, ties to even (tirx.round and tirx.nearbyint alike)",
    "exp": "e ** x",
    "exp2": "2 ** x",
    "exp10": "10 ** x",
    "log": "natural logarithm",
    "log2": "base-2 logarithm",
    "log10": "base-10 logarithm",
    "log1p": "log(1 + x), accurate for small x",
    "sqrt": "square root",
    "rsqrt": "1 / sqrt(x)",
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "tanh": "hyperbolic tangent",
    "erf": "error function",
    "sigmoid": "1 / (1 + exp(-x))",
    "isnan": "x is NaN (a bool)",
}

BINARY_OPS = {
    "+": "sum",
    "-": "difference",
    "*": "product",
    "/": "float division",
    "//": "integer division truncating toward zero (TIR's Div, truncdiv)",
    "%": "integer remainder with the sign of the dividend (TIR's Mod, truncmod)",
    "floordiv": "integer division rounding toward minus infinity",
    "floormod": "integer remainder with the sign of the divisor",
    "cdiv": "integer division rounding up, of non-negative operands (grid sizes)",
    "fmod": "float remainder with the sign of the dividend (C fmod; TIR's float Mod and T.fmod)",
    "pow": "a ** b as C's pow (negative bases with integral exponents included)",
    "copysign": "|a| with the sign bit of b",
    "min": "minimum",
    "max": "maximum",
    "<": "less than", "<=": "at most", ">": "greater than", ">=": "at least", "==": "equal", "!=": "not equal",
    "and": "logical and of bools",
    "or": "logical or of bools",
    "&": "bitwise and",
    "|": "bitwise or",
    "^": "bitwise xor",
    "<<": "shift left",
    ">>": "shift right (arithmetic on signed, logical on unsigned integers)",
}

# TIR intrinsic (the last part of the op name: tirx.exp, prim.ceil, ...) -> tile op; float operands only
UNARY_INTRINSICS = {
    "exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan",
    "tanh": "tanh", "erf": "erf", "sigmoid": "sigmoid", "fabs": "abs", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "round": "round", "nearbyint": "round", "isnan": "isnan",
}
BINARY_INTRINSICS = {"pow": "pow", "fmod": "fmod", "copysign": "copysign"}

assert set(UNARY_INTRINSICS.values()) <= set(UNARY_OPS) and set(BINARY_INTRINSICS.values()) <= set(BINARY_OPS)


def _wrap(value: int, dtype: str) -> int:
    """`value` as the integer dtype holds it (two's complement wraps, as TVM's build does)."""
    bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
    value &= (1 << bits) - 1
    return value - (1 << bits) if dtype.startswith("int") and value >= 1 << (bits - 1) else value


def _truncdiv(x: int, y: int) -> int:
    quotient = abs(x) // abs(y)
    return quotient if (x >= 0) == (y >= 0) else -quotient


_INTEGER_FOLDS = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
    "//": _truncdiv, "%": lambda x, y: x - _truncdiv(x, y) * y,
    "floordiv": lambda x, y: x // y, "floormod": lambda x, y: x % y, "cdiv": lambda x, y: -(-x // y),
    "min": min, "max": max, "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y,
    "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y,
}
_FLOAT_FOLDS = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
    "min": lambda x, y: x if math.isnan(x) or x < y else y, "max": lambda x, y: x if math.isnan(x) or x > y else y,
    "fmod": math.fmod, "pow": math.pow, "copysign": math.copysign,
}
_COMPARISONS = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
                ">=": lambda x, y: x >= y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y,
                "and": lambda x, y: bool(x) and bool(y), "or": lambda x, y: bool(x) or bool(y)}


def fold(op: str, x, y, operand_dtype: str, dtype: str):
    """`x op y` of two constants, with TIR's meaning of `op` in `dtype`; None when it is not
    foldable here (division by zero, an op without a rule, a value the dtype cannot hold)."""
    try:
        if op in _COMPARISONS:
            return bool(_COMPARISONS[op](x, y))
        if dtype.startswith(("int", "uint")) and op in _INTEGER_FOLDS:
            return _wrap(int(_INTEGER_FOLDS[op](int(x), int(y))), dtype)
        if dtype in ("float16", "float32", "float64") and op in _FLOAT_FOLDS:
            narrow = np.dtype(dtype).type  # round as the dtype does (TVM computes half per op too)
            return float(narrow(_FLOAT_FOLDS[op](float(narrow(x)), float(narrow(y)))))
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    return None
