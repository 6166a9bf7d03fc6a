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
