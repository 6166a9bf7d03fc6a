"""The Gluon backend renders TIR's floordiv/floormod (rounding toward minus infinity) with the sign
fix Triton's truncating `//` and `%` need, as the Triton backend does: negative loaded integers
divide right. The rendered text is evaluated under C's truncating semantics (what Gluon and
Triton compute), for every sign of both operands."""

import itertools
import types

from triton_codegen.gluon.emit import expr_source
from lowering.tile_ir import Binary, Scalar


class TruncatingInt:
    """An integer whose // and % truncate toward zero, as C's, Triton's and Gluon's do."""

    def __init__(self, value: int):
        self.value = int(value)

    def _other(self, other) -> int:
        return other.value if isinstance(other, TruncatingInt) else int(other)

    def __floordiv__(self, other):
        a, b = self.value, self._other(other)
        q = abs(a) // abs(b)
        return TruncatingInt(q if (a >= 0) == (b >= 0) else -q)

    def __mod__(self, other):
        return TruncatingInt(self.value - (self // other).value * self._other(other))

    def __add__(self, other):
        return TruncatingInt(self.value + self._other(other))

    def __sub__(self, other):
        return TruncatingInt(self.value - self._other(other))

    def __ne__(self, other):
        return TruncatingInt(self.value != self._other(other))

    def __lt__(self, other):
        return TruncatingInt(self.value < self._other(other))

    def __and__(self, other):
        return TruncatingInt(bool(self.value) and bool(self._other(other)))

    def to(self, _dtype):
        return TruncatingInt(self.value)


GL = types.SimpleNamespace(int32="int32", where=lambda c, x, y: x if c.value else y)


def _evaluate(op: str, a: int, b: int) -> int:
    text = expr_source(Binary(op, Scalar("a", "int32"), Scalar("b", "int32"), "int32", ()))
    return eval(text, {"gl": GL}, {"a": TruncatingInt(a), "b": TruncatingInt(b)}).value  # noqa: S307


def test_floor_division_and_modulo_round_toward_minus_infinity():
    for a, b in itertools.product((-7, -6, -1, 0, 1, 6, 7), (-3, -2, 2, 3)):
        assert _evaluate("floordiv", a, b) == a // b, (a, b)   # Python's // and % floor, as TIR's
        assert _evaluate("floormod", a, b) == a % b, (a, b)
