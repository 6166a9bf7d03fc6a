"""CanonicalConstants: a float divided by a power of two is multiplied by its reciprocal.

Why: `x / 2` and `x * 0.5` are the same value bit for bit (the reciprocal of a power of two is
exact, and so are both roundings), but a later pass that looks for a constant factor (a scale
inside a contraction, FactorOutOfSums; a coefficient in an exponent, OnlineSoftmax) sees only
products. One form makes the plan independent of which the user wrote.

What it rewrites: `x / c` with c a float constant whose reciprocal is a power of two in range
(|c| = 2^k, 2^-k a normal float of x's type), in every block, as `x * (1 / c)`. Divisions by other
constants stay: their reciprocal rounds, so `x * (1 / c)` can differ from `x / c` in the last bit.

Assumes: nothing.
"""

from __future__ import annotations

import math

import tvm_ffi
from tvm import tirx

from tir_passes.infra.dtypes import DTYPES, FLOATS
from tir_passes.infra.pass_util import s_tir_pass


def exact_reciprocal(value: float, dtype: str) -> float | None:
    """1 / value when it is exact in `dtype` (value a power of two), else None."""
    if value == 0 or not math.isfinite(value) or dtype not in FLOATS:
        return None
    mantissa, _ = math.frexp(abs(value))
    if mantissa != 0.5:
        return None
    inverse = 1.0 / value
    return inverse if abs(inverse) >= DTYPES[dtype].smallest_normal and math.isfinite(inverse) else None


def _as_product(div: tirx.Div):
    if not isinstance(div.b, tirx.FloatImm):
        return div
    inverse = exact_reciprocal(div.b.value, str(div.b.ty.dtype))
    if inverse is None:
        return div
    return tirx.Mul(div.a, tirx.FloatImm(str(div.b.ty.dtype), inverse))


def canonical_constants(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (tirx.Div, _as_product))
    return func if body.same_as(func.body) else func.with_body(body)


def CanonicalConstants():
    return s_tir_pass("CanonicalConstants", canonical_constants)
