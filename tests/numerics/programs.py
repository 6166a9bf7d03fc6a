"""PrimFuncs that differ in structure from the examples (axis orders, outer reductions, strided
windows, negative integer division, 3-D broadcasts, mixed precision, ...)."""

from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def column_sum(A: T.Buffer((67, 45), "float32"), B: T.Buffer((45,), "float32")):
    # the reduction axis is the outer loop
    for i, j in T.grid(67, 45):
        with T.sblock("B"):
            vi, vj = T.axis.remap("RS", [i, j])
            with T.init():
                B[vj] = T.float32(0)
            B[vj] = B[vj] + A[vi, vj]


@T.prim_func(s_tir=True)
def permute3d(A: T.Buffer((5, 7, 9), "float32"), B: T.Buffer((9, 5, 7), "float32")):
    # loops in the output's order, reads permuted
    for k, i, j in T.grid(9, 5, 7):
        with T.sblock("B"):
            vk, vi, vj = T.axis.remap("SSS", [k, i, j])
            B[vk, vi, vj] = A[vi, vj, vk] * T.float32(3)


@T.prim_func(s_tir=True)
def strided_window(X: T.Buffer((101,), "float32"), W: T.Buffer((5,), "float32"), Y: T.Buffer((49,), "float32")):
    for i, r in T.grid(49, 5):
        with T.sblock("Y"):
            vi, vr = T.axis.remap("SR", [i, r])
            with T.init():
                Y[vi] = T.float32(0)
            Y[vi] = Y[vi] + X[vi * 2 + vr] * W[vr]


@T.prim_func(s_tir=True)
def negative_floordiv(A: T.Buffer((13, 11), "int32"), B: T.Buffer((13, 11), "int32")):
    for i, j in T.grid(13, 11):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.floordiv(A[vi, vj] - 3, 4) * 10 + T.floormod(A[vi, vj] - vj, 3) + T.floordiv(vi - 6, 5) \
                + T.truncdiv(A[vi, vj], 3)


@T.prim_func(s_tir=True)
def broadcast3d(A: T.Buffer((3, 17, 1), "float32"), bias: T.Buffer((19,), "float32"), scale: T.Buffer((3,), "float32"),
                C: T.Buffer((3, 17, 19), "float32")):
    for b, i, j in T.grid(3, 17, 19):
        with T.sblock("C"):
            vb, vi, vj = T.axis.remap("SSS", [b, i, j])
            C[vb, vi, vj] = A[vb, vi, 0] * scale[vb] + bias[vj]


@T.prim_func(s_tir=True)
def fp16_sum_of_squares(A: T.Buffer((29, 300), "float16"), B: T.Buffer((29,), "float32")):
    for i, k in T.grid(29, 300):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", A[vi, vk])


@T.prim_func(s_tir=True)
def max_over_two_axes(A: T.Buffer((4, 13, 21), "float32"), B: T.Buffer((4,), "float32")):
    for b, i, j in T.grid(4, 13, 21):
        with T.sblock("B"):
            vb, vi, vj = T.axis.remap("SRR", [b, i, j])
            with T.init():
                B[vb] = T.min_value("float32")
            B[vb] = T.max(B[vb], A[vb, vi, vj])


@T.prim_func(s_tir=True)
def leaky_triangle(A: T.Buffer((23, 23), "float32"), B: T.Buffer((23, 23), "float32")):
    for i, j in T.grid(23, 23):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(vj <= vi, T.Select(A[vi, vj] > T.float32(0), A[vi, vj], A[vi, vj] * T.float32(0.1)),
                                       T.float32(0))


@T.prim_func(s_tir=True)
def modular_gather(A: T.Buffer((13,), "float32"), B: T.Buffer((40,), "float32")):
    for i in range(40):
        with T.sblock("B"):
            vi = T.axis.spatial(40, i)
            B[vi] = A[(vi * 7) % 13]


@T.prim_func(s_tir=True)
def matmul_nt_bias_init(A: T.Buffer((37, 24), "float32"), Bt: T.Buffer((29, 24), "float32"), bias: T.Buffer((29,), "float32"),
                        C: T.Buffer((37, 29), "float32")):
    # B given transposed, and the accumulator starts from the bias
    for i, j, k in T.grid(37, 29, 24):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = bias[vj]
            C[vi, vj] = C[vi, vj] + A[vi, vk] * Bt[vj, vk]


@T.prim_func(s_tir=True)
def accumulate_without_init(A: T.Buffer((19, 31), "float32"), C: T.Buffer((19,), "float32")):
    # no T.init: adds to what C holds
    for i, k in T.grid(19, 31):
        with T.sblock("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            C[vi] = C[vi] + A[vi, vk]


@T.prim_func(s_tir=True)
def two_outputs_offset_loop(A: T.Buffer((30,), "float32"), B: T.Buffer((30,), "float32"), C: T.Buffer((30,), "float32")):
    for i in T.serial(2, 28):
        with T.sblock("BC"):
            vi = T.axis.spatial((2, 28), i)
            B[vi] = A[vi] + T.float32(1)
            C[vi] = T.exp(A[vi]) * T.sigmoid(A[vi]) + T.tanh(A[vi]) + T.sqrt(T.fabs(A[vi]))


@T.prim_func(s_tir=True)
def int_row_sum(A: T.Buffer((17, 70), "int32"), B: T.Buffer((17,), "int32")):
    for i, k in T.grid(17, 70):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0
            B[vi] = B[vi] + A[vi, vk] * (vk % 5 - 2)


@T.prim_func(s_tir=True)
def min_reduce_symbolic(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 33), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i, k in T.grid(n, 33):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.max_value("float32")
            B[vi] = T.min(B[vi], A[vi, vk])


PROGRAMS = [column_sum, permute3d, strided_window, negative_floordiv, broadcast3d, fp16_sum_of_squares,
            max_over_two_axes, leaky_triangle, modular_gather, matmul_nt_bias_init, accumulate_without_init,
            two_outputs_offset_loop, int_row_sum, min_reduce_symbolic]
