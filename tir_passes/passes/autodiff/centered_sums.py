"""Which contributions are exactly zero because they sum a centered value: a reduction over the axis a
mean averages, of something affine in (x − mean), adds nothing to the mean's gradient.

The case: LayerNorm's variance `var = Σ_k (x_k − m)² / N` with `m = Σ_k x_k / N`. The variance's
contribution to m's gradient is `d_var · Σ_k −2 (x_k − m) / N`, and `Σ_k (x_k − m) = N·m − N·m = 0`:
the variance is stationary in its own mean. Built as written it is a third row reduction in the
backward's row kernel, beside the two the gradient needs, summing rounding noise.

The proof, for a SUM block reducing over `k` whose read `m[rows]` is the mean of `x` over `k`:
  - `m` is written by a SUM block `m[i] = Σ_k' s·x(i, k')` (T.init 0, one reduction variable of the
    same extent as `k`, starting at 0), or by a spatial block scaling such a sum, `m[i] = s₂·S[i]`;
    `x` is that block's term with the mean's variables put to the reading block's (`i` to the
    indices of the read, `k'` to `k`);
  - the read's indices do not mention `k` (m is one value over the whole sum);
  - the partial derivative of the block's value with respect to the read, as a polynomial over
    opaque atoms with exact rational coefficients (casts that lose nothing, to a float as wide or
    wider, count as the identity; a narrowing cast is an atom of its own), is `A·x + B·m + C`, where
    no atom of A, B or C mentions `k`; atoms are compared by their text and the buffers and
    variables they name (two buffers of one name are two atoms);
  - then `Σ_k (A·x + B·m + C) = A·m/s + N·B·m + N·C`, zero when C is the zero polynomial and
    `A + N·s·B` is too. A scale `s` that is 1/N rounded to the mean's dtype (or to float64) counts
    as 1/N: the difference, `Σ x · (1 − N·s)`, is below the rounding of the sum itself.
Anything else (a product of x and m, an atom that depends on k, a mean over another extent, a
mean that is not a plain scaled sum, a product too large to expand) ends the proof: the
contribution is built as usual.
Why: a normalization's backward written by hand (torch's layer_norm backward) has no such term;
without this, the row kernel reduces three sums per row where two are needed.
Assumes: forward.py's blocks (one block per nest; a reduction's variables have their extents in
its iter_vars' domains).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ...analyses.nest import uses_var
from .adjoint_rules import dtype_of, is_float
from .build import substitute
from .forward import SPATIAL, SUM, ForwardBlock, ForwardProgram

_MAX_TERMS = 64   # a product expanding to more terms than this is not read (it would grow exponentially)
_EXACT_WIDENING = {("float16", "float32"), ("float16", "float64"), ("bfloat16", "float32"), ("bfloat16", "float64"),
                   ("float32", "float64")}


class _NotPolynomial(Exception):
    """An expression the normalizer does not read as a polynomial over atoms."""


def vanishing_reason(forward: ForwardProgram, block: ForwardBlock, load, partial) -> str | None:
    """Why `Σ over block's reductions of upstream · partial` (the contribution of `block` to the
    gradient of `load`'s buffer) is exactly zero; None when that is not proven."""
    if block.kind != SUM or not is_float(dtype_of(load)):
        return None
    polynomials = _Polynomials()
    try:
        mean = _mean_of(forward, load, polynomials)
        if mean is None:
            return None
        summed, reduce_var, scale, variables = mean
        derivative, m_key = polynomials.of(partial), polynomials.key(load)
        for k in block.iter_vars:
            if k.iter_type != tirx.IterVar.CommReduce or not _same_extent(k, reduce_var) or \
                    any(uses_var(index, k.var) for index in load.indices):
                continue
            x = polynomials.single_atom(substitute(summed, {**variables, reduce_var.var.__chandle__(): k.var}))
            if x is None:
                continue
            x_key, x_scale = x
            ratio = _reciprocal_ratio(scale * x_scale, k, dtype_of(load))
            if ratio is not None and _sums_to_zero(polynomials, derivative, x_key, ratio, m_key, k):
                x_text = polynomials.atoms[x_key]
                return (f"{block.where()} sums over {k.var.name} a value affine in ({x_text} - {load}), and "
                        f"{load.source.name} is the mean of {x_text} over {k.var.name}: the sum is zero")
    except _NotPolynomial:
        return None
    return None


# --- the mean ---
def _mean_of(forward: ForwardProgram, load, polynomials):
    """(the summed atom over the sum block's variables, its reduction IterVar, the scale s with
    load = s·Σ atom, {the sum's row variables: the read's indices}), or None."""
    writer, scale = forward.writer(load.source), Fraction(1)
    if writer is not None and writer.kind == SPATIAL:
        hop = _scaled_sum_read(forward, writer, polynomials)
        writer, scale = (None, scale) if hop is None else (hop[1], hop[0])
    if writer is None or writer.kind != SUM or writer.init is None or len(writer.reduce_vars()) != 1:
        return None
    if polynomials.of(writer.init):
        return None
    term = polynomials.single_atom(writer.value)
    if term is None:
        return None
    [reduce_var] = [iv for iv in writer.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    variables = {var.__chandle__(): index for var, index in zip(writer.out_indices, load.indices)}
    return polynomials.atoms[term[0]], reduce_var, scale * term[1], variables


def _scaled_sum_read(forward: ForwardProgram, writer: ForwardBlock, polynomials):
    """`m[i] = s·S[i]`, S read at the spatial block's own variables and written by a sum:
    (s, S's block), else None. S's row variables sit at the same positions as m's."""
    scaled = polynomials.single_atom(writer.value)
    inner = polynomials.atoms[scaled[0]] if scaled is not None else None
    if not isinstance(inner, tvm.ir.TensorLoad) or len(inner.indices) != len(writer.out_indices):
        return None
    if not all(isinstance(i, tirx.Var) and i.same_as(v) for i, v in zip(inner.indices, writer.out_indices)):
        return None
    source = forward.writer(inner.source)
    return (scaled[1], source) if source is not None and source.kind == SUM else None


def _same_extent(a, b) -> bool:
    """Both start at 0 (forward.py's bindings), so the same extent is the same range."""
    return tvm_ffi.structural_equal(a.dom.extent, b.dom.extent)


# --- the sum of the partial over k ---
def _reciprocal_ratio(scale: Fraction, k, dtype: str) -> Fraction | None:
    """N·s, with s = 1/N rounded to `dtype` (or to float64) counted as exactly 1/N; None for a
    symbolic N or a scale that is not finite."""
    extent = k.dom.extent
    if not isinstance(extent, tirx.IntImm):
        return None
    n = int(extent)
    rounded = {Fraction(float(np.float64(1.0 / n)))}
    if dtype in ("float16", "float32", "float64"):
        rounded.add(Fraction(float(np.dtype(dtype).type(1.0 / n))))
    return Fraction(1) if scale in rounded else scale * n


def _sums_to_zero(polynomials, derivative: dict, x_key: str, ratio: Fraction, m_key: str, k) -> bool:
    """derivative = A·x + B·m + C with no atom mentioning k; A + ratio·B = 0 and C = 0 (ratio: N·s)."""
    combined: dict = {}
    for atoms, coefficient in derivative.items():
        xs, ms = atoms.count(x_key), atoms.count(m_key)
        rest = tuple(atom for atom in atoms if atom not in (x_key, m_key))
        if xs + ms != 1 or any(uses_var(polynomials.atoms[atom], k.var) for atom in rest):
            return False  # a product of x and m, a term without either (C, summed N times), or one varying with k
        _add(combined, rest, coefficient * (1 if xs else ratio))
    return bool(derivative) and not combined


# --- polynomials over opaque atoms, exact coefficients ---
class _Polynomials:
    """Polynomials {sorted tuple of atom keys: Fraction}; an atom's key is its TIR text, and the
    expression behind each key is kept (for the variables it reads). One instance per proof: keys
    are compared within one block's expressions, whose variables have distinct names."""

    def __init__(self):
        self.atoms: dict = {}

    def of(self, expr) -> dict:
        if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
            if isinstance(expr, tirx.FloatImm) and not math.isfinite(float(expr.value)):
                raise _NotPolynomial(expr)
            value = Fraction(float(expr.value)) if isinstance(expr, tirx.FloatImm) else Fraction(int(expr.value))
            return {(): value} if value else {}
        if isinstance(expr, tirx.Cast) and (dtype_of(expr.value) == dtype_of(expr)
                                            or (dtype_of(expr.value), dtype_of(expr)) in _EXACT_WIDENING):
            return self.of(expr.value)
        if isinstance(expr, (tirx.Add, tirx.Sub)):
            total = dict(self.of(expr.a))
            sign = 1 if isinstance(expr, tirx.Add) else -1
            for atoms, coefficient in self.of(expr.b).items():
                _add(total, atoms, sign * coefficient)
            return total
        if isinstance(expr, tirx.Mul):
            return _product(self.of(expr.a), self.of(expr.b))
        if isinstance(expr, tirx.Div):
            divisor = self.of(expr.b)
            if set(divisor) == {()}:
                return {atoms: c / divisor[()] for atoms, c in self.of(expr.a).items()}
        if not is_float(dtype_of(expr)):
            raise _NotPolynomial(expr)
        return {(self.key(expr),): Fraction(1)}

    def key(self, expr) -> str:
        """The atom's text with the identities of the buffers and variables it names (in walk order)."""
        named: list = []
        tvm_ffi.structural_walk(expr, [(tvm.ir.TensorLoad, lambda load: named.append(load.source.__chandle__())),
                                       (tvm.ir.Var, lambda var: named.append(var.__chandle__()))])
        key = f"{expr} {named}"
        self.atoms.setdefault(key, expr)
        return key

    def single_atom(self, expr):
        """(atom key, coefficient) when `expr` is c·atom, else None."""
        poly = self.of(expr)
        if len(poly) != 1:
            return None
        [(atoms, coefficient)] = poly.items()
        return (atoms[0], coefficient) if len(atoms) == 1 else None




def _product(a: dict, b: dict) -> dict:
    if len(a) * len(b) > _MAX_TERMS:
        raise _NotPolynomial("a product too large to expand")
    total: dict = {}
    for atoms_a, ca in a.items():
        for atoms_b, cb in b.items():
            _add(total, tuple(sorted(atoms_a + atoms_b)), ca * cb)
    return total


def _add(total: dict, atoms: tuple, coefficient: Fraction) -> None:
    value = total.get(atoms, Fraction(0)) + coefficient
    if value:
        total[atoms] = value
    else:
        total.pop(atoms, None)
