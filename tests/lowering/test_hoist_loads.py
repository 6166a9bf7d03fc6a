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


def test_a_window_of_a_loop_every_program_enters_hoists_and_its_segments_share_the_register():
    """Causal attention's key tiles: the TIR loop runs in every program, its window's bounds depend
    on the program id (two segments, inside the window and on the diagonal); Q is read once."""
    q, v = _load("Q", ROW[0]), _load("V", Scalar("k", "int32"))
    body = (Assign("acc", Binary("*", q, v, "float32", ()), "float32", ()),)
    past = Scalar("past", "int32")
    inside = Loop("k", Const(0, "int32"), past, body, entered=True)
    diagonal = Loop("k", past, Scalar("stop", "int32"), body, entered=True)
    [before, first, second] = hoist_invariant_loads((inside, diagonal), _fresh)
    assert before == Assign("Q_tile_1", q, "float32", ())
    for loop in (first, second):
        assert loop.body[0].value.a == Reg("Q_tile_1", "float32", ())


def test_a_store_between_the_segments_makes_the_later_one_read_again():
    q = _load("Q", ROW[0])
    body = (Assign("acc", q, "float32", ()),)
    entered = [Loop("k", Const(0, "int32"), Scalar("n", "int32"), body, entered=True) for _ in range(2)]
    out = hoist_invariant_loads((entered[0], Store("Q", ROW[0], Const(0.0, "float32"), ()), entered[1]), _fresh)
    assert [type(s).__name__ for s in out] == ["Assign", "Loop", "Store", "Assign", "Loop"]
