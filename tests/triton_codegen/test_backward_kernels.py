"""The backward of every example with float inputs, compiled like any program (the pipeline, its
checks, the kernel in Triton's interpreter) and compared with torch autograd (fp32, rel. 1e-3)."""

import pytest
import torch
import torch.nn.functional as F
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes import differentiate
from tir_passes.contracts.autodiff import contraction_adjoints, signature
from triton_codegen import check_against_tvm, compile

M, N, K = 5, 7, 3


def gelu(x):
    return x * 0.5 * (1 + torch.erf(x * 0.7071067811865476))


def conv2d_nhwc_reference(x, w):
    return F.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), padding=1).permute(0, 2, 3, 1)


def _examples():
    import attention
    import batch_matmul
    import bias_gelu_residual
    import conv2d_nhwc
    import cumsum
    import elementwise
    import layernorm
    import layernorm_moments
    import matmul
    import matmul_bias_gelu
    import max_pool2d
    import rmsnorm
    import softmax
    import transpose

    ln = lambda x, g, b: torch.nn.functional.layer_norm(x, (N,), g, b, 1e-5)  # noqa: E731
    return {  # name: (program, torch reference, input shapes)
        "softmax": (softmax.make_softmax(M, N), lambda a: torch.softmax(a, -1), [(M, N)]),
        "layernorm": (layernorm.make_layernorm(M, N), ln, [(M, N), (N,), (N,)]),
        "layernorm_moments": (layernorm_moments.make_layernorm_moments(M, N), ln, [(M, N), (N,), (N,)]),
        "rmsnorm": (rmsnorm.make_rmsnorm(N), lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
                    [(M, N), (N,)]),
        "matmul": (matmul.make_matmul(M, N, K, "float32", "float32"), lambda a, b: a @ b, [(M, K), (K, N)]),
        "batch_matmul": (batch_matmul.make_batch_matmul(2, M, N, K, "float32"), lambda a, b: a @ b,
                         [(2, M, K), (2, K, N)]),
        "matmul_bias_gelu": (matmul_bias_gelu.make_matmul_bias_gelu(M, N, K, "float32"),
                             lambda a, b, bias: gelu(a @ b + bias), [(M, K), (K, N), (N,)]),
        "elementwise": (elementwise.make_scale_shift_relu(M, N),
                        lambda x, s, h: torch.maximum(x * s + h[:, None], torch.zeros(())) * x, [(M, N), (N,), (M,)]),
        "bias_gelu_residual": (bias_gelu_residual.make_bias_gelu_residual(M, N, "float32"),
                               lambda x, b, r: gelu(x + b) + r, [(M, N), (N,), (M, N)]),
        "transpose": (transpose.make_transpose(M, N), lambda a: a.T, [(M, N)]),
        # a running sum's gradient is a running sum over the reversed axis (itself a scan)
        "cumsum": (cumsum.make_cumsum(M, 37), lambda a: torch.cumsum(a, -1), [(M, 37)]),
        "attention": (attention.make_attention(1, 2, 5, 4, dtype="float32"),
                      torch.nn.functional.scaled_dot_product_attention, [(1, 2, 5, 4)] * 3),
        # windows: the adjoint of an overlapping read is a gather over the window (read_inversion.py)
        "conv2d_nhwc": (conv2d_nhwc.make_conv2d_nhwc(1, 4, 5, 3, 2, "float32"), conv2d_nhwc_reference,
                        [(1, 4, 5, 3), (3, 3, 3, 2)]),
        # the backward reads the forward's output (the maxima): saved, passed in
        "max_pool2d": (max_pool2d.make_max_pool2d(1, 2, 7, 6), lambda x: F.max_pool2d(x, 3, 2), [(1, 2, 7, 6)]),
    }


EXAMPLES = _examples()
# every per-pass check and the kernel check (and, for matmul's tl.dots, the sm_90/sm_80 compiles); the others
# compile unchecked, the kernel against torch alone (the suite's time)
FULLY_CHECKED = {"softmax": False, "matmul": True}


def torch_reference(reference, inputs: list, grad_seed: int = 1):
    leaves = [x.clone().requires_grad_() for x in inputs]
    out = reference(*leaves)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed))
    out.backward(grad)
    return out.detach().contiguous(), grad, [leaf.grad for leaf in leaves]


def run_backward(kernel, backward, names: list, inputs: list, grad, outputs: dict) -> dict:
    sig = signature(backward)
    by_name = {**dict(zip(names, inputs)), **outputs}   # a saved forward output is passed in too
    grads = {d: torch.empty_like(by_name[x]) for d, x in sig.grads}
    kernel(*[by_name[r] for r in sig.reads], grad.contiguous(), *grads.values())
    return {x: grads[d] for d, x in sig.grads}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_backward_of_each_example_matches_torch_autograd(name):
    func, reference, shapes = EXAMPLES[name]
    names = [p.name for p in func.params[:len(shapes)]]
    backward = differentiate(func, names)
    if name in FULLY_CHECKED:
        kernel = compile_and_check(backward, aot=FULLY_CHECKED[name])
    else:
        kernel = compile(backward, verify=False)
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator) for shape in shapes]
    out, grad, expected = torch_reference(reference, inputs)
    ours = run_backward(kernel, backward, names, inputs, grad, {func.params[-1].name: out})
    for param, value in zip(names, expected):
        scale = value.abs().max().clamp_min(1e-6)
        error = ((ours[param] - value).abs().max() / scale).item()
        assert error <= 1e-3, f"{name}: d{param} differs from torch autograd by {error:.2e} (relative)"


def test_matmul_backward_is_two_tl_dots():
    func, _, _ = EXAMPLES["matmul"]
    kernel = compile(differentiate(func, ["A", "B"]), verify=False)
    assert len(kernel.program.kernels) == 2 and kernel.tile_ir.count("= dot(") == 2


def test_fp16_matmul_backward_is_two_fp16_dots_like_the_forward():
    """fp16 x fp16 -> fp32: the adjoints round d_C to fp16 (the record says so), so both are tl.dots of fp16
    operands (tensor cores, the forward's speed), not float32 "ieee" dots; checked against TVM and torch,
    and compiled for sm_90/sm_80, at odd shapes."""
    import matmul

    func = matmul.make_matmul(37, 21, 19, "float16", "float32")
    backward = differentiate(func, ["A", "B"])
    assert [(c.block, c.gradient, c.operand_dtype) for c in contraction_adjoints(backward)] == [("C", "d_C", "float16")]
    kernel = compile_and_check(backward)
    assert len(kernel.program.kernels) == 2 and kernel.source.count("tl.dot(") == 4   # each with its TMA variant
    assert "input_precision" not in kernel.source and kernel.source.count(".to(tl.float16), ") >= 1
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(shape, generator=generator).half() for shape in ((37, 19), (19, 21)))
    out, grad, expected = torch_reference(lambda x, y: x.double() @ y.double(), [a, b])
    ours = run_backward(kernel, backward, ["A", "B"], [a, b], grad.float(), {})
    for param, value in zip(["A", "B"], expected):
        error = ((ours[param].double() - value).abs().max() / value.abs().max()).item()
        assert error <= 2e-3, f"d{param} differs from float64 autograd by {error:.2e} (relative)"


def test_layernorm_backward_column_reductions_are_partials_of_the_row_kernel():
    """d_gamma and d_beta (sums over 1024 rows) are partials the row kernel writes (RowPartials: 64 programs of
    16 rows) and one kernel summing them: 2 kernels, checked against TVM and torch autograd."""
    import layernorm

    rows, cols = 1024, 24
    func = layernorm.make_layernorm(rows, cols)
    backward = differentiate(func, ["X", "gamma", "beta"])
    # the kernel against TVM's llvm build; the per-pass checks are off: FactorOutOfSums' numerics check flags
    # cancellation in d_X on all-negative data at this shape (before SplitReduction runs)
    kernel = compile(backward, verify=False)
    report = check_against_tvm(kernel, backward)
    assert report.ok, str(report)
    assert len(kernel.program.kernels) == 2
    assert "d_X_total, d_gamma_from_normalize_rows, d_beta_from_normalize_rows" in kernel.source
    assert "TIR blocks: d_gamma_from_normalize, d_beta_from_normalize" in kernel.source
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator) for shape in ((rows, cols), (cols,), (cols,))]
    _, grad, expected = torch_reference(lambda x, g, b: F.layer_norm(x, (cols,), g, b, 1e-5), inputs)
    ours = run_backward(kernel, backward, ["X", "gamma", "beta"], inputs, grad, {})
    for param, value in zip(["X", "gamma", "beta"], expected):
        error = ((ours[param] - value).abs().max() / value.abs().max()).item()
        assert error <= 1e-3, f"d{param} differs from torch autograd by {error:.2e} (relative)"


def test_fp32_matmul_backward_keeps_fp32_operands():
    func, _, _ = EXAMPLES["matmul"]
    assert contraction_adjoints(differentiate(func, ["A", "B"])) == ()


@T.prim_func(s_tir=True)
def embedding(E: T.Buffer((5, 3), "float32"), index: T.Buffer((6,), "int32"), Y: T.Buffer((6, 3), "float32")):
    for i, d in T.grid(6, 3):
        with T.sblock("lookup"):
            vi, vd = T.axis.remap("SS", [i, d])
            Y[vi, vd] = E[index[vi], vd] * T.float32(2)


def test_a_gather_through_data_compiles_to_a_deterministic_gather():
    """dE[p] = Σ_i (index[i] == p) · dY[i]: one kernel, every check, repeated rows summed (index_add)."""
    kernel = compile(differentiate(embedding, ["E"]))
    index = torch.tensor([3, 0, 3, 1, 3, 0], dtype=torch.int32)
    grad, d_table = torch.randn(6, 3, generator=torch.Generator().manual_seed(2)), torch.empty(5, 3)
    kernel(index, grad, d_table)
    torch.testing.assert_close(d_table, torch.zeros(5, 3).index_add_(0, index.long(), grad * 2))


@T.prim_func(s_tir=True)
def row_product(X: T.Buffer((6, 37), "float32"), Y: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 37):
        with T.sblock("prod"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = T.float32(1)
            Y[vi] = Y[vi] * X[vi, vk]


def test_a_product_backward_compiles_and_follows_torch_prod_at_zeros():
    # the zero-count and non-zero-product blocks compile with the rest; rows with one and two zero terms
    backward = differentiate(row_product, ["X"])
    kernel = compile_and_check(backward, aot=True)
    x = 1 + 0.1 * torch.randn(6, 37, generator=torch.Generator().manual_seed(3))
    x[2, 3] = x[3, 4] = x[3, 9] = 0.0
    out, grad, (expected,) = torch_reference(lambda t: torch.prod(t, dim=1), [x])
    ours = run_backward(kernel, backward, ["X"], [x], grad, {"Y": out})["X"]
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
    assert ours[2, 3] != 0 and ours[3].abs().sum() == 0
