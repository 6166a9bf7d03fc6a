"""CanonicalUpdates: a commutative self-update names the stored element first (`X = t + X` is
`X = X + t`, and so for `*`, `T.max` and `T.min`), and a contraction's two factors come in the
order of the output axes they index (`C[i, j] += B[k, j] * A[i, k]` is `C[i, j] += A[i, k] * B[k, j]`).

Why: a sum, a product or a running max is written with the old value on either side (`C = C + a *
b`, `acc = exp(s - m) * v + acc`, `T.max(s, M)`); the later passes read a reduction's update as
`X = X op t` (FactorOutOfSums takes the term t to move a factor out of the sum: without this pass
normalize-first attention written `acc = P · V + acc` lost its flash form, tests/plan_invariance,
family update_commuted). Tiling reads a contraction's first factor as the dot's A (its rows are
BLOCK_M, the GEMM price and the tile sizes follow): with the factors written the other way a
4096-deep fp16 GEMM of 8192×1024 got its 256-wide tile on the other axis (family factors_commuted).
One form makes every later reading independent of the operand order.

What it rewrites: every store `X[I] = op(t, X[I])` with op one of Add, Mul, Max, Min, whose
right operand loads exactly the stored element and whose left one does not, as `X[I] = op(X[I],
t)`. Nothing else moves (`X = (X + a) + b` is already X-first; `X = a + (X + b)` stays). Then in
every block with a `T.init()` whose update is `X[I] = X[I] + a * b` where a and b each use a
spatial block variable the other does not (a contraction: (m, k) times (k, n)), the factor whose
own variables index the earlier axis of X comes first (ties: as written). Longer products and
factors without an own spatial variable (a scale) stay.

Sound: the operations commute (IEEE addition and multiplication bit for bit; TIR's max and min are
commutative, as CanonicalReductionOrder also assumes).

Assumes: nothing.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import is_self_load, vars_of
from tir_passes.infra.pass_util import replace_block, s_tir_pass

COMMUTATIVE = (tirx.Add, tirx.Mul, tirx.Max, tirx.Min)


def _stored_element_first(store: tirx.BufferStore):
    value = store.value
    if not isinstance(value, COMMUTATIVE) or is_self_load(value.a, store) or not is_self_load(value.b, store):
        return store
    swapped = type(value)(value.b, value.a)
    return tirx.BufferStore(store.buffer, swapped, store.indices, span=store.span)


UNINDEXED = 1 << 30


def _uses(expr, var: tirx.Var) -> bool:
    return any(u.same_as(var) for u in vars_of(expr))


def _first_axis(factor, other, spatial: list[tirx.Var], store: tirx.BufferStore) -> int:
    """The first axis of the stored element indexed by a spatial variable `factor` uses and `other` does not."""
    own = [v for v in spatial if _uses(factor, v) and not _uses(other, v)]
    axes = [axis for axis, index in enumerate(store.indices) if any(_uses(index, v) for v in own)]
    return min(axes, default=UNINDEXED)


def _factors_in_output_order(block: s_tir.SBlock):
    store = block.body
    if block.init is None or not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add) \
            or not is_self_load(store.value.a, store) or not isinstance(store.value.b, tirx.Mul):
        return block
    a, b = store.value.b.a, store.value.b.b
    spatial = [iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    first_a, first_b = _first_axis(a, b, spatial, store), _first_axis(b, a, spatial, store)
    if UNINDEXED in (first_a, first_b) or first_a <= first_b:
        return block
    value = tirx.Add(store.value.a, tirx.Mul(b, a))
    return replace_block(block, body=tirx.BufferStore(store.buffer, value, store.indices, span=store.span))


def canonical_updates(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = tvm_ffi.structural_map(func.body, (tirx.BufferStore, _stored_element_first))
    body = tvm_ffi.structural_map(body, (s_tir.SBlock, _factors_in_output_order))
    return func if body.same_as(func.body) else func.with_body(body)


def CanonicalUpdates():
    return s_tir_pass("CanonicalUpdates", canonical_updates)
