"""FactorOutOfSums's second step: in a contraction, a scale that varies along the reduction moves from a
loaded operand onto the operand computed in registers, so that the loaded one is a plain load. (The
first step takes a factor the reduction does not vary out of the sum; one that it varies cannot leave,
and this step decides which operand carries it. A file of its own: factor_out_of_sums.py's length.)

Why: attention's dV = Σ_i f16(exp(s - m)) · f16(dO / l) (the adjoint of O = acc / l) scales its loaded
operand dO by 1 / l[i], which varies along the sum's i: FactorOutOfSums cannot take it out of the sum.
Left there, the dot's second operand is computed in registers every step (loaded, widened, scaled,
rounded, then written to shared memory for the tensor cores) where it could go to them as loaded. The
probabilities are computed in registers anyway: scaled there (f16(exp(s - m) / l) · dO, FlashAttention-2's
form) the step costs one multiply more on them and nothing on dO. Measured on the H200 (2026-12-02,
benchmarks/attention_backward_variants_gpu.py, edit "plscale"; b2 h16 s2048 d128 fp16): the dV kernel
166.7 -> 144.1 µs.

What it rewrites: a sum block `Y = Y + T.Cast(w, A) * T.Cast(w, T.Cast(n, x * r))` (either order of the
two operands and of x and r), where x is `T.Cast(w, L)` with L a load of the narrow type n (a value the
wide type w holds exactly), r reads only variables that A reads too (so A keeps its axes: a scale of the
reduction, or of the batch), and A is `T.Cast(n, e)` with e not a load (computed in registers). Then the
term is `T.Cast(w, T.Cast(n, e * r)) * T.Cast(w, L)`.

Soundness: (e · r) · x = e · (x · r) in real arithmetic; in floating point the rounding to n moves from
x · r to e · r (as in FlashAttention-2, whose P = exp(s - lse) carries the 1 / l); the numerics check after
the pass compares the result with the input's.

Assumes: InlineElementwise ran (the scale is written in the contraction's term); FactorOutOfSums's
first step ran (a factor that can leave the sum has left it).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import contraction_term, exact_widening, value_dtype, vars_of
from tir_passes.infra.pass_util import replace_block


def _names(expr, iters: set[str]) -> set[str]:
    """The block's iteration variables `expr` reads."""
    return {v.name for v in vars_of(expr)} & iters


def _rounded(side, wide: str):
    """(n, v) when `side` is `T.Cast(wide, T.Cast(n, v))` with n narrower than wide; else None."""
    if not (isinstance(side, tirx.Cast) and str(side.ty.dtype) == wide and isinstance(side.value, tirx.Cast)):
        return None
    narrow = side.value
    if not exact_widening(side) or str(narrow.ty.dtype) == wide:
        return None
    return str(narrow.ty.dtype), narrow.value


def _scaled_load(value, narrow: str, wide: str, iters: set[str]):
    """(load, r) when `value` is `T.Cast(wide, L) * r` or `r * T.Cast(wide, L)`, L a load of `narrow` and r
    varying along some of the block's variables `iters`."""
    if not isinstance(value, tirx.Mul):
        return None
    for x, r in ((value.a, value.b), (value.b, value.a)):
        if (isinstance(x, tirx.Cast) and str(x.ty.dtype) == wide and isinstance(x.value, tvm.ir.TensorLoad)
                and value_dtype(x.value) == narrow and _names(r, iters)):
            return x.value, r
    return None


def moved_term(term, iters: set[str]):
    """The term with the scale moved onto the computed operand, or None where the rule does not apply;
    `iters`: the names of the block's iteration variables."""
    if not isinstance(term, tirx.Mul):
        return None
    wide = value_dtype(term)
    for computed, scaled in ((term.a, term.b), (term.b, term.a)):
        left, right = _rounded(computed, wide), _rounded(scaled, wide)
        if left is None or right is None or left[0] != right[0] or isinstance(left[1], tvm.ir.TensorLoad):
            continue
        found = _scaled_load(right[1], right[0], wide, iters)
        if found is None or not _names(found[1], iters) <= _names(left[1], iters):
            continue
        load, scale = found
        moved = tirx.Cast(wide, tirx.Cast(left[0], tirx.Mul(left[1], scale)))
        loaded = tirx.Cast(wide, load)
        return tirx.Mul(moved, loaded) if computed.same_as(term.a) else tirx.Mul(loaded, moved)
    return None


def _moved_block(block: s_tir.SBlock) -> s_tir.SBlock:
    term = contraction_term(block)
    new = moved_term(term, {iv.var.name for iv in block.iter_vars}) if term is not None else None
    if new is None:
        return block
    store = block.body
    value = tirx.Add(store.value.a, new) if store.value.b.same_as(term) else tirx.Add(new, store.value.b)
    return replace_block(block, body=tirx.BufferStore(store.buffer, value, store.indices, span=store.span))


def scale_onto_computed_operand(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, _moved_block))
    return func if body.same_as(func.body) else func.with_body(body)

