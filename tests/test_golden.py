"""Golden tile programs and kernels: the lowering's output for one program of each kind, kept as
text, so that any change to what the compiler emits shows as a reviewed diff. They do not check
correctness (the numerics tests do). Rewrite them with `pytest tests/test_golden.py --update-golden`.
"""

import os

import pytest
from tvm.script import tirx as T

from triton_codegen import compile

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


@T.prim_func(s_tir=True)
def scale_shift_relu(A: T.Buffer((67, 45), "float32"), B: T.Buffer((67, 45), "float32")):
    for i, j in T.grid(67, 45):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.max(A[vi, vj] * T.float32(2) + T.float32(1), T.float32(0))


@T.prim_func(s_tir=True)
def row_max(A: T.Buffer((37, 300), "float16"), B: T.Buffer((37,), "float32")):
    for i, k in T.grid(37, 300):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.min_value("float32")
            B[vi] = T.max(B[vi], T.Cast("float32", A[vi, vk]))


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((67, 33), "float16"), B: T.Buffer((33, 45), "float16"), C: T.Buffer((67, 45), "float32")):
    for i, j, k in T.grid(67, 45, 33):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])


@T.prim_func(s_tir=True)
def softmax(A: T.Buffer((67, 45), "float32"), Out: T.Buffer((67, 45), "float32")):
    row_max = T.sblock_alloc_buffer((67,), "float32")
    exp_buf = T.sblock_alloc_buffer((67, 45), "float32")
    row_sum = T.sblock_alloc_buffer((67,), "float32")
    for i, k in T.grid(67, 45):
        with T.sblock("row_max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                row_max[vi] = T.min_value("float32")
            row_max[vi] = T.max(row_max[vi], A[vi, vk])
    for i, j in T.grid(67, 45):
        with T.sblock("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            exp_buf[vi, vj] = T.exp(A[vi, vj] - row_max[vi])
    for i, k in T.grid(67, 45):
        with T.sblock("row_sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                row_sum[vi] = T.float32(0)
            row_sum[vi] = row_sum[vi] + exp_buf[vi, vk]
    for i, j in T.grid(67, 45):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = exp_buf[vi, vj] / row_sum[vi]


@T.prim_func(s_tir=True)
def cumsum(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


PROGRAMS = {"elementwise": scale_shift_relu, "reduction": row_max, "contraction": matmul, "fused": softmax,
            "scan": cumsum}


def _kernels_only(source: str) -> str:
    """The @triton.jit functions of a module (the runtime support around them is hand-written)."""
    start = source.index("\n@triton.jit") + 1
    return source[start:source.index("\ndef run(")].rstrip() + "\n"


def _check(name: str, text: str, update: bool) -> None:
    path = os.path.join(GOLDEN, name)
    if update:
        with open(path, "w") as handle:
            handle.write(text)
    with open(path) as handle:
        expected = handle.read()
    assert text == expected, f"{name} changed; review the diff and rerun with --update-golden if it is intended"


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_tile_program_and_kernel_are_the_golden_ones(kind, request):
    kernel = compile(PROGRAMS[kind], verify=False)
    update = request.config.getoption("--update-golden")
    _check(f"{kind}.tile.txt", kernel.tile_ir, update)
    _check(f"{kind}.kernel.txt", _kernels_only(kernel.source), update)


def test_the_module_opens_with_its_kernels_and_run():
    """A reader meets the kernels and run() first; the hand-written runtime comes after them."""
    source = compile(PROGRAMS["fused"], verify=False).source
    body = source[source.index('"""', 3) + 3:]
    statements = [line for line in body.splitlines() if line and not line.startswith((" ", "import ", "#", ")"))]
    assert statements[0] == "@triton.jit"
    run, support = source.index("\ndef run("), source.index("\n# --- what run() needs")
    jitted = [index for index in range(len(source)) if source.startswith("\n@triton.jit", index)]
    assert max(jitted) < run < support < source.index("\ndef check_arguments(") < source.index("\ndef tune(")
    assert "\nPARAMS = " in source[support:] and "\nCONFIGS = " in source[support:]
