"""A max reduction no output depends on (softmax's and attention's row max: a shift the outputs are
invariant to) gets no adjoint (the ZeroGradient record), and one the outputs do depend on keeps its
tie-sharing gradient; both against torch autograd in float64 through TVM's llvm build."""

import torch
from tvm.script import tirx as T

from attention import make_attention
from attention_forms import make_attention_normalize_first
from softmax import make_softmax
from test_differentiate import llvm_gradients
from tir_passes import differentiate
from tir_passes.contracts.autodiff import zero_gradients

R, C = 3, 5


@T.prim_func(s_tir=True)
def softmax_shift_apart(A: T.Buffer((R, C), "float64"), Out: T.Buffer((R, C), "float64")):
    """softmax(A / 2), the shift written as its own block and the exponent scaled."""
    m = T.sblock_alloc_buffer((R,), "float64")
    shifted = T.sblock_alloc_buffer((R, C), "float64")
    e = T.sblock_alloc_buffer((R, C), "float64")
    s = T.sblock_alloc_buffer((R,), "float64")
    for i, j in T.grid(R, C):
        with T.sblock("m"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                m[vi] = T.min_value("float64")
            m[vi] = T.max(m[vi], A[vi, vj])
    for i, j in T.grid(R, C):
        with T.sblock("shift"):
            vi, vj = T.axis.remap("SS", [i, j])
            shifted[vi, vj] = A[vi, vj] - m[vi]
    for i, j in T.grid(R, C):
        with T.sblock("e"):
            vi, vj = T.axis.remap("SS", [i, j])
            e[vi, vj] = T.exp(shifted[vi, vj] * T.float64(0.5))
    for i, j in T.grid(R, C):
        with T.sblock("s"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                s[vi] = T.float64(0)
            s[vi] = s[vi] + e[vi, vj]
    for i, j in T.grid(R, C):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = e[vi, vj] / s[vi]


@T.prim_func(s_tir=True)
def unnormalized(A: T.Buffer((R, C), "float64"), Out: T.Buffer((R, C), "float64")):
    """exp(A - max A): the output scales with the shift, so the max has a gradient."""
    m = T.sblock_alloc_buffer((R,), "float64")
    for i, j in T.grid(R, C):
        with T.sblock("m"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                m[vi] = T.min_value("float64")
            m[vi] = T.max(m[vi], A[vi, vj])
    for i, j in T.grid(R, C):
        with T.sblock("e"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = T.exp(A[vi, vj] - m[vi])


@T.prim_func(s_tir=True)
def columns_normalized(A: T.Buffer((R, C), "float64"), Out: T.Buffer((R, C), "float64")):
    """exp(A[i, j] - m[i]) divided by its sum over the rows i: the sum mixes rows shifted differently."""
    m = T.sblock_alloc_buffer((R,), "float64")
    e = T.sblock_alloc_buffer((R, C), "float64")
    s = T.sblock_alloc_buffer((C,), "float64")
    for i, j in T.grid(R, C):
        with T.sblock("m"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                m[vi] = T.min_value("float64")
            m[vi] = T.max(m[vi], A[vi, vj])
    for i, j in T.grid(R, C):
        with T.sblock("e"):
            vi, vj = T.axis.remap("SS", [i, j])
            e[vi, vj] = T.exp(A[vi, vj] - m[vi])
    for j, i in T.grid(C, R):
        with T.sblock("s"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                s[vj] = T.float64(0)
            s[vj] = s[vj] + e[vi, vj]
    for i, j in T.grid(R, C):
        with T.sblock("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = e[vi, vj] / s[vj]


@T.prim_func(s_tir=True)
def logsumexp(A: T.Buffer((R, C), "float64"), Out: T.Buffer((R,), "float64")):
    """log(sum exp(A - m)) + m: invariant too, but through a log, which the proof does not follow."""
    m = T.sblock_alloc_buffer((R,), "float64")
    s = T.sblock_alloc_buffer((R,), "float64")
    for i, j in T.grid(R, C):
        with T.sblock("m"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                m[vi] = T.min_value("float64")
            m[vi] = T.max(m[vi], A[vi, vj])
    for i, j in T.grid(R, C):
        with T.sblock("s"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                s[vi] = T.float64(0)
            s[vi] = s[vi] + T.exp(A[vi, vj] - m[vi])
    for i in range(R):
        with T.sblock("lse"):
            vi = T.axis.spatial(R, i)
            Out[vi] = T.log(s[vi]) + m[vi]


def _data():
    return torch.linspace(-2.0, 3.0, R * C, dtype=torch.float64).reshape(R, C).flip(1) ** 2 * 0.3


def _check(func, torch_fn, out_shape):
    a = _data()
    grad = torch.linspace(-1.0, 1.5, out_shape.numel(), dtype=torch.float64).reshape(out_shape)
    ours = llvm_gradients(func, ["A"], {"A": a}, {"Out": grad})
    leaf = a.clone().requires_grad_()
    torch_fn(leaf).backward(grad)
    torch.testing.assert_close(ours["A"], leaf.grad, rtol=1e-10, atol=1e-12)


def _blocks(backward) -> list[str]:
    return [line.split('"')[1] for line in backward.script().splitlines() if "T.sblock(" in line]


def test_softmax_and_attention_row_max_have_no_adjoint():
    for func in (make_softmax(R, C), make_attention(1, 2, 7, 4), make_attention(1, 2, 7, 4, causal=True),
                 make_attention_normalize_first(1, 2, 7, 4)):
        backward = differentiate(func, ["A"] if "A" in [p.name for p in func.params] else ["Q", "K", "V"])
        assert [(z.kind, z.block, z.buffer) for z in zero_gradients(backward)] == [("reduction", "row_max", "row_max")]
        assert not [b for b in _blocks(backward) if "ties" in b or b.startswith("d_row_max")]


def test_a_shift_written_apart_and_scaled_is_proven_and_the_gradient_matches_torch():
    backward = differentiate(softmax_shift_apart, ["A"])
    assert [z.buffer for z in zero_gradients(backward)] == ["m"]
    assert not [b for b in _blocks(backward) if b.startswith(("m_ties", "d_m"))]
    _check(softmax_shift_apart, lambda a: torch.softmax(a * 0.5, dim=1), torch.Size((R, C)))


def test_a_max_the_outputs_depend_on_keeps_its_gradient():
    for func, torch_fn, shape in (
            (unnormalized, lambda a: torch.exp(a - a.amax(dim=1, keepdim=True)), (R, C)),
            (columns_normalized, lambda a: (e := torch.exp(a - a.amax(dim=1, keepdim=True))) / e.sum(0), (R, C)),
            (logsumexp, lambda a: torch.log(torch.exp(a - (m := a.amax(dim=1))[:, None]).sum(1)) + m, (R,))):
        backward = differentiate(func, ["A"])
        assert zero_gradients(backward) == (), func
        assert [b for b in _blocks(backward) if b.startswith("m_ties")]
        _check(func, torch_fn, torch.Size(shape))
