"""Which max and min reductions no output depends on: the result `m` enters only as a shift that
every output is invariant to (softmax's `exp(x - m) / Σ exp(x - m)`), so its gradient is exactly zero.

The proof follows how each value changes when `m[row]` becomes `m[row] + δ[row]` for any δ:
  - unchanged (INVARIANT), or a literal zero (unchanged, and compatible with any change below);
  - shifted, `v + a·δ` (a constant `a`): `m` itself (a = 1), sums and differences of shifted values,
    shifted values times a literal constant;
  - scaled, `v · exp(c·δ)` (a constant `c`, per base of the exponential): `exp` of a shifted value,
    products and quotients of scaled values (the constants add and subtract), sums of values scaled
    alike, max/min of them (the factor is positive), their sums over other axes.
A value scaled or shifted must keep the row it changes with: every changed value a block reads is read at
the same row (the same index expressions of m's axes), and a block writing a changed value writes it at
those row variables (it does not mix rows). Anything else that meets a changed value (another intrinsic,
an index, a condition, a product of two shifts) ends the proof: the gradient is then taken as usual.
`m` is invariant-free when every forward output comes out unchanged. Casts count as the identity, as they
do for the derivative (adjoint_rules.py): the statement is about real arithmetic, as the gradient is.
Constants are compared exactly (fractions of the float values).

Why: FlashAttention's backward never differentiates the row max; without this, differentiate builds the
max's gradient (a tie count and a reduction of dS over every key, zero up to rounding) and the backward
walks the keys once more for it.
Assumes: forward.py's blocks in program order (a block reads only what earlier blocks wrote).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import tvm
import tvm_ffi
from tvm import tirx

from .adjoint_rules import dtype_of, is_float
from .build import loads_in
from .forward import MAX, MIN, SPATIAL, SUM, ForwardBlock, ForwardProgram

_EXP_BASES = {"exp": "e", "exp2": "2", "exp10": "10"}


class _Unproven(Exception):
    """The proof does not go through here (the gradient is then built as usual)."""


@dataclass(frozen=True)
class _Change:
    """How a value changes under the shift: `v + shift·δ`, or `v · Π base^(scale[base]·δ)`."""
    shift: Fraction = Fraction(0)
    scale: tuple = ()                  # ((base, exponent), ...), sorted, exponents non-zero
    zero: bool = False                 # a literal 0: unchanged, and compatible with every change

    def changed(self) -> bool:
        return self.shift != 0 or bool(self.scale)


UNCHANGED, ZERO = _Change(), _Change(zero=True)


def _scaled(exponents: dict) -> _Change:
    kept = tuple(sorted((base, c) for base, c in exponents.items() if c != 0))
    return _Change(scale=kept)


@dataclass
class _Tracked:
    change: _Change
    rows: tuple                        # per axis of m, the axis of this buffer that carries it


@dataclass
class _Proof:
    forward: ForwardProgram
    result: ForwardBlock
    tracked: dict = field(default_factory=dict)   # buffer handle -> _Tracked


def invariant_reductions(forward: ForwardProgram) -> list[ForwardBlock]:
    """The max/min reductions of `forward` that no output depends on (their gradient is zero)."""
    found = []
    for block in forward.blocks:
        if block.kind in (MAX, MIN) and not _is_output(forward, block.output) and _proven(forward, block):
            found.append(block)
    return found


def _is_output(forward: ForwardProgram, buffer) -> bool:
    return any(buffer.same_as(o) for o in forward.outputs)


def _proven(forward: ForwardProgram, result: ForwardBlock) -> bool:
    proof = _Proof(forward, result)
    proof.tracked[result.output.__chandle__()] = _Tracked(_Change(shift=Fraction(1)),
                                                          tuple(range(len(result.output.shape))))
    later = forward.blocks[next(k for k, b in enumerate(forward.blocks) if b is result) + 1:]
    try:
        for block in later:
            _follow(proof, block)
    except _Unproven:
        return False
    return True


def _follow(proof: _Proof, block: ForwardBlock) -> None:
    """Record how `block`'s output changes (refusing a changed output of the program)."""
    row = _row_read(proof, block)
    if row is None:
        return
    term = _change(proof, block.value)
    change = _reduced(block, term, _change(proof, block.init) if block.init is not None else None)
    if not change.changed():
        return
    if _is_output(proof.forward, block.output):
        raise _Unproven(f"{block.name} writes the output {block.output.name}, which changes with the shift")
    rows = []
    for index in row:
        position = next((k for k, v in enumerate(block.out_indices) if isinstance(index, tirx.Var)
                         and v.same_as(index)), None)
        if position is None:
            raise _Unproven(f"{block.name} writes a changed value away from its row")
        rows.append(position)
    proof.tracked[block.output.__chandle__()] = _Tracked(change, tuple(rows))


def _row_read(proof: _Proof, block: ForwardBlock):
    """The row (index expressions of m's axes) at which `block` reads changed values; None: none read."""
    row = None
    exprs = [block.value] + ([block.init] if block.init is not None else [])
    for load in (load for expr in exprs for load in loads_in(expr)):
        for index in load.indices:
            if any(inner.source.__chandle__() in proof.tracked for inner in loads_in(index)):
                raise _Unproven(f"{block.name} indexes with a changed value")
        tracked = proof.tracked.get(load.source.__chandle__())
        if tracked is None:
            continue
        this = tuple(load.indices[axis] for axis in tracked.rows)
        if row is None:
            row = this
        elif not all(tvm_ffi.structural_equal(a, b) for a, b in zip(row, this)):
            raise _Unproven(f"{block.name} reads changed values of two rows")
    return row


def _reduced(block: ForwardBlock, term: _Change, init: _Change | None) -> _Change:
    if block.kind == SPATIAL or not term.changed():
        if init is not None and init.changed():
            raise _Unproven(f"{block.name}: a changed T.init")
        return term if block.kind == SPATIAL else UNCHANGED
    if block.kind == SUM and term.scale and init is not None and init.zero:
        return term
    if block.kind in (MAX, MIN) and init is not None and not init.changed():
        return term        # the identity init (±max value) stays the identity; the factor exp(c·δ) is positive
    raise _Unproven(f"{block.name}: a {block.kind} of a changed term")


def _change(proof: _Proof, expr) -> _Change:
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return ZERO if float(expr.value) == 0 else UNCHANGED
    if isinstance(expr, tvm.ir.TensorLoad):
        tracked = proof.tracked.get(expr.source.__chandle__())
        return tracked.change if tracked is not None else UNCHANGED
    if isinstance(expr, tirx.Var):
        return UNCHANGED
    if isinstance(expr, tirx.Cast):
        inner = _change(proof, expr.value)
        if inner.changed() and not (is_float(dtype_of(expr)) and is_float(dtype_of(expr.value))):
            raise _Unproven("a changed value cast to an integer")
        return inner
    rule = _RULES.get(type(expr))
    if rule is not None:
        return rule(proof, expr)
    if isinstance(expr, tvm.ir.Call):
        return _call(proof, expr)
    return _unchanged_inside(proof, expr)


def _unchanged_inside(proof: _Proof, expr) -> _Change:
    if any(load.source.__chandle__() in proof.tracked for load in loads_in(expr)):
        raise _Unproven(f"a changed value inside {type(expr).__name__}")
    return UNCHANGED


def _add(proof: _Proof, expr, sign: int) -> _Change:
    a, b = _change(proof, expr.a), _change(proof, expr.b)
    if b.zero:
        return a
    if a.zero:
        return _Change(shift=-b.shift, scale=b.scale) if sign < 0 else b
    if a.scale or b.scale:
        if a.scale == b.scale and not a.shift and not b.shift:
            return a
        raise _Unproven("a sum of values scaled differently")
    shift = a.shift + sign * b.shift
    return _Change(shift=shift)


def _literal(expr) -> Fraction | None:
    if isinstance(expr, tirx.Cast):
        return _literal(expr.value)
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return Fraction(float(expr.value))
    return None


def _mul(proof: _Proof, expr) -> _Change:
    a, b = _change(proof, expr.a), _change(proof, expr.b)
    if a.zero or b.zero:
        return ZERO
    for shifted, other, operand in ((a, b, expr.b), (b, a, expr.a)):
        if shifted.shift:
            constant = _literal(operand)
            if constant is None or other.changed():
                raise _Unproven("a shifted value times something other than a constant")
            return _Change(shift=shifted.shift * constant) if constant else ZERO
    exponents = dict(a.scale)
    for base, c in b.scale:
        exponents[base] = exponents.get(base, 0) + c
    return _scaled(exponents)


def _div(proof: _Proof, expr) -> _Change:
    a, b = _change(proof, expr.a), _change(proof, expr.b)
    if b.zero or b.shift:
        raise _Unproven("a division by a zero or a shifted value")
    if a.zero:
        return ZERO
    if a.shift:
        constant = _literal(expr.b)
        if constant is None:
            raise _Unproven("a shifted value divided by something other than a constant")
        return _Change(shift=a.shift / constant)
    exponents = dict(a.scale)
    for base, c in b.scale:
        exponents[base] = exponents.get(base, 0) - c
    return _scaled(exponents)


def _alike(a: _Change, b: _Change) -> _Change:
    """max, min or a choice between two values: both change alike (a literal zero goes with a scale)."""
    if a.zero and not b.shift:
        return b
    if b.zero and not a.shift:
        return a
    if a == b:
        return a
    raise _Unproven("a choice between values that change differently")


def _max_min(proof: _Proof, expr) -> _Change:
    return _alike(_change(proof, expr.a), _change(proof, expr.b))


def _select(proof: _Proof, expr) -> _Change:
    _unchanged_inside(proof, expr.condition)
    return _alike(_change(proof, expr.true_value), _change(proof, expr.false_value))


def _call(proof: _Proof, expr) -> _Change:
    name = str(expr.op.name).rsplit(".", 1)[-1]
    if name == "if_then_else":
        condition, a, b = expr.args
        _unchanged_inside(proof, condition)
        return _alike(_change(proof, a), _change(proof, b))
    if name in _EXP_BASES and len(expr.args) == 1:
        argument = _change(proof, expr.args[0])
        if argument.scale:
            raise _Unproven(f"{name} of a scaled value")
        return _scaled({_EXP_BASES[name]: argument.shift}) if argument.shift else UNCHANGED
    for argument in expr.args:
        if _change(proof, argument).changed():
            raise _Unproven(f"the intrinsic {name} of a changed value")
    return UNCHANGED


_RULES = {
    tirx.Add: lambda proof, e: _add(proof, e, 1), tirx.Sub: lambda proof, e: _add(proof, e, -1),
    tirx.Mul: _mul, tirx.Div: _div, tirx.Max: _max_min, tirx.Min: _max_min, tirx.Select: _select,
}
