"""Programs with undefined behaviour on some data, or whose data the numerics check must draw with
care (tests/numerics/test_reference_isolation.py; the crash cases also run in a subprocess)."""

from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def divide_assumed(A: T.Buffer((37,), "int32"), Bd: T.Buffer((37,), "int32"), C: T.Buffer((37,), "int32")):
    for i in range(37):
        with T.sblock("divide"):
            vi = T.axis.spatial(37, i)
            T.assume(Bd[vi] > 0)
            C[vi] = T.floordiv(A[vi], Bd[vi])


@T.prim_func(s_tir=True)
def divide_loaded(A: T.Buffer((37,), "int32"), Bd: T.Buffer((37,), "int32"), C: T.Buffer((37,), "int32")):
    for i in range(37):
        with T.sblock("divide"):
            vi = T.axis.spatial(37, i)
            C[vi] = T.floormod(A[vi], Bd[vi]) + T.truncdiv(A[vi], Bd[vi])


@T.prim_func(s_tir=True)
def flat_gather(table: T.Buffer((53 * 45,), "float32"), ids: T.Buffer((37,), "int32"),
                Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("gather"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.assume(0 <= ids[vi] and ids[vi] < 53)
            Out[vi, vj] = table[ids[vi] * 45 + vj]


@T.prim_func(s_tir=True)
def shifted_gather(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int64"),
                   Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("gather"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.assume(0 <= ids[vi] and ids[vi] < 52)
            Out[vi, vj] = table[ids[vi] + T.int64(1), vj]


@T.prim_func(s_tir=True)
def computed_divisor(A: T.Buffer((37,), "int32"), Bd: T.Buffer((37,), "int32"), C: T.Buffer((37,), "int32")):
    for i in range(37):
        with T.sblock("divide"):
            vi = T.axis.spatial(37, i)
            C[vi] = T.truncdiv(A[vi], Bd[vi] - Bd[0])


@T.prim_func(s_tir=True)
def wild_gather(table: T.Buffer((53,), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37,), "float32")):
    for i in range(37):
        with T.sblock("gather"):
            vi = T.axis.spatial(37, i)
            Out[vi] = table[ids[vi] * ids[vi] * 4000000]


@T.prim_func(s_tir=True)
def tame_gather(table: T.Buffer((53,), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37,), "float32")):
    for i in range(37):
        with T.sblock("gather"):
            vi = T.axis.spatial(37, i)
            Out[vi] = table[ids[vi] * ids[vi] * 0]


@T.prim_func(s_tir=True)
def floordiv_by_negative(A: T.Buffer((37,), "int32"), C: T.Buffer((37,), "int32")):
    for i in range(37):
        with T.sblock("divide"):
            vi = T.axis.spatial(37, i)
            C[vi] = T.floordiv(T.floormod(A[vi], 2), -2) + T.floormod(A[vi], -3)


@T.prim_func(s_tir=True)
def fp16_row_sum(A: T.Buffer((5, 1500), "float16"), S: T.Buffer((5,), "float16")):
    for i, k in T.grid(5, 1500):
        with T.sblock("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float16(0)
            S[vi] = S[vi] + A[vi, vk]
