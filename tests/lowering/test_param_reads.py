"""ParamSpec.read: a written parameter counts as unread (the PyTorch op allocates it) only when no
kernel loads it and one block provably writes every element; anything else stays read (in place)."""

import pytest
from tvm.script import tirx as T

from triton_codegen import compile

from cumsum import make_cumsum
from matmul import make_matmul
from programs import accumulate_without_init, two_outputs_offset_loop
from softmax import make_softmax


@T.prim_func(s_tir=True)
def scatter_rows(src: T.Buffer((7, 5), "float32"), ids: T.Buffer((7,), "int32"), Out: T.Buffer((9, 5), "float32")):
    for i, j in T.grid(7, 5):
        with T.sblock("scatter"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[ids[vi], vj] = src[vi, vj]


@T.prim_func(s_tir=True)
def diagonal(A: T.Buffer((6,), "float32"), D: T.Buffer((6, 6), "float32")):
    for i in range(6):
        with T.sblock("D"):
            vi = T.axis.spatial(6, i)
            D[vi, vi] = A[vi]


@T.prim_func(s_tir=True)
def guarded_half(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.sblock("B"):
            vi = T.axis.spatial(10, i)
            if vi < 5:
                B[vi] = A[vi]


@T.prim_func(s_tir=True)
def symbolic_copy(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 3), "float32")
    B = T.match_buffer(b, (n, 3), "float32")
    for i, j in T.grid(n, 3):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def _roles(func) -> dict[str, str]:
    params = compile(func, verify=False).program.params
    return {p.name: ("written " if p.written else "") + ("read" if p.read else "unread") for p in params}


@pytest.mark.parametrize("func, output", [
    (make_softmax(37, 29), "Out"),
    (make_matmul(37, 29, 21), "C"),   # the update reads C after its T.init: registers, not memory
    (make_cumsum(13, 29), "Y"),       # a scan reads the previous element: the carry, not memory
    (symbolic_copy, "B"),             # covers a symbolic extent
], ids=["softmax", "matmul_init", "scan", "symbolic"])
def test_outputs_written_whole_and_never_loaded_are_unread(func, output):
    roles = _roles(func)
    assert roles[output] == "written unread"
    assert all(role == "read" for name, role in roles.items() if name != output)


@pytest.mark.parametrize("func, expected", [
    (accumulate_without_init, {"C": "written read"}),                       # adds to what C holds
    (two_outputs_offset_loop, {"B": "written read", "C": "written read"}),   # elements 0, 1, 28, 29 untouched
    (scatter_rows, {"Out": "written read"}),                                # positions read from memory
    (diagonal, {"D": "written read"}),                                      # one loop, two dimensions
    (guarded_half, {"B": "written read"}),                                  # the store is under an if
], ids=["accumulate", "partial", "scatter", "diagonal", "guarded"])
def test_outputs_whose_passed_values_may_matter_stay_read(func, expected):
    roles = _roles(func)
    assert {name: roles[name] for name in expected} == expected
