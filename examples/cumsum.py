"""A running sum along each row, written as users write it: the first element, then the previous
element plus this one. Tiling sees the dependence, keeps the row a tile and marks the scan; the
kernel uses tl.cumsum (with a carry across tiles for rows longer than one tile)."""

from tvm.script import tirx as T


def make_cumsum(M: int, N: int, dtype: str = "float32"):
    @T.prim_func(s_tir=True)
    def cumsum(X: T.Buffer((M, N), dtype), Y: T.Buffer((M, N), dtype)):
        for i, j in T.grid(M, N):
            with T.sblock("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])

    return cumsum


cumsum = make_cumsum(67, 45)

if __name__ == "__main__":
    from _check import main

    main(cumsum)
