"""Every registered backend against the lowering: its op table, its registration, its refusals."""

import pytest

from lowering.ops import BINARY_OPS, UNARY_OPS
from lowering.tile_ir import Binary, Scalar, Unary
from tir_passes.errors import FrontendError, UnsupportedConstructError
from triton_codegen.backend import REGISTERED, Backend, backend, backends
from triton_codegen.gluon.emit import expr_source as gluon_expr_source

LOWERING_OPS = frozenset(UNARY_OPS) | frozenset(BINARY_OPS)


def test_every_registered_name_gives_its_backend():
    for name in REGISTERED:
        chosen = backend(name)
        assert isinstance(chosen, Backend) and chosen.name == name


def test_an_unknown_backend_is_refused_with_the_registered_names():
    with pytest.raises(FrontendError, match="unknown backend 'cuda': choose one of gluon, triton"):
        backend("cuda")


def test_every_backend_op_is_a_lowering_op():
    for chosen in backends():
        assert chosen.expression_ops <= LOWERING_OPS, (chosen.name, sorted(chosen.expression_ops - LOWERING_OPS))


def test_the_triton_backend_writes_every_lowering_op():
    assert backend("triton").expression_ops == LOWERING_OPS


def _operand(name: str, dtype: str) -> Scalar:
    return Scalar(name, dtype)


@pytest.mark.parametrize("op", sorted(LOWERING_OPS))
def test_the_gluon_backend_writes_its_ops_and_refuses_the_others_by_name(op):
    dtype = "float32" if op in ("exp", "log", "sqrt", "rsqrt", "/", "fmod", "pow") else "int32"
    if op in UNARY_OPS:
        expr = Unary(op, _operand("x", dtype), dtype, ())
    else:
        expr = Binary(op, _operand("a", dtype), _operand("b", dtype), dtype, ())
    if op in backend("gluon").expression_ops:
        text = gluon_expr_source(expr)
        compile(text, "<gluon expression>", "eval")
    else:
        with pytest.raises(UnsupportedConstructError, match="the Gluon backend has no rendering"):
            gluon_expr_source(expr)


def _gluon_value(op: str, a: int, b: int) -> int:
    """Evaluate the Gluon rendering with Python integers whose // and % truncate like Gluon's."""
    text = gluon_expr_source(Binary(op, Scalar("a", "int32"), Scalar("b", "int32"), "int32", ()))

    class Truncating(int):
        def __floordiv__(self, other):
            quotient = abs(int(self)) // abs(int(other))
            return Truncating(quotient if (self < 0) == (other < 0) else -quotient)

        def __mod__(self, other):
            return Truncating(int(self) - int(other) * int(Truncating(self) // other))

        def __and__(self, other):
            return Truncating(int(self) & int(other))

        def __sub__(self, other):
            return Truncating(int(self) - int(other))

        def __add__(self, other):
            return Truncating(int(self) + int(other))

        def __ne__(self, other):
            return _Bool(int(self) != int(other))

        def __lt__(self, other):
            return _Bool(int(self) < int(other))

    class _Bool(int):
        def __ne__(self, other):
            return _Bool(int(self) != int(other))

        def __and__(self, other):
            return _Bool(int(self) & int(other))

        def to(self, dtype):
            return Truncating(int(self))

    class _Gluon:
        int32 = "int32"

        @staticmethod
        def where(cond, x, y):
            return x if cond else y

    return int(eval(text, {"a": Truncating(a), "b": Truncating(b), "gl": _Gluon}))


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (-1, -2), (6, -3), (0, -5), (-8, 2)])
def test_gluon_floor_division_rounds_toward_minus_infinity(a, b):
    assert _gluon_value("floordiv", a, b) == a // b
    assert _gluon_value("floormod", a, b) == a % b
