"""A 2-D transpose: B[j, i] = A[i, j]."""

from tvm.script import tirx as T


def make_transpose(M: int, N: int, dtype: str = "float32"):
    @T.prim_func(s_tir=True)
    def transpose(A: T.Buffer((M, N), dtype), B: T.Buffer((N, M), dtype)):
        for i, j in T.grid(M, N):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj, vi] = A[vi, vj]

    return transpose


transpose = make_transpose(67, 45)

if __name__ == "__main__":
    from _check import main

    main(transpose)
