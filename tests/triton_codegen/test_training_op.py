"""Ops that train: `compile(func, wrt=...)` compiles the backward too and `as_torch_op` attaches it
with torch.library.register_autograd: eager autograd, a training step under
`torch.compile(fullgraph=True)`, gradcheck in float64, and a saved module that carries its backward."""

import os

import pytest
import torch
from tvm.script import tirx as T

from triton_codegen import compile
from triton_codegen.loader import import_module

from rmsnorm import make_rmsnorm

pytestmark = pytest.mark.interpreter


def rmsnorm_reference(x, w):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w


@pytest.fixture(scope="module")
def rmsnorm_kernel():
    return compile(make_rmsnorm(13), wrt=["X", "weight"], verify=False)


@pytest.fixture(scope="module")
def rmsnorm_op(rmsnorm_kernel):
    return rmsnorm_kernel.as_torch_op("tirtrain::rmsnorm")


def _leaves(*shapes, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype).requires_grad_() for shape in shapes]


def _grads_of(fn, leaves, grad):
    fn(*leaves).backward(grad)
    return [leaf.grad for leaf in leaves]


def test_the_op_trains_in_eager_mode(rmsnorm_op):
    x, w = _leaves((5, 13), (13,))
    grad = torch.randn(5, 13)
    ours = _grads_of(rmsnorm_op, [x, w], grad)
    theirs = _grads_of(rmsnorm_reference, [x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()],
                       grad)
    for got, want in zip(ours, theirs):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_training_step_compiles_with_fullgraph_and_no_graph_break(rmsnorm_op):
    """The compiled forward holds the op; AOTAutograd traces its registered backward (an op with
    a fake implementation) into the backward graph; fullgraph=True raises on any graph break."""
    weight = torch.nn.Parameter(torch.randn(13))
    x = torch.randn(7, 13)   # another row count than the eager test: the symbolic rows
    target = torch.randn(7, 13)

    def loss_of(x, weight):
        return ((rmsnorm_op(x, weight) - target) ** 2).mean()

    compiled = torch.compile(loss_of, fullgraph=True, backend="aot_eager")
    compiled(x, weight).backward()
    ours = weight.grad.clone()
    weight.grad = None
    ((rmsnorm_reference(x, weight) - target) ** 2).mean().backward()
    torch.testing.assert_close(ours, weight.grad, rtol=1e-4, atol=1e-6)


@T.prim_func(s_tir=True)
def tanh_linear(A: T.Buffer((2, 3), "float64"), W: T.Buffer((3, 2), "float64"), Y: T.Buffer((2, 2), "float64")):
    H = T.sblock_alloc_buffer((2, 2), "float64")
    for i, j, k in T.grid(2, 2, 3):
        with T.sblock("H"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                H[vi, vj] = T.float64(0)
            H[vi, vj] = H[vi, vj] + A[vi, vk] * W[vk, vj]
    for i, j in T.grid(2, 2):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.tanh(H[vi, vj]) * T.float64(1.5)


def test_gradcheck_passes_in_float64():
    op = compile(tanh_linear, wrt=["A", "W"], verify=False).as_torch_op("tirtrain::tanh_linear")
    a, w = _leaves((2, 3), (3, 2), dtype=torch.float64, seed=3)
    assert torch.autograd.gradcheck(op, (a, w), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_a_saved_module_carries_its_backward(rmsnorm_kernel, tmp_path):
    path = rmsnorm_kernel.save(str(tmp_path) + os.sep)
    assert sorted(os.listdir(tmp_path)) == ["rmsnorm.py", "rmsnorm_backward.py"]
    for name in os.listdir(tmp_path):
        with open(tmp_path / name) as handle:
            imports = {line.split()[1] for line in handle if line.startswith(("import ", "from "))}
        assert imports <= {"math", "numbers", "os", "threading", "torch", "triton", "triton.language", "__future__"}, imports
    module = import_module(path, interpret=True)
    op = module.as_torch_op("tirtrain::rmsnorm_saved")
    x, w = _leaves((4, 13), (13,), seed=5)
    grad = torch.randn(4, 13)
    ours = _grads_of(op, [x, w], grad)
    theirs = _grads_of(rmsnorm_reference, [x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()],
                       grad)
    for got, want in zip(ours, theirs):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_an_input_not_in_wrt_gets_no_gradient():
    op = compile(make_rmsnorm(13), wrt=["weight"], verify=False).as_torch_op("tirtrain::rmsnorm_weight_only")
    x, w = _leaves((3, 13), (13,), seed=7)
    op(x.detach(), w).sum().backward()
    expected, = _grads_of(lambda w: rmsnorm_reference(x.detach(), w), [w.detach().clone().requires_grad_()],
                          torch.ones(3, 13))
    torch.testing.assert_close(w.grad, expected, rtol=1e-4, atol=1e-5)


@T.prim_func(s_tir=True)
def max_with_index(X: T.Buffer((6, 37), "float32"), V: T.Buffer((6,), "float32"), I: T.Buffer((6,), "int32")):
    for i, k in T.grid(6, 37):
        with T.sblock("max_dim"):  # topi.argmax's (index, value) block, both outputs: torch.max(dim)
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = -1
                V[vi] = T.min_value("float32")
            v_I: T.let[T.int32] = T.Select(V[vi] > X[vi, vk] or V[vi] == X[vi, vk] and I[vi] < vk, I[vi], vk)
            v_V: T.let[T.float32] = T.Select(V[vi] > X[vi, vk], V[vi], X[vi, vk])
            I[vi] = v_I
            V[vi] = v_V


def test_a_max_with_its_index_trains_like_torch_max_dim():
    """Forward and backward compiled with every check; the op saves the index output for its backward, which
    gives each row's gradient to that one element: torch.max(dim)'s values and indices and gradient, with ties."""
    kernel = compile(max_with_index, wrt=["X"])
    assert len(kernel.backward.program.kernels) == 1
    op = kernel.as_torch_op("tirtrain::max_dim")
    x = torch.randint(0, 4, (6, 37), generator=torch.Generator().manual_seed(0)).float().requires_grad_()
    grad = torch.randn(6, generator=torch.Generator().manual_seed(1))
    values, indices = op(x)
    values.backward(grad)
    leaf = x.detach().clone().requires_grad_()
    theirs, their_indices = torch.max(leaf, dim=1)
    theirs.backward(grad)
    assert torch.equal(indices.long(), their_indices) and torch.equal(values.detach(), theirs.detach())
    assert torch.equal(x.grad, leaf.grad)
