"""Kernels as PyTorch ops (`kernel.as_torch_op`, a saved module's `as_torch_op`): outputs allocated
and returned, accumulated parameters mutated in place, shapes from the PrimFunc under fake tensors
(symbolic ones too), the launcher's errors through the op, and `torch.compile(fullgraph=True)`.

On the CPU the op runs its kernels in Triton's interpreter (a custom_op). The GPU form (a
triton_op launching through wrap_triton) is traced here with fake CUDA tensors: the graph holds
the kernels themselves; running it needs a GPU (benchmarks/torch_compile_gpu.py).
"""

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from tvm.script import tirx as T

from tir_passes import LaunchError
from triton_codegen import compile

from attention_scores import make_attention_scores
from matmul_bias_gelu import make_matmul_bias_gelu
from programs import accumulate_without_init
from rmsnorm import make_rmsnorm
from softmax import make_softmax

pytestmark = pytest.mark.interpreter


@T.prim_func(s_tir=True)
def scaled_difference(a: T.handle, b: T.handle, alpha: T.float32):
    """An output dimension derived from an input's (n - 1), and a scalar parameter."""
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n - 1, m), "float32")
    for i, j in T.grid(n - 1, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = (A[vi + 1, vj] - A[vi, vj]) * alpha


@T.prim_func(s_tir=True)
def output_sized_alone(a: T.handle, b: T.handle):
    """m is the size of the output only: an op cannot allocate B."""
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi]


def _attention_reference(q, k, scale):
    return torch.softmax((q.float() @ k.float().T) * scale, dim=1)


def _gelu_reference(a, b, bias):
    return torch.nn.functional.gelu(a.float() @ b.float() + bias).to(a.dtype)


@pytest.fixture(scope="module")
def softmax_op():
    return compile(make_softmax(37, 29), verify=False).as_torch_op("tirtest::softmax")


@pytest.fixture(scope="module")
def gelu_op():
    return compile(make_matmul_bias_gelu(37, 29, 21), verify=False).as_torch_op("tirtest::matmul_bias_gelu")


DEPTH = 1024   # Q·Kᵀ this deep is not recomputed (tir_passes/analyses/recompute.py): two kernels


@pytest.fixture(scope="module")
def attention():
    kernel = compile(make_attention_scores(13, 1031, DEPTH), verify=False)
    assert len(kernel.program.kernels) == 2, "the test wants a two-kernel program"
    return kernel


@pytest.fixture(scope="module")
def accumulate_op():
    return compile(accumulate_without_init, verify=False).as_torch_op("tirtest::accumulate")


def test_softmax_op_returns_its_output(softmax_op):
    assert str(torch.ops.tirtest.softmax.default._schema) == "tirtest::softmax(Tensor A) -> Tensor"
    x = torch.randn(37, 29)
    torch.testing.assert_close(softmax_op(x), torch.softmax(x, dim=1))
    torch.testing.assert_close(torch.ops.tirtest.softmax(x), torch.softmax(x, dim=1))


def test_non_contiguous_input_is_read_through_its_strides(softmax_op):
    x = torch.randn(29, 37).T
    assert not x.is_contiguous()
    torch.testing.assert_close(softmax_op(x), torch.softmax(x, dim=1))


def test_matmul_epilogue_op_matches_torch(gelu_op):
    a, b = torch.randn(37, 21, dtype=torch.float16), torch.randn(21, 29, dtype=torch.float16)
    bias = torch.randn(29)
    torch.testing.assert_close(gelu_op(a, b, bias), _gelu_reference(a, b, bias), atol=2e-3, rtol=2e-3)


def test_two_kernel_op_matches_torch(attention):
    op = attention.as_torch_op("tirtest::attention_scores")
    q, k = torch.randn(13, DEPTH, dtype=torch.float16), torch.randn(1031, DEPTH, dtype=torch.float16)
    torch.testing.assert_close(op(q, k), _attention_reference(q, k, DEPTH**-0.5))


def test_accumulated_parameter_is_a_mutated_argument(accumulate_op):
    assert str(torch.ops.tirtest.accumulate.default._schema) == "tirtest::accumulate(Tensor A, Tensor(a1!) C) -> ()"
    a, c = torch.randn(19, 31), torch.randn(19)
    expected = c + a.sum(dim=1)
    assert accumulate_op(a, c) is None
    torch.testing.assert_close(c, expected)


def test_fake_tensors_get_the_primfunc_shapes(softmax_op, gelu_op):
    with FakeTensorMode():
        out = softmax_op(torch.empty(37, 29))
        epilogue = gelu_op(torch.empty(37, 21, dtype=torch.float16), torch.empty(21, 29, dtype=torch.float16),
                           torch.empty(29))
    assert (tuple(out.shape), out.dtype) == ((37, 29), torch.float32)
    assert (tuple(epilogue.shape), epilogue.dtype) == ((37, 29), torch.float16)


def test_symbolic_output_shapes_are_expressions_of_input_sizes():
    op = compile(scaled_difference, verify=False).as_torch_op("tirtest::scaled_difference")
    assert str(torch.ops.tirtest.scaled_difference.default._schema) == \
        "tirtest::scaled_difference(Tensor A, float alpha) -> Tensor"
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    a = mode.from_tensor(torch.empty(10, 6), symbolic_context=dynamic)
    with mode:
        b = op(a, 0.5)
    assert str(b.shape[0]) == str(a.shape[0] - 1) and str(b.shape[1]) == str(a.shape[1])
    real = torch.randn(11, 3)
    torch.testing.assert_close(op(real, 0.5), (real[1:] - real[:-1]) * 0.5)


@pytest.mark.parametrize("name", ["softmax_op", "accumulate_op"])
def test_opcheck(name, request):
    """Schema, fake implementation (static and dynamic shapes) and the real kernels agree."""
    op = request.getfixturevalue(name)
    args = (torch.randn(37, 29),) if name == "softmax_op" else (torch.randn(19, 31), torch.randn(19))
    torch.library.opcheck(op, args)


def _launch_error(match: str):
    """The generated module's LaunchError (a ValueError), which the op raises as run() does."""
    return pytest.raises(ValueError, match=match)


def test_launcher_errors_come_through_the_op(softmax_op, accumulate_op):
    with _launch_error("parameter A: expected dtype float32, got float64") as raised:
        softmax_op(torch.randn(37, 29, dtype=torch.float64))
    assert raised.type.__name__ == "LaunchError"
    with _launch_error("parameter A: dimension 1 is 30, expected 29"):
        softmax_op(torch.randn(37, 30))
    with _launch_error("parameter C: output tensor has overlapping elements"):
        accumulate_op(torch.randn(19, 31), torch.zeros(1).expand(19))


def test_launcher_errors_come_through_the_fake_implementation(softmax_op):
    with FakeTensorMode(), _launch_error("parameter A: expected dtype float32, got float16"):
        softmax_op(torch.empty(37, 29, dtype=torch.float16))


def test_an_output_no_input_sizes_is_refused_at_registration():
    kernel = compile(output_sized_alone, verify=False)
    with pytest.raises(LaunchError, match="parameter B: dimension 1 is m, but m is the size of no input"):
        kernel.as_torch_op("tirtest::output_sized_alone")


class _Model(torch.nn.Module):
    """A model around the ops: torch work before, between and after them."""

    def __init__(self, softmax, epilogue, attention):
        super().__init__()
        self.softmax, self.epilogue, self.attention = softmax, epilogue, attention

    def forward(self, x, a, b, bias, q, k):
        probabilities = self.softmax(x * 2.0)
        activations = self.epilogue(a, b, bias + 1.0)
        scores = self.attention(q, k)
        return probabilities.sum() + activations.float().mean(), scores * 3.0


def _model_inputs():
    return (torch.randn(37, 29), torch.randn(37, 21, dtype=torch.float16), torch.randn(21, 29, dtype=torch.float16),
            torch.randn(29), torch.randn(13, DEPTH, dtype=torch.float16), torch.randn(1031, DEPTH, dtype=torch.float16))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_model_has_no_graph_break_and_matches_eager(backend, softmax_op, gelu_op, attention):
    model = _Model(softmax_op, gelu_op, attention.as_torch_op("tirtest::attention_scores"))
    inputs = _model_inputs()
    explained = torch._dynamo.explain(model)(*inputs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    expected = model(*inputs)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    for got, want in zip(compiled(*inputs), expected):
        torch.testing.assert_close(got, want)


def test_compiled_mutation_matches_eager(accumulate_op):
    def accumulate_twice(a, c):
        accumulate_op(a, c)
        accumulate_op(a * 2.0, c)
        return c + 1.0

    a, c = torch.randn(19, 31), torch.randn(19)
    expected_c = c.clone()
    expected = accumulate_twice(a, expected_c)
    got = torch.compile(accumulate_twice, fullgraph=True, backend="aot_eager")(a, c)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(c, expected_c)


def test_compile_time_errors_name_the_parameter(softmax_op):
    compiled = torch.compile(lambda x: softmax_op(x), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="parameter A: expected dtype float32, got float16"):
        compiled(torch.randn(37, 29, dtype=torch.float16))


def test_symbolic_rows_compile_once_for_every_row_count():
    op = compile(make_rmsnorm(45), verify=False).as_torch_op("tirtest::rmsnorm")
    weight = torch.randn(45)

    def reference(x):
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * weight

    compiled = torch.compile(lambda x: op(x, weight), fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (3, 37):
        x = torch.randn(rows, 45)
        torch.testing.assert_close(compiled(x), reference(x))


def test_gpu_form_traces_into_each_kernel(attention, caplog):
    """The compiled-Triton module registers a triton_op: traced (fake CUDA tensors, no GPU needed)
    its graph launches the two kernels through triton_kernel_wrapper nodes, not one opaque call."""
    from torch._functorch.aot_autograd import aot_function

    op = attention.as_torch_op("tirtest::attention_scores_gpu", interpret=False)
    graphs = []

    def capture(graph, _inputs):
        graphs.append(graph)
        raise _Traced

    caplog.set_level(logging.ERROR)  # without a GPU Triton cannot tell which tensors a kernel writes, and says so
    with FakeTensorMode():
        q = torch.empty(13, DEPTH, dtype=torch.float16, device="cuda")
        k = torch.empty(1031, DEPTH, dtype=torch.float16, device="cuda")
        assert tuple(op(q, k).shape) == (13, 1031)
        with pytest.raises(_Traced):
            aot_function(lambda q, k: op(q, k) * 2.0, fw_compiler=capture)(q, k)
    launches = [node for node in graphs[0].graph.nodes if "triton_kernel_wrapper" in str(node.target)]
    assert len(launches) == 2
    assert not any("tirtest" in str(node.target) for node in graphs[0].graph.nodes)


class _Traced(Exception):
    pass


def test_saved_module_registers_its_op_without_tvm(tmp_path):
    path = compile(make_softmax(37, 29), verify=False).save(str(tmp_path))
    script = (
        "import importlib.util, sys, torch\n"
        "sys.modules['tvm'] = None  # importing TVM now fails\n"
        f"spec = importlib.util.spec_from_file_location('saved_softmax', {path!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "op = module.as_torch_op('tirsaved::softmax')\n"
        "x = torch.randn(37, 29)\n"
        "torch.testing.assert_close(op(x), torch.softmax(x, dim=1))\n"
        "print('ok', 'tvm' in sys.modules and sys.modules['tvm'] is not None)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "False"]


def test_the_example_runs(capsys):
    import torch_op

    torch_op.main()
    assert "1 graph, 0 graph breaks; compiled matches eager, eager matches torch" in capsys.readouterr().out


def test_the_gpu_demonstration_runs_its_cpu_part(tmp_path):
    """benchmarks/torch_compile_gpu.py (torch + triton only) on the small modules of its generate
    step: every case registers, matches torch, compiles with fullgraph=True and matches eager."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks"))
    import torch_compile_generate
    import torch_compile_gpu

    torch_compile_generate.main(str(tmp_path))
    folder = tmp_path / "cpu"
    cases = json.loads((folder / "cases.json").read_text())
    # softmax(Q·Kᵀ) is one kernel since LoopFusion recomputes the scores; the two-kernel op is the
    # `attention` fixture's (test_gpu_form_traces_into_each_kernel)
    assert [len(case["kernels"]) for case in cases.values()] == [1, 1, 1]
    rows = [torch_compile_gpu.run_case(str(folder), name, case, "aot_eager") for name, case in cases.items()]
    assert [(row["status"], row["graphs"], row["breaks"]) for row in rows] == [("ok", 1, 0)] * 3, rows
