"""tir_passes.differentiate: the backward PrimFunc, checked with TVM's llvm build against torch
autograd in float64 (each adjoint rule, the tie conventions), its records, and its refusals."""

import pytest
import torch
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.script import tirx as T

from tir_passes import NotDifferentiableError, differentiate
from tir_passes.contracts.autodiff import contraction_adjoints, forward_values, signature

N = 7


def llvm_gradients(func, wrt, inputs: dict, output_grads: dict) -> dict:
    """The gradients `differentiate(func, wrt)` computes, run with TVM's llvm build."""
    backward = differentiate(func, wrt)
    sig = signature(backward)
    values = {**inputs, **{d: output_grads[y] for d, y in sig.output_grads}}
    grads = {d: torch.zeros_like(inputs[x]) for d, x in sig.grads}
    values.update(grads)
    names = [*sig.reads, *(d for d, _ in sig.output_grads), *(d for d, _ in sig.grads)]
    tensors = [tvm.runtime.tensor(values[n].detach().numpy(), tvm.cpu(0)) for n in names]
    tvm.compile(tvm.IRModule({"main": backward}), target="llvm")(*tensors)
    by_name = dict(zip(names, tensors))
    return {x: torch.from_numpy(by_name[d].numpy()) for d, x in sig.grads}


def elementwise(fn, arity: int, dtype: str = "float64"):
    xs = [te.placeholder((N,), dtype, name=f"X{k}") for k in range(arity)]
    y = te.compute((N,), lambda i: fn(*[x[i] for x in xs]), name="Y")
    return te.create_prim_func([*xs, y]).with_attr("global_symbol", "f")


def torch_gradients(fn, inputs: list, grad):
    leaves = [x.clone().requires_grad_() for x in inputs]
    fn(*leaves).backward(grad)
    return [leaf.grad for leaf in leaves]


def check_elementwise(tir_fn, torch_fn, inputs: list):
    func = elementwise(tir_fn, len(inputs))
    grad = torch.linspace(-1.5, 2.0, N, dtype=torch.float64)
    ours = llvm_gradients(func, [f"X{k}" for k in range(len(inputs))],
                          {f"X{k}": x for k, x in enumerate(inputs)}, {"Y": grad})
    for k, expected in enumerate(torch_gradients(torch_fn, inputs, grad)):
        torch.testing.assert_close(ours[f"X{k}"], expected, rtol=1e-10, atol=1e-12)


POSITIVE = torch.linspace(0.3, 2.9, N, dtype=torch.float64)
SIGNED = torch.linspace(-2.1, 1.7, N, dtype=torch.float64)
c = lambda v: tirx.const(v, "float64")  # noqa: E731

UNARY = {
    "exp": (tirx.exp, torch.exp, SIGNED), "log": (tirx.log, torch.log, POSITIVE),
    "tanh": (tirx.tanh, torch.tanh, SIGNED), "erf": (tirx.erf, torch.erf, SIGNED),
    "rsqrt": (tirx.rsqrt, torch.rsqrt, POSITIVE), "sqrt": (tirx.sqrt, torch.sqrt, POSITIVE),
    "sigmoid": (tirx.sigmoid, torch.sigmoid, SIGNED), "sin": (tirx.sin, torch.sin, SIGNED),
    "cos": (tirx.cos, torch.cos, SIGNED), "log1p": (tirx.log1p, torch.log1p, POSITIVE),
    "exp2": (tirx.exp2, torch.exp2, SIGNED), "log2": (tirx.log2, torch.log2, POSITIVE),
    "pow_const": (lambda x: tirx.pow(x, c(3.0)), lambda x: x ** 3.0, SIGNED),
    "floor": (lambda x: tirx.floor(x) * x, lambda x: torch.floor(x) * x, SIGNED),
    "fabs_at_zero": (tirx.abs, torch.abs, torch.tensor([-1.0, 0.0, 2.0, 0.0, -3.0, 1.0, 0.5], dtype=torch.float64)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_adjoints_match_torch(name):
    tir_fn, torch_fn, x = UNARY[name]
    check_elementwise(tir_fn, torch_fn, [x])


def test_arithmetic_and_pow_of_two_inputs():
    check_elementwise(lambda a, b: (a * b - a / b + b) * tirx.pow(b, a), lambda a, b: (a * b - a / b + b) * b ** a,
                      [SIGNED, POSITIVE])


def test_select_and_if_then_else_take_the_branch():
    check_elementwise(lambda a, b: tirx.Select(a > b, a * a, tirx.if_then_else(a < c(0.0), b * a, tirx.exp(b))),
                      lambda a, b: torch.where(a > b, a * a, torch.where(a < 0, b * a, torch.exp(b))),
                      [SIGNED, SIGNED.flip(0)])


def test_elementwise_max_min_share_ties_evenly_as_torch_maximum():
    a = torch.tensor([1.0, 2.0, 3.0, -1.0, 0.0, 5.0, 2.5], dtype=torch.float64)
    b = torch.tensor([1.0, 3.0, 3.0, -2.0, 0.0, 4.0, 2.5], dtype=torch.float64)   # ties at 0, 2, 4, 6
    check_elementwise(lambda x, y: tirx.Max(x, y) * c(2.0) + tirx.Min(x, y),
                      lambda x, y: torch.maximum(x, y) * 2.0 + torch.minimum(x, y), [a, b])


def test_float_casts_carry_and_the_gradient_has_the_input_dtype():
    func = elementwise(lambda x: tirx.Cast("float64", tirx.Cast("float32", x) * tirx.const(3.0, "float32")), 1,
                       dtype="float32")
    backward = differentiate(func, ["X0"])
    assert [p.dtype for p in backward.params] == ["float64", "float32"]  # d_Y as Y, d_X0 as X0
    x = SIGNED.float()
    grads = llvm_gradients(func, ["X0"], {"X0": x}, {"Y": torch.ones(N, dtype=torch.float64)})
    torch.testing.assert_close(grads["X0"], torch.full((N,), 3.0))


@T.prim_func(s_tir=True)
def row_max_min(X: T.Buffer((3, 4), "float64"), Y: T.Buffer((3,), "float64")):
    top = T.sblock_alloc_buffer((3,), "float64")
    low = T.sblock_alloc_buffer((3,), "float64")
    for i, k in T.grid(3, 4):
        with T.sblock("top"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                top[vi] = T.min_value("float64")
            top[vi] = T.max(top[vi], X[vi, vk] * T.float64(2))
    for i, k in T.grid(3, 4):
        with T.sblock("low"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                low[vi] = T.max_value("float64")
            low[vi] = T.min(X[vi, vk], low[vi])
    for i in range(3):
        with T.sblock("out"):
            vi = T.axis.spatial(3, i)
            Y[vi] = top[vi] * T.float64(3) + low[vi]


def test_max_and_min_reductions_share_ties_evenly_as_torch_amax():
    x = torch.tensor([[1.0, 4.0, 4.0, 2.0], [0.0, 0.0, 0.0, 0.0], [3.0, -1.0, 2.0, -1.0]], dtype=torch.float64)
    grad = torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64)
    expected, = torch_gradients(lambda t: torch.amax(t * 2, dim=1) * 3 + torch.amin(t, dim=1), [x], grad)
    ours = llvm_gradients(row_max_min, ["X"], {"X": x}, {"Y": grad})
    torch.testing.assert_close(ours["X"], expected, rtol=1e-12, atol=1e-12)


@T.prim_func(s_tir=True)
def linear(A: T.Buffer((5, 3), "float64"), W: T.Buffer((4, 3), "float64"), bias: T.Buffer((4,), "float64"),
           Y: T.Buffer((5, 4), "float64")):
    for i, j, k in T.grid(5, 4, 3):
        with T.sblock("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = bias[vj]
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * W[vj, vk]


def test_a_contraction_with_an_init_differentiates_both():
    a, w, b = (torch.randn(shape, dtype=torch.float64) for shape in ((5, 3), (4, 3), (4,)))
    grad = torch.randn(5, 4, dtype=torch.float64)
    expected = torch_gradients(lambda a, w, b: a @ w.T + b, [a, w, b], grad)
    ours = llvm_gradients(linear, ["A", "W", "bias"], {"A": a, "W": w, "bias": b}, {"Y": grad})
    for name, value in zip(["A", "W", "bias"], expected):
        torch.testing.assert_close(ours[name], value, rtol=1e-10, atol=1e-12)


def test_adjoints_of_a_contraction_are_contractions():
    """dA = dY·W and dW = dYᵀ·A: each one block `X += a * b` of two loads, the form Tiling makes a tl.dot."""
    backward = differentiate(linear, ["A", "W"])
    blocks = {}
    tvm_ffi.structural_walk(backward.body, (s_tir.SBlock, lambda b: blocks.update({b.name_hint: b})))
    for name in ("d_A_from_Y", "d_W_from_Y"):
        update = blocks[name].body.value
        assert isinstance(update, tirx.Add) and isinstance(update.b, tirx.Mul), update
        assert all(isinstance(f, tvm.ir.TensorLoad) for f in (update.b.a, update.b.b)), update


def test_records_say_what_is_passed_in_saved_and_recomputed():
    from softmax import make_softmax

    backward = differentiate(make_softmax(3, 5), ["A"])
    values = {v.buffer: v for v in forward_values(backward)}
    assert values["A"].decision == "input"
    assert {name: values[name].decision for name in ("row_max", "exp_buf", "row_sum")} == dict.fromkeys(
        ("row_max", "exp_buf", "row_sum"), "recomputed")
    assert values["row_max"].blocks == ("row_max",)
    sig = signature(backward)
    assert (sig.forward, sig.reads, sig.output_grads, sig.grads) == ("softmax", ("A",), (("d_Out", "Out"),),
                                                                      (("d_A", "A"),))
    s_tir.analysis.verify_well_formed(backward)
    tvm.ir.assert_structural_equal(tvm.script.from_source(backward.script()), backward)  # prints and parses back


@T.prim_func(s_tir=True)
def square_then_read_output(X: T.Buffer((4,), "float64"), Y: T.Buffer((4,), "float64"), Z: T.Buffer((4,), "float64")):
    for i in range(4):
        with T.sblock("Y"):
            vi = T.axis.spatial(4, i)
            Y[vi] = X[vi] * X[vi]
    for i in range(4):
        with T.sblock("Z"):
            vi = T.axis.spatial(4, i)
            Z[vi] = T.exp(Y[vi])


def test_an_output_read_by_a_later_block_is_saved_and_its_gradients_add():
    x = torch.tensor([0.1, -0.4, 0.7, 0.3], dtype=torch.float64)
    dy, dz = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    leaf = x.clone().requires_grad_()
    y = leaf * leaf
    torch.autograd.backward([y, torch.exp(y)], [dy, dz])
    ours = llvm_gradients(square_then_read_output, ["X"], {"X": x, "Y": x * x}, {"Y": dy, "Z": dz})
    torch.testing.assert_close(ours["X"], leaf.grad)
    values = {v.buffer: v.decision for v in forward_values(differentiate(square_then_read_output, ["X"]))}
    assert values == {"X": "input", "Y": "saved"}


def test_a_meaning_preserving_rewrite_gives_the_same_gradients():
    """The same matmul in TE (other names, the product's operands swapped) and in TVMScript."""
    from matmul import make_matmul

    a_te = te.placeholder((5, 3), "float64", name="P")
    b_te = te.placeholder((3, 4), "float64", name="Q")
    k = te.reduce_axis((0, 3), name="r")
    out = te.compute((5, 4), lambda x, y: te.sum(b_te[k, y] * a_te[x, k], axis=k), name="R")
    rewritten = te.create_prim_func([a_te, b_te, out]).with_attr("global_symbol", "mm")
    a, b, grad = (torch.randn(s, dtype=torch.float64) for s in ((5, 3), (3, 4), (5, 4)))
    ours = llvm_gradients(make_matmul(5, 4, 3, "float64", "float64"), ["A", "B"], {"A": a, "B": b}, {"C": grad})
    theirs = llvm_gradients(rewritten, ["P", "Q"], {"P": a, "Q": b}, {"R": grad})
    torch.testing.assert_close(ours["A"], theirs["P"], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours["B"], theirs["Q"], rtol=1e-12, atol=1e-12)


def test_the_narrow_operand_decision_survives_a_rewrite():
    """fp16 operands into fp32, written in TE with the product's operands swapped: the same record; an
    fp16 x fp32 product and a sum of squares (not narrow contractions) get none."""
    a_te = te.placeholder((5, 3), "float16", name="P")
    b_te = te.placeholder((3, 4), "float16", name="Q")
    k = te.reduce_axis((0, 3), name="r")
    out = te.compute((5, 4), lambda x, y: te.sum(b_te[k, y].astype("float32") * a_te[x, k].astype("float32"),
                                                 axis=k), name="R")
    rewritten = te.create_prim_func([a_te, b_te, out]).with_attr("global_symbol", "mm")
    assert [(c.block, c.gradient, c.operand_dtype) for c in contraction_adjoints(differentiate(rewritten, ["P"]))] \
        == [("R", "d_R", "float16")]
    wide_b = te.placeholder((3, 4), "float32", name="Q")
    mixed = te.compute((5, 4), lambda x, y: te.sum(a_te[x, k].astype("float32") * wide_b[k, y], axis=k), name="R")
    assert contraction_adjoints(differentiate(te.create_prim_func([a_te, wide_b, mixed]), ["P"])) == ()
    squares = te.compute((5,), lambda x: te.sum(a_te[x, k].astype("float32") * a_te[x, k].astype("float32"), axis=k))
    assert contraction_adjoints(differentiate(te.create_prim_func([a_te, squares]), ["P"])) == ()  # no dot's shape


# --- refusals ---------------------------------------------------------------------------------
@T.prim_func(s_tir=True)
def two_writers(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("first"):
            vi = T.axis.spatial(4, i)
            Y[vi] = X[vi]
    for i in range(4):
        with T.sblock("second"):
            vi = T.axis.spatial(4, i)
            Y[vi] = X[vi] * T.float32(2)


@T.prim_func(s_tir=True)
def integer_output(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.sblock("round"):
            vi = T.axis.spatial(4, i)
            Y[vi] = T.Cast("int32", X[vi])


@T.prim_func(s_tir=True)
def copysign_of(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("sign"):
            vi = T.axis.spatial(4, i)
            Y[vi] = T.copysign(X[vi], T.float32(-1))




@T.prim_func(s_tir=True)
def product(X: T.Buffer((4, 3), "float64"), Y: T.Buffer((4,), "float64")):
    for i, k in T.grid(4, 3):
        with T.sblock("prod"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = T.float64(2)
            Y[vi] = Y[vi] * T.tanh(X[vi, vk])


@T.prim_func(s_tir=True)
def product_from(X: T.Buffer((4, 3), "float64"), B: T.Buffer((4,), "float64"), Y: T.Buffer((4,), "float64")):
    for i, k in T.grid(4, 3):
        with T.sblock("prod"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = B[vi]
            Y[vi] = Y[vi] * X[vi, vk]


def test_a_product_whose_init_reads_a_buffer_differentiates():
    # the init's variables are the nest's own (build.nest substitutes them, as it does the value's)
    x = torch.tensor([[0.5, -1.25, 2.0], [0.75, 0.0, -1.5], [0.0, 1.0, 0.0], [-0.3, 0.9, 1.7]], dtype=torch.float64)
    b = torch.tensor([1.5, -2.0, 0.5, 3.0], dtype=torch.float64)
    grad = torch.tensor([1.0, 0.5, -1.0, 2.0], dtype=torch.float64)
    ours = llvm_gradients(product_from, ["X"], {"X": x, "B": b}, {"Y": grad})
    (expected, _) = torch_gradients(lambda a, c: c * torch.prod(a, dim=1), [x, b], grad)
    torch.testing.assert_close(ours["X"], expected, rtol=1e-12, atol=1e-12)


def test_a_product_reduction_follows_torch_prod_at_zeros():
    # rows without a zero, with one zero, with two (torch.prod's gradient: the product of the others)
    x = torch.tensor([[0.5, -1.25, 2.0], [0.75, 0.0, -1.5], [0.0, 1.0, 0.0], [-0.3, 0.9, 1.7]], dtype=torch.float64)
    grad = torch.tensor([1.5, -2.0, 0.5, 1.0], dtype=torch.float64)
    ours = llvm_gradients(product, ["X"], {"X": x}, {"Y": grad})
    (expected,) = torch_gradients(lambda a: 2 * torch.prod(torch.tanh(a), dim=1), [x], grad)
    torch.testing.assert_close(ours["X"], expected, rtol=1e-12, atol=1e-12)
    assert ours["X"][1, 1] != 0 and ours["X"][2].abs().sum() == 0


@T.prim_func(s_tir=True)
def predicated(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("half"):
            vi = T.axis.spatial(4, i)
            T.where(i < 2)
            Y[vi] = X[vi]


REFUSED = {  # (program, wrt, where, why)
    "overlapping writes": (two_writers, "X", "block second (", "writes Y, which block first ("),
    "integer output": (integer_output, "X", "block round (", "writes Y (int32)"),
    "intrinsic": (copysign_of, "X", "block sign (", "the intrinsic tirx.copysign has no adjoint rule"),
    "predicate": (predicated, "X", "block half (", "the block has a predicate"),
    "integer wrt": (integer_output, "Y", "PrimFunc integer_output", "parameter Y is of dtype int32"),
    "written wrt": (square_then_read_output, "Y", "PrimFunc square_then_read_output",
                    "parameter Y is written by block Y ("),
    "unknown wrt": (square_then_read_output, "W", "PrimFunc square_then_read_output",
                    "'W', which is not a parameter (parameters: X, Y, Z)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_block_and_the_reason(case):
    func, wrt, where, why = REFUSED[case]
    with pytest.raises(NotDifferentiableError) as info:
        differentiate(func, [wrt])
    message = str(info.value)
    assert message.startswith(where) and why in message, message
    if where.startswith("block"):
        assert "test_differentiate.py:" in message  # the block's TVMScript line


@T.prim_func(s_tir=True)
def running_sum_of_squares(X: T.Buffer((3, 6), "float64"), Y: T.Buffer((3, 6), "float64")):
    for i, j in T.grid(3, 6):
        with T.sblock("running"):  # the (b) form, the first element its own expression
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] * X[vi, vj] + T.if_then_else(vj >= 1, Y[vi, vj - 1], T.float64(0.5))


@T.prim_func(s_tir=True)
def running_max(X: T.Buffer((3, 6), "float64"), Y: T.Buffer((3, 6), "float64")):
    for i, j in T.grid(3, 6):
        with T.sblock("running"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], T.max(Y[vi, vj - 1], X[vi, vj]))


def test_a_running_sum_differentiates_to_a_suffix_sum_like_torch_cumsum():
    from cumsum import make_cumsum

    x = torch.linspace(-2.0, 1.5, 18, dtype=torch.float64).reshape(3, 6)
    grad = torch.linspace(0.5, -1.0, 18, dtype=torch.float64).reshape(3, 6)
    for func, reference in ((make_cumsum(3, 6, "float64"), lambda a: torch.cumsum(a, 1)),
                            (running_sum_of_squares, lambda a: torch.cumsum(a * a, 1) + 0.5)):
        ours = llvm_gradients(func, ["X"], {"X": x}, {"Y": grad})
        (expected,) = torch_gradients(reference, [x], grad)
        torch.testing.assert_close(ours["X"], expected, rtol=1e-12, atol=1e-12)


def test_a_running_max_is_refused():
    with pytest.raises(NotDifferentiableError, match=r"block running \(test_differentiate.py:\d+\): a max scan; "
                                                     r"of the scans only running sums"):
        differentiate(running_max, ["X"])


@T.prim_func(s_tir=True)
def windows(X: T.Buffer((3, 9), "float64"), Y: T.Buffer((3, 3), "float64"), Z: T.Buffer((3, 4), "float64")):
    for i, o, r in T.grid(3, 3, 3):
        with T.sblock("strided"):  # a pool's window: 3 wide, stride 2, reaching X[:, 0..6]
            vi, vo, vr = T.axis.remap("SSR", [i, o, r])
            with T.init():
                Y[vi, vo] = T.float64(0)
            Y[vi, vo] = Y[vi, vo] + X[vi, vo * 2 + vr] * X[vi, vo * 2 + vr]
    for i, j in T.grid(3, 4):
        with T.sblock("shifted"):  # X[:, 8] is read by no iteration: its gradient is 0, not garbage
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = X[vi, 7 - vj] * X[0, 3] + X[vi, vj + 1]


@T.prim_func(s_tir=True)
def embedding(E: T.Buffer((5, 3), "float64"), index: T.Buffer((6,), "int32"), Y: T.Buffer((6, 3), "float64")):
    for i, d in T.grid(6, 3):
        with T.sblock("lookup"):
            vi, vd = T.axis.remap("SS", [i, d])
            Y[vi, vd] = E[index[vi], vd] * E[index[vi], vd]


def test_a_gather_through_data_sums_repeated_indices():
    """dE[p, d] = Σ_i (index[i] == p) · dY[i, d]: rows read twice get both gradients, rows never read 0."""
    table = torch.randn(5, 3, dtype=torch.float64)
    index = torch.tensor([3, 0, 3, 1, 3, 0], dtype=torch.int32)
    grad = torch.randn(6, 3, dtype=torch.float64)
    expected, = torch_gradients(lambda e: e[index.long()] ** 2, [table], grad)
    ours = llvm_gradients(embedding, ["E"], {"E": table, "index": index}, {"Y": grad})
    torch.testing.assert_close(ours["E"], expected, rtol=1e-12, atol=1e-12)


def test_windows_shifts_and_constant_indices_are_inverted_as_gathers():
    x = torch.randn(3, 9, dtype=torch.float64)
    dy, dz = torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    leaf = x.clone().requires_grad_()
    windows_of = leaf.unfold(1, 3, 2)[:, :3]
    z = leaf[:, [7, 6, 5, 4]] * leaf[0, 3] + leaf[:, 1:5]
    torch.autograd.backward([(windows_of ** 2).sum(-1), z], [dy, dz])
    ours = llvm_gradients(windows, ["X"], {"X": x}, {"Y": dy, "Z": dz})
    torch.testing.assert_close(ours["X"], leaf.grad, rtol=1e-12, atol=1e-12)


def test_no_float_output_depending_on_wrt_is_refused():
    with pytest.raises(NotDifferentiableError, match="no float output depends on X0"):
        differentiate(elementwise(lambda x, w: w * c(2.0), 2), ["X0"])


def llvm_forward(func, inputs: dict) -> dict:
    """Every buffer parameter after TVM's llvm build of the forward `func` ran on `inputs` (outputs zeroed)."""
    buffers = list(func.params)
    values = [inputs.get(b.name, torch.zeros([int(d) for d in b.shape], dtype=getattr(torch, str(b.dtype))))
              for b in buffers]
    tensors = [tvm.runtime.tensor(v.numpy(), tvm.cpu(0)) for v in values]
    tvm.compile(tvm.IRModule({"main": func}), target="llvm")(*tensors)
    return {b.name: torch.from_numpy(t.numpy()) for b, t in zip(buffers, tensors)}


@T.prim_func(s_tir=True)
def max_with_index(X: T.Buffer((4, 5), "float64"), V: T.Buffer((4,), "float64"), I: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 5):
        with T.sblock("max_dim"):  # topi.argmax's block: (index, value), ties to the first index
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = -1
                V[vi] = T.min_value("float64")
            v_I: T.let[T.int32] = T.Select(V[vi] > X[vi, vk] or V[vi] == X[vi, vk] and I[vi] < vk, I[vi], vk)
            v_V: T.let[T.float64] = T.Select(V[vi] > X[vi, vk], V[vi], X[vi, vk])
            I[vi] = v_I
            V[vi] = v_V


@T.prim_func(s_tir=True)
def min_with_last_index(X: T.Buffer((4, 5), "float64"), V: T.Buffer((4,), "float64"), I: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 5):
        with T.sblock("min_dim"):  # no lets, T.min for the value, ties to the last index
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = 0
                V[vi] = T.max_value("float64")
            I[vi] = T.Select(V[vi] < X[vi, vk], I[vi], vk)
            V[vi] = T.min(V[vi], X[vi, vk])


@T.prim_func(s_tir=True)
def index_not_of_the_value(X: T.Buffer((4, 5), "float64"), V: T.Buffer((4,), "float64"), I: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 5):
        with T.sblock("mixed"):  # a max's value with a min's index: which element V came from is unknown
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = 0
                V[vi] = T.min_value("float64")
            I[vi] = T.Select(V[vi] < X[vi, vk], I[vi], vk)
            V[vi] = T.max(V[vi], X[vi, vk])


TIES = torch.tensor([[1.0, 4.0, 4.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [3.0, -1.0, 2.0, 3.0, 3.0],
                     [-5.0, -2.0, -7.0, -2.0, -9.0]], dtype=torch.float64)


def test_a_max_with_its_index_gives_the_gradient_to_the_index_as_torch_max_dim():
    """A tuple (value, index) reduction (topi's arg-max block, ties to the first index): the value's gradient
    goes to the element at the program's index, torch.max(dim)'s rule (one element, not shared among ties)."""
    grad = torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64)
    forward = llvm_forward(max_with_index, {"X": TIES})
    leaf = TIES.clone().requires_grad_()
    values, indices = torch.max(leaf, dim=1)
    values.backward(grad)
    assert torch.equal(forward["I"].long(), indices) and torch.equal(forward["V"], values.detach())
    ours = llvm_gradients(max_with_index, ["X"], {"X": TIES, "I": forward["I"]}, {"V": grad})
    torch.testing.assert_close(ours["X"], leaf.grad, rtol=0, atol=0)
    backward = differentiate(max_with_index, ["X"])
    assert signature(backward).reads == ("I",)   # the index is saved and passed in, X is not read
    assert [(v.buffer, v.decision) for v in forward_values(backward)] == [("I", "saved")]


def test_the_gradient_follows_the_programs_own_tie_rule():
    """A min whose index takes the last tie: the gradient goes to that element (torch.amin would share it)."""
    grad = torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64)
    forward = llvm_forward(min_with_last_index, {"X": TIES})
    assert forward["I"].tolist() == [4, 4, 1, 4]
    ours = llvm_gradients(min_with_last_index, ["X"], {"X": TIES, **forward}, {"V": grad})
    expected = torch.zeros_like(TIES).scatter_(1, forward["I"].long()[:, None], grad[:, None])
    torch.testing.assert_close(ours["X"], expected, rtol=0, atol=0)


@T.prim_func(s_tir=True)
def max_from_zero(X: T.Buffer((2, 4), "float64"), V: T.Buffer((2,), "float64"), I: T.Buffer((2,), "int32")):
    for i, k in T.grid(2, 4):
        with T.sblock("relu_max"):  # the value starts at 0 and the index at 0, a valid index
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = 0
                V[vi] = T.float64(0)
            I[vi] = T.Select(V[vi] >= X[vi, vk], I[vi], vk)
            V[vi] = T.Select(V[vi] >= X[vi, vk], V[vi], X[vi, vk])


def test_an_index_never_set_gives_no_gradient():
    """A row whose elements never beat the init keeps the init value and index 0: no element gets a gradient
    (the index's init names an element, so the backward also checks that element against the value)."""
    x = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-1.0, 2.0, 2.0, 0.5]], dtype=torch.float64)
    grad = torch.tensor([1.5, 2.0], dtype=torch.float64)
    forward = llvm_forward(max_from_zero, {"X": x})
    assert forward["I"].tolist() == [0, 1]
    ours = llvm_gradients(max_from_zero, ["X"], {"X": x, **forward}, {"V": grad})
    expected = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(ours["X"], expected, rtol=0, atol=0)
    assert set(signature(differentiate(max_from_zero, ["X"])).reads) == {"X", "V", "I"}


def test_a_tuple_reduction_whose_index_is_not_its_values_is_refused():
    with pytest.raises(NotDifferentiableError) as info:
        differentiate(index_not_of_the_value, ["X"])
    message = str(info.value)
    assert message.startswith("block mixed (") and "tuple reduction whose index I" in message, message
