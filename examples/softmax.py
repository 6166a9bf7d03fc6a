"""Row softmax in four stages (max, exp, sum, divide), as TVMScript users write it."""

from tvm.script import tirx as T


def make_softmax(M: int, N: int, dtype: str = "float32"):
    @T.prim_func(s_tir=True)
    def softmax(A: T.Buffer((M, N), dtype), Out: T.Buffer((M, N), dtype)):
        row_max = T.sblock_alloc_buffer((M,), "float32")
        exp_buf = T.sblock_alloc_buffer((M, N), "float32")
        row_sum = T.sblock_alloc_buffer((M,), "float32")
        for i, k in T.grid(M, N):
            with T.sblock("row_max"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    row_max[vi] = T.min_value("float32")
                row_max[vi] = T.max(row_max[vi], T.Cast("float32", A[vi, vk]))
        for i, j in T.grid(M, N):
            with T.sblock("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                exp_buf[vi, vj] = T.exp(T.Cast("float32", A[vi, vj]) - row_max[vi])
        for i, k in T.grid(M, N):
            with T.sblock("row_sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + exp_buf[vi, vk]
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Out[vi, vj] = T.Cast(dtype, exp_buf[vi, vj] / row_sum[vi])

    return softmax


softmax = make_softmax(67, 45)

if __name__ == "__main__":
    from _check import main

    main(softmax)
