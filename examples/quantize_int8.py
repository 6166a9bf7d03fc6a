"""Row-wise int8 quantization as TVMScript users write it: per row, the largest magnitude (absmax),
the row's scale absmax / 127 (an output), and every element divided by it, rounded and clamped
to [-127, 127].

The row statistic absmax is read by two nests (the scale's and the quantized values'): LoopFusion
merges those independent readers over their shared row loop, so the statistic stays in registers
and the program is one kernel when the row fits (docs/canonical-forms.md)."""

from tvm.script import tirx as T


def make_quantize_int8(M: int, N: int, dtype: str = "float16"):
    @T.prim_func(s_tir=True)
    def quantize_int8(X: T.Buffer((M, N), dtype), Q: T.Buffer((M, N), "int8"), S: T.Buffer((M,), "float32")):
        absmax = T.sblock_alloc_buffer((M,), "float32")
        for i, j in T.grid(M, N):
            with T.sblock("absmax"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    absmax[vi] = T.float32(1e-6)
                absmax[vi] = T.max(absmax[vi], T.abs(T.Cast("float32", X[vi, vj])))
        for i in T.grid(M):
            with T.sblock("scale"):
                vi = T.axis.remap("S", [i])
                S[vi] = absmax[vi] / T.float32(127)
        for i, j in T.grid(M, N):
            with T.sblock("quantize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Q[vi, vj] = T.Cast("int8", T.max(T.min(
                    T.round(T.Cast("float32", X[vi, vj]) * T.float32(127) / absmax[vi]), T.float32(127)),
                    T.float32(-127)))

    return quantize_int8


quantize_int8 = make_quantize_int8(67, 45)

if __name__ == "__main__":
    from _check import main

    main(quantize_int8)
