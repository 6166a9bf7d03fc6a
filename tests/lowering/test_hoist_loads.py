"""Loop-invariant loads are made once, before the loop (lowering/rewrites/hoist_loads.py)."""

from lowering.rewrites.hoist_loads import hoist_invariant_loads
from lowering.tile_ir import Assign, Binary, Const, Load, Loop, Reg, Scalar, Store

ROW = (Binary("*", Scalar("pid", "int32"), Const(8, "int32"), "int32", ()),)


def _load(buffer: str, offset) -> Load:
    return Load(buffer, offset, (), "float32", ())


def _fresh(base: str) -> str:
    return base + "_1"


def _loop(body, stop=Const(4, "int32")) -> Loop:
    return Loop("k", Const(0, "int32"), stop, tuple(body))


def test_a_load_that_no_iteration_changes_is_read_once_before_the_loop():
    q = _load("Q", ROW[0])
    v = _load("V", Scalar("k", "int32"))
    body = (Assign("acc", Binary("+", Reg("acc", "float32", ()), Binary("*", q, v, "float32", ()), "float32", ()), "float32", ()),)
    [before, loop] = hoist_invariant_loads((_loop(body),), _fresh)
    assert before == Assign("Q_tile_1", q, "float32", ())
    [update] = loop.body
    assert update.value.b == Binary("*", Reg("Q_tile_1", "float32", ()), v, "float32", ())   # V still read per k


def test_loads_the_loop_changes_stay_inside():
    by_register = _load("X", Reg("acc", "float32", ()))          # uses a register the loop assigns
    stored = _load("Y", ROW[0])                                   # a buffer the loop writes
    body = (Assign("acc", by_register, "float32", ()), Store("Y", ROW[0], stored, ()))
    [loop] = hoist_invariant_loads((_loop(body),), _fresh)
    assert loop.body == body


def test_a_loop_that_may_not_run_hoists_nothing():
    body = (Assign("acc", _load("Q", ROW[0]), "float32", ()),)
    symbolic = _loop(body, stop=Scalar("n", "int32"))
    assert hoist_invariant_loads((symbolic,), _fresh) == (symbolic,)
