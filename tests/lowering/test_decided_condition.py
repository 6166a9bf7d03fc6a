"""A window's interior decides the masks' bounds on j - i (lowering/rules/exprs.decided_condition):
what is left of a condition composed with and, or and not, the undecided parts kept as they are."""

import tvm_ffi
from tvm import tirx

from lowering.rules.exprs import decided_condition

I, J = tirx.Var("i", "int32"), tirx.Var("j", "int32")
PAD, KEEP = tirx.Var("pad", "bool"), tirx.Var("keep", "bool")
ABOVE, FAR = J > I, I - J >= 40          # the window's two bounds: both fail inside it


class Interior:
    """A key walk's interior tiles: the two bounds decided False, everything else undecided."""

    @staticmethod
    def interior(condition):
        return False if any(tvm_ffi.structural_equal(condition, bound) for bound in (ABOVE, FAR)) else None


def _same(left, right) -> bool:
    return tvm_ffi.structural_equal(left, right)


def test_the_decided_bounds_drop_out_and_the_rest_stays():
    ctx = Interior()
    assert decided_condition(ctx, tirx.Or(ABOVE, FAR)) is False
    assert _same(decided_condition(ctx, tirx.Or(ABOVE, PAD)), PAD)
    assert _same(decided_condition(ctx, tirx.Not(tirx.Or(ABOVE, PAD))), tirx.Not(PAD))
    assert decided_condition(ctx, tirx.Not(tirx.And(ABOVE, PAD))) is True
    assert _same(decided_condition(ctx, tirx.And(KEEP, tirx.Or(ABOVE, PAD))), tirx.And(KEEP, PAD))


def test_a_constant_part_folds_and_an_undecided_condition_is_returned_as_is():
    ctx = Interior()
    assert decided_condition(ctx, tirx.And(tirx.const(True, "bool"), tirx.Or(ABOVE, FAR))) is False
    assert decided_condition(ctx, tirx.Or(tirx.const(False, "bool"), tirx.Not(ABOVE))) is True
    undecided = tirx.And(KEEP, PAD)
    assert decided_condition(ctx, undecided).same_as(undecided)


def test_outside_an_interior_nothing_is_decided():
    class Edge:
        interior = None

    condition = tirx.Or(ABOVE, FAR)
    assert decided_condition(Edge(), condition).same_as(condition)
