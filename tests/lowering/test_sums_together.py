"""Tiling's `sums_together` applied (lowering/rewrites/sums_together.py): a marked walk's sums that do not
read each other's results become one reduction of the tuple; a sum that reads one starts a new run."""

from lowering.rewrites.sums_together import sums_together
from lowering.tile_ir import Assign, Binary, CombineAssign, Const, Loop, Reduce, Reg, Store, SumsCombine

K = ("k",)


def _sum(x) -> Reduce:
    return Reduce("sum", x, K, "float32", ())


def _walk(body, together=True) -> Loop:
    return Loop("r", Const(0, "int32"), Const(8, "int32"), tuple(body), sums_together=together)


def _fresh():
    count = iter(range(100))
    return lambda base: f"{base}_{next(count)}"


def test_independent_sums_after_a_dependent_one_reduce_together():
    """a = Σ x; b = Σ x·a (reads a: a new run); c = Σ y (reads neither): b and c as one reduction placed
    before b, each assignment reading its register; a stays a tl.sum."""
    x, y = Reg("x", "float32", K), Reg("y", "float32", K)
    a, b, c = _sum(x), _sum(Binary("*", x, Reg("a", "float32", ()), "float32", K)), _sum(y)
    body = [Assign("a", a, "float32", ()), Assign("b", b, "float32", ()), Assign("c", c, "float32", ())]
    (walk,) = sums_together((_walk(body),), _fresh())
    assert walk.body[0] == body[0]
    together = walk.body[1]
    assert isinstance(together, CombineAssign) and together.combine == SumsCombine(2, 0, "float32")
    assert together.update == (b.x, c.x) and together.dims == K
    assert walk.body[2] == Assign("b", Reg(together.names[0], "float32", ()), "float32", ())
    assert walk.body[3] == Assign("c", Reg(together.names[1], "float32", ()), "float32", ())


def test_a_store_between_ends_what_a_later_sum_may_read():
    """A sum loading the buffer a statement of the run stored does not join it (it would read before the store)."""
    from lowering.tile_ir import Load

    x = Reg("x", "float32", K)
    load = Load("B", Const(0, "int32"), (), "float32", K)
    body = [Assign("a", _sum(x), "float32", ()), Store("B", Const(0, "int32"), x, ()),
            Assign("b", _sum(load), "float32", ())]
    (walk,) = sums_together((_walk(body),), _fresh())
    assert walk.body == tuple(body)


def test_an_unmarked_walk_is_left_alone():
    x, y = Reg("x", "float32", K), Reg("y", "float32", K)
    body = [Assign("a", _sum(x), "float32", ()), Assign("b", _sum(y), "float32", ())]
    assert sums_together((_walk(body, together=False),), _fresh()) == (_walk(body, together=False),)
    (walk,) = sums_together((_walk(body),), _fresh())
    assert isinstance(walk.body[0], CombineAssign) and len(walk.body) == 3
