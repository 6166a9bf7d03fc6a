"""Names that cannot collide (tir_passes/infra/names.py): a program whose loops, buffers, blocks,
scalar parameters and sizes are named as the generated module's own names (Triton's, Python's,
the emitter's temporaries and derived names) compiles to the same kernel plan and the same kernel
text up to names, and matches TVM."""

import io
import re
import tokenize

import pytest
import tvm

from lowering.kernel_plan import plan_of
from triton_codegen import check_against_tvm, compile

# every role of the program below, renamed together: `i` (a row loop), `k` (a reduction loop), `A`
# (an input buffer), "C" (a block), `alpha` (a scalar parameter), `M` (a size)
ROLES = ("i", "k", "A", "C", "alpha", "M")
HOSTILE = (
    "t", "tl", "pid", "rest", "mask_i", "dot", "acc", "triton", "torch", "math", "run", "grid", "meta", "self",
    "kernel", "range", "len", "min", "float", "int", "print", "sum", "type", "BLOCK_I", "GROUP_M", "num_warps",
    "num_stages", "A_ptr", "A_stride0", "f_kernel0", "s", "config", "programs", "PARAMS", "offs", "acc_C_1",
    "i_1", "_private", "trailing_", "numbers", "os", "launch_directly", "check_grid", "tensor", "x_tile",
)

SOURCE = '''# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def f(a: T.handle, B: T.Buffer((45, 19), "float32"), y: T.handle, d: T.handle, alpha: T.float32):
    M = T.int32()
    A = T.match_buffer(a, (M, 45), "float32")
    Y = T.match_buffer(y, (M, 19), "float32")
    D = T.match_buffer(d, (M,), "float32")
    for i, j, k in T.grid(M, 19, 45):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, k in T.grid(M, 45):
        with T.sblock("rowsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                D[vi] = T.float32(0)
            D[vi] = D[vi] + T.if_then_else(vk < 20, A[vi, vk] * alpha, T.exp(A[vi, vk]))
'''


def _program(names: dict[str, str]):
    text = SOURCE
    placeholders = {role: f"ROLE{index}X" for index, role in enumerate(ROLES)}
    for role, placeholder in placeholders.items():
        text = re.sub(rf'(?<![\w."]){role}\b|(?<=sblock\("){role}(?=")', placeholder, text)
    for role, placeholder in placeholders.items():
        text = text.replace(placeholder, names.get(role, role))
    return tvm.script.from_source(text)


def _shape(source: str) -> list[list[str]]:
    """Each kernel's tokens with every name a placeholder by first use in that kernel (attributes
    such as tl.dot, strings and comments kept): two kernels equal up to names have equal shapes."""
    kernels = source[source.index("@triton.jit"):source.index("def run(")]
    return [_kernel_shape("@triton.jit" + text) for text in kernels.split("@triton.jit")[1:]]


def _kernel_shape(text: str) -> list[str]:
    numbered: dict[str, str] = {}
    shape, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        word = token.string
        if token.type == tokenize.STRING:
            word = "STRING"
        elif token.type == tokenize.NAME and previous != "." and not _keyword(word):
            word = numbered.setdefault(word, f"n{len(numbered)}")
        shape.append(word)
        previous = token.string
    return shape


def _keyword(name: str) -> bool:
    import keyword

    return keyword.iskeyword(name)


BASE = compile(_program({}), verify=False)


def _rotation(start: int) -> dict[str, str]:
    return {role: HOSTILE[(start + offset) % len(HOSTILE)] for offset, role in enumerate(ROLES)}


@pytest.mark.parametrize("start", range(len(HOSTILE)), ids=HOSTILE)
def test_hostile_names_give_the_same_kernel(start):
    """Each hostile name in each role once (the roles rotate through the list together)."""
    kernel = compile(_program(_rotation(start)), verify=False)
    assert plan_of(kernel) == plan_of(BASE)
    assert _shape(kernel.source) == _shape(BASE.source)


@pytest.mark.parametrize("start", range(0, len(HOSTILE), 9))
def test_hostile_names_match_tvm(start):
    names = _rotation(start)
    func = _program(names)
    report = check_against_tvm(compile(func, verify=False), func, sizes={names["M"]: 37})
    assert report.ok, str(report)
