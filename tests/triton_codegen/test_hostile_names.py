"""Names that cannot collide: TIR loops and buffers called as the code generator's temporaries,
Python's and Triton's names compile to kernels that match TVM."""

import re

import pytest
import tvm
from tvm.script import tirx as T

from helpers import compile_and_check
from triton_codegen import check_against_tvm, compile
from tir_passes.infra.names import python_name

HOSTILE = ("t", "tl", "pid", "rest", "mask_i", "dot", "acc", "triton", "run", "torch")


def _matmul_and_rowsum():
    @T.prim_func(s_tir=True)
    def f(A: T.Buffer((37, 45), "float32"), B: T.Buffer((45, 19), "float32"), C: T.Buffer((37, 19), "float32"),
          D: T.Buffer((37,), "float32")):
        for i, j, k in T.grid(37, 19, 45):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, k in T.grid(37, 45):
            with T.sblock("D"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    D[vi] = T.float32(0)
                D[vi] = D[vi] + T.if_then_else(vk < 20, A[vi, vk], T.exp(A[vi, vk]))
    return f


def _renamed(func, loops: dict[str, str], buffers: dict[str, str]):
    text = func.script()
    for old, new in buffers.items():
        text = re.sub(rf"\b{old}\b(?=\[|: T.Buffer)", new, text)
    for old, new in loops.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return tvm.script.from_source(text)


@pytest.mark.parametrize("row, reduction, buffer", [HOSTILE[n:n + 3] for n in range(0, 9, 3)] + [HOSTILE[-3:]])
def test_hostile_loop_and_buffer_names(row, reduction, buffer):
    """Every name of HOSTILE as a row loop, a reduction loop or an input buffer (the kernel check
    against TVM; the per-pass checks have nothing to do with names)."""
    func = _renamed(_matmul_and_rowsum(), {"i": row, "k": reduction}, {"A": buffer})
    kernel = compile(func, verify=False)
    report = check_against_tvm(kernel, func)
    assert report.ok, str(report)
    assert f"{python_name(buffer)}_ptr" in kernel.source


def test_rope_with_its_token_loop_named_t():
    @T.prim_func(s_tir=True)
    def rope(x: T.Buffer((37, 16), "float32"), cos: T.Buffer((37, 8), "float32"), sin: T.Buffer((37, 8), "float32"),
             out: T.Buffer((37, 16), "float32")):
        for t, d in T.grid(37, 16):
            with T.sblock("out"):
                vt, vd = T.axis.remap("SS", [t, d])
                out[vt, vd] = x[vt, vd] * cos[vt, vd % 8] + T.if_then_else(
                    vd < 8, -x[vt, T.min(vd + 8, 15)], x[vt, T.max(vd - 8, 0)]) * sin[vt, vd % 8]

    compile_and_check(rope, aot=False)


def test_a_serial_loop_named_t_beside_a_selected_temporary():
    """The loop carries a dependence, so `for t in range(...)` runs in the kernel; the
    T.if_then_else values are temporaries the printer once also called `t`."""

    @T.prim_func(s_tir=True)
    def decay(X: T.Buffer((19, 37), "float32"), Y: T.Buffer((19, 37), "float32")):
        for i, t in T.grid(19, 37):
            with T.sblock("Y"):
                vi, vt = T.axis.remap("SS", [i, t])
                Y[vi, vt] = T.if_then_else(vt == 0, X[vi, vt], Y[vi, T.max(vt - 1, 0)] * T.float32(0.5)
                                           + T.if_then_else(X[vi, vt] > T.float32(0), X[vi, vt], T.float32(0)))

    kernel = compile_and_check(decay, aot=False)
    assert "for t in range(" in kernel.source


def test_python_names_of_tir_names_are_distinct_and_never_the_modules():
    names = ["tl", "tl_", "tl__", "_x", "_x_", "x", "for", "triton", "_tir_maximum", "range"]
    escaped = [python_name(n) for n in names]
    assert len(set(escaped)) == len(escaped)
    assert all(e.endswith("_") for n, e in zip(names, escaped) if n not in ("x",))
    assert python_name("x") == "x" and python_name("acc") == "acc"
