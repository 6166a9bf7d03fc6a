"""TileAccess: which loads and stores touch a rectangle of their buffer, at which origin, along
which tile axes, and which mask conjuncts are more than the buffer's bounds."""

import dataclasses

from tvm.script import tirx as T

from lowering.rewrites.tile_access import with_tile_accesses
from lowering.tile_ir import Binary, Const, Load, Scalar, Store
from triton_codegen import compile

from batch_matmul import make_batch_matmul
from matmul import make_matmul
from rmsnorm import make_rmsnorm


def _accesses(program, buffer: str) -> list:
    """Every load and store of `buffer` in the program, in program order."""
    found = []

    def walk(node):
        if isinstance(node, tuple):
            for item in node:
                walk(item)
        elif dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                if f.name != "tile":
                    walk(getattr(node, f.name))
            if isinstance(node, (Load, Store)) and node.buffer == buffer:
                found.append(node)

    for kernel in program.kernels:
        walk(kernel.body)
    return found


def _described(func) -> object:
    return with_tile_accesses(compile(func, verify=False).program)


def _times(a: str, b: str) -> Binary:
    return Binary("*", Scalar(a, "int32"), Scalar(b, "int32"), "int32", ())


def test_matmul_operands_and_output_are_tiles_at_their_blocks_origins():
    program = _described(make_matmul(67, 45, 33))
    (a,), (b,), (c,) = (_accesses(program, name) for name in "ABC")
    assert a.tile.axes == ("i", "k") and a.tile.origin == (_times("i_0", "BLOCK_M"), _times("k_0", "BLOCK_K"))
    # B is read as a (j, k) tile of the kernel, but its buffer axes are (k, j)
    assert b.dims == ("j", "k") and b.tile.axes == ("k", "j")
    assert c.tile.axes == ("i", "j") and c.tile.inner_axis_tiled
    # every mask conjunct is a tail mask against the buffer's extent: nothing is left over
    assert a.mask and not a.tile.residual and not b.tile.residual and not c.tile.residual


def test_axes_indexed_by_one_index_have_no_tile_axis():
    program = _described(make_batch_matmul(3, 37, 29, 21))
    (a,) = _accesses(program, "A")
    assert a.tile.axes[0] is None and a.tile.axes[1:] == ("i", "k")
    assert a.tile.origin[0] == Scalar("b", "int32")
    assert a.tile.tile_axes == ("i", "k")


def test_symbolic_extents_and_64_bit_offsets():
    # rows is a shape variable: X's offsets are 64-bit, its indices and masks are not
    program = _described(make_rmsnorm(45))
    x_loads = _accesses(program, "X")
    assert x_loads and all(x.tile is not None for x in x_loads)
    assert all(x.tile.origin[0] == _times("i_0", "BLOCK_I") and not x.tile.residual for x in x_loads)


@T.prim_func(s_tir=True)
def lower_triangle(X: T.Buffer((40, 48), "float32"), Y: T.Buffer((40, 48), "float32")):
    for i, j in T.grid(40, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            if vj <= vi:
                Y[vi, vj] = X[vi, vj] * T.float32(2)


def test_a_predicate_is_residual_and_the_bounds_are_not():
    program = _described(lower_triangle)
    (x,), (y,) = _accesses(program, "X"), _accesses(program, "Y")
    for access in (x, y):
        assert len(access.tile.residual) == 1
        assert access.tile.residual[0] in access.mask
        assert isinstance(access.tile.residual[0], Binary) and access.tile.residual[0].op in ("<=", ">=")


@T.prim_func(s_tir=True)
def shifted_window(X: T.Buffer((50, 48), "float32"), Y: T.Buffer((40, 48), "float32")):
    for i, j in T.grid(40, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi + 3, vj] + X[vi, vj]


def test_a_shifted_index_moves_the_origin_and_a_narrower_bound_is_residual():
    shifted, plain = _accesses(_described(shifted_window), "X")
    assert shifted.tile.origin[0] == Binary("+", _times("i_0", "BLOCK_I"), Const(3, "int32"), "int32", ())
    assert plain.tile.origin[0] == _times("i_0", "BLOCK_I")
    # the rows' tail mask i < 40 is the loop's extent, not X's (50): it stays, as a residual
    for access in (shifted, plain):
        assert [c.b for c in access.tile.residual] == [Const(40, "int32")]


@T.prim_func(s_tir=True)
def diagonal(A: T.Buffer((48, 48), "float32"), d: T.Buffer((48,), "float32")):
    for i in range(48):
        with T.sblock("d"):
            vi = T.axis.remap("S", [i])
            d[vi] = A[vi, vi]


@T.prim_func(s_tir=True)
def embedding(table: T.Buffer((53, 48), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 48), "float32")):
    for i, j in T.grid(37, 48):
        with T.sblock("embed"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = table[ids[vi], vj]


@T.prim_func(s_tir=True)
def strided(X: T.Buffer((96, 48), "float32"), Y: T.Buffer((48, 48), "float32")):
    for i, j in T.grid(48, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi * 2, vj]


def test_non_rectangular_accesses_are_not_tiles():
    assert _accesses(_described(diagonal), "A")[0].tile is None          # one tile axis on two buffer axes
    assert _accesses(_described(embedding), "table")[0].tile is None     # a gathered row
    assert _accesses(_described(strided), "X")[0].tile is None           # every other row
    assert _accesses(_described(embedding), "Out")[0].tile is not None
