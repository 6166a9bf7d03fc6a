"""CanonicalCasts: casts that change no value are dropped: a cast to the type a value already has,
and a value widened exactly and rounded back to its own type (`T.Cast("float16", T.Cast("float32",
x))` for a float16 x).

Why: where a contraction's operands are rounded is written many ways (`T.Cast("float32",
T.Cast("float16", T.Cast("float32", X[..])))` or `T.Cast("float32", X[..])` for a float16 X);
the dot's operand type is the same, but a round trip left in place reaches the kernel as
`X_tile.to(tl.float32).to(tl.float16)`: the tl.dot's operand is then a value computed in
registers, not the loaded tile (tests/plan_invariance, family operand_cast_round_trip). One form
makes the kernel independent of how the user spelled the rounding.

What it rewrites: in every block, `T.Cast(t, x)` with x of type t, as x; `T.Cast(t, T.Cast(w, x))`
with x of type t and w a type that holds every value of t (float16 or bfloat16 in float32:
analyses/nest.exact_widening), as x. Rounding casts (float32 to float16 of a float32 value) stay:
they are part of the value.

Assumes: nothing.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from tir_passes.analyses.nest import exact_widening, value_dtype
from tir_passes.infra.pass_util import s_tir_pass


def without_no_op(cast: tirx.Cast):
    """The cast, or its value where it changes none (the rule above)."""
    target, value = str(cast.ty.dtype), cast.value
    if value_dtype(value) == target:
        return value
    if isinstance(value, tirx.Cast) and value_dtype(value.value) == target and exact_widening(value):
        return value.value
    return cast


def canonical_casts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (tirx.Cast, without_no_op))
    return func if body.same_as(func.body) else func.with_body(body)


def CanonicalCasts():
    return s_tir_pass("CanonicalCasts", canonical_casts)
