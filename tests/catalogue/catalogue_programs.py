"""Small PrimFuncs the catalogue tests share (odd sizes, so tails and masks are exercised)."""

import tvm
from tvm import s_tir, tirx
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def scale(A: T.Buffer((67, 45), "float32"), B: T.Buffer((67, 45), "float32")):
    for i, j in T.grid(67, 45):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func(s_tir=True)
def scale_rows(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.sblock("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * T.float32(2) + T.float32(1)


@T.prim_func(s_tir=True)
def row_sum(a: T.handle, b: T.handle):
    m, k = T.int32(), T.int32()
    A = T.match_buffer(a, (m, k), "float32")
    B = T.match_buffer(b, (m,), "float32")
    for i, r in T.grid(m, k):
        with T.sblock("B"):
            vi, vr = T.axis.remap("SR", [i, r])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vr]


@T.prim_func(s_tir=True)
def row_max(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37,), "float32")):
    for i, k in T.grid(37, 45):
        with T.sblock("row_max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.min_value("float32")
            B[vi] = T.max(B[vi], A[vi, vk])


@T.prim_func(s_tir=True)
def add_scalar(A: T.Buffer((37,), "int64"), B: T.Buffer((37,), "int64"), s: T.int64, t: T.int32):
    for i in range(37):
        with T.sblock("B"):
            vi = T.axis.spatial(37, i)
            B[vi] = A[vi] + s * s + T.Cast("int64", t)


@T.prim_func(s_tir=True)
def transpose(A: T.Buffer((37, 29), "float16"), B: T.Buffer((29, 37), "float16")):
    for i, j in T.grid(29, 37):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] + T.float16(1)


@T.prim_func(s_tir=True)
def floor_div(A: T.Buffer((67,), "int32"), B: T.Buffer((67,), "int32")):
    for i in range(67):
        with T.sblock("B"):
            vi = T.axis.spatial(67, i)
            B[vi] = T.floordiv(A[vi], 3) + T.floormod(A[vi], 5)


def undefined_variable_func() -> tirx.PrimFunc:
    """A block bound to a variable no loop defines (TVMScript would refuse to parse it)."""
    A = tirx.decl_buffer((16,), "float32", "A", layout=None)
    i, stray = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    vi = tirx.IterVar(tvm.ir.Range(0, 16), tirx.Var("vi", "int32"), tirx.IterVar.DataPar)
    store = tirx.BufferStore(A, tirx.const(1.0, "float32"), [vi.var])
    written = [tirx.BufferRegion(A, [tvm.ir.Range.from_min_extent(vi.var, 1)])]
    block = s_tir.SBlock(iter_vars=[vi], reads=[], writes=written, name_hint="B", body=store)
    loop = tirx.For(i, 0, 16, tirx.ForKind.SERIAL, s_tir.SBlockRealize([stray], True, block))
    root = s_tir.SBlock(iter_vars=[], reads=[], writes=[], name_hint="root", body=loop)
    func = tirx.PrimFunc([A], s_tir.SBlockRealize([], True, root))
    return func.with_attr({"global_symbol": "undefined_variable", "s_tir": True})
