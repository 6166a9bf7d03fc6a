"""A sum over the axis a mean averages, of something affine in (x − mean), adds nothing to the mean's
gradient (centered_sums.py: the ZeroGradient record, no contribution block); the programs where that
is not so (a weighted sum, a mean over fewer columns, another row's values) keep it; every gradient
against torch autograd in float64 through TVM's llvm build."""

import torch
from tvm import te, tirx
from tvm.script import tirx as T

from layernorm import make_layernorm
from layernorm_moments import make_layernorm_moments
from test_differentiate import llvm_gradients
from test_shift_invariance import _blocks
from tir_passes import differentiate
from tir_passes.contracts.autodiff import zero_gradients

R, C = 3, 5
EPS = 1e-5


def _normalized(mean_block, var_scale, weighted: bool = False, mean_columns: int = C, mean_scale=None,
                power: int = 2, narrowed_mean: bool = False):
    """(A - m) · rsqrt(var + eps), m the mean of A's first `mean_columns` columns, written by
    `mean_block` ("sum": one sum block with the 1/C inside; "divide": a sum, then a block dividing it by C),
    var = Σ_k (A - m)^power · var_scale (times w[k] when weighted). `mean_scale` replaces the 1/C;
    `narrowed_mean`: the mean of A rounded to float16."""
    scale = T.float64(mean_scale if mean_scale is not None else 1.0 / mean_columns)

    @T.prim_func(s_tir=True)
    def normalized(A: T.Buffer((R, C), "float64"), w: T.Buffer((C,), "float64"), Out: T.Buffer((R, C), "float64")):
        total = T.sblock_alloc_buffer((R,), "float64")
        m = T.sblock_alloc_buffer((R,), "float64")
        var = T.sblock_alloc_buffer((R,), "float64")
        for i, k in T.grid(R, mean_columns):
            with T.sblock("total"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    total[vi] = T.float64(0)
                total[vi] = total[vi] + (T.Cast("float64", T.Cast("float16", A[vi, vk])) if narrowed_mean
                                         else A[vi, vk]) * (scale if mean_block == "sum" else T.float64(1))
        for i in range(R):
            with T.sblock("m"):
                vi = T.axis.spatial(R, i)
                m[vi] = total[vi] / (T.float64(1) if mean_block == "sum" else T.float64(mean_columns))
        for i, k in T.grid(R, C):
            with T.sblock("var"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    var[vi] = T.float64(0)
                var[vi] = var[vi] + (A[vi, vk] - m[vi]) * (A[vi, vk] - m[vi]) * T.float64(var_scale) \
                    * ((A[vi, vk] - m[vi]) if power == 3 else T.float64(1)) * (w[vk] if weighted else T.float64(1))
        for i, j in T.grid(R, C):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Out[vi, vj] = (A[vi, vj] - m[vi]) * T.rsqrt(var[vi] + T.float64(EPS))

    return normalized


def _torch(a, w, weighted: bool = False, mean_columns: int = C, var_scale: float = 1.0 / C, mean_scale=None,
           power: int = 2, narrowed_mean: bool = False):
    values = a.half().double() if narrowed_mean else a
    m = values[:, :mean_columns].sum(1, keepdim=True) * (mean_scale if mean_scale is not None else 1.0 / mean_columns)
    var = ((a - m) ** power * (w if weighted else 1.0)).sum(1, keepdim=True) * var_scale
    return (a - m) * torch.rsqrt(var + EPS)


def _check(func, torch_fn):
    a = torch.linspace(-2.0, 3.0, R * C, dtype=torch.float64).reshape(R, C).flip(1) ** 2 * 0.3
    w = torch.linspace(0.5, 2.0, C, dtype=torch.float64)
    grad = torch.linspace(-1.0, 1.5, R * C, dtype=torch.float64).reshape(R, C)
    ours = llvm_gradients(func, ["A"], {"A": a, "w": w}, {"Out": grad})
    leaf = a.clone().requires_grad_()
    torch_fn(leaf, w).backward(grad)
    torch.testing.assert_close(ours["A"], leaf.grad, rtol=1e-9, atol=1e-11)


def test_the_variance_adds_nothing_to_its_own_means_gradient():
    """The mean written as one scaled sum, or as a sum then a division: either way proven."""
    for mean_block in ("sum", "divide"):
        func = _normalized(mean_block, 1.0 / C)
        backward = differentiate(func, ["A"])
        assert [(z.kind, z.block, z.buffer) for z in zero_gradients(backward)] == [("contribution", "var", "m")], \
            mean_block
        assert "d_m_from_var" not in _blocks(backward) and "d_m_from_normalize" in _blocks(backward)
        _check(func, _torch)


def test_a_variance_of_another_scale_is_still_centered():
    """Σ (x − m)² / (C − 1) (the unbiased variance): any constant factor of the centered term."""
    func = _normalized("sum", 1.0 / (C - 1))
    assert [z.buffer for z in zero_gradients(differentiate(func, ["A"]))] == ["m"]
    _check(func, lambda a, w: _torch(a, w, var_scale=1.0 / (C - 1)))


NOT_CENTERED = {   # each keeps the variance's term of m's gradient, which is not zero
    "weighted (w[k] varies with k)": dict(weighted=True),
    "a mean over fewer columns than the sum walks": dict(mean_columns=C - 1),
    "a scale that is not 1/C": dict(mean_scale=1.0 / (C + 1)),
    "a cube (not affine in x - m)": dict(power=3),
    "the mean of A rounded to float16 (a narrowing cast is not the identity)": dict(narrowed_mean=True),
}


def test_sums_that_are_not_centered_keep_their_term():
    """Contributions that are not zero are built, and the gradients match torch (but the float16 mean's:
    its rounding is TVM's llvm build's, which torch's .half() need not match bit for bit)."""
    for why, options in NOT_CENTERED.items():
        func = _normalized("sum", 1.0 / C, **options)
        backward = differentiate(func, ["A"])
        assert zero_gradients(backward) == (), why
        assert [b for b in _blocks(backward) if b.startswith("d_m") and b.endswith("from_var")], why
        if not options.get("narrowed_mean"):
            _check(func, lambda a, w, options=options: _torch(a, w, **options))


def test_a_mean_read_along_the_sum_or_another_buffer_of_the_same_name_keeps_its_term():
    """The mean read at an index that moves with k (m[k], not one value over the sum), and a mean of
    another input that prints the same (two placeholders named X): neither is centered."""
    @T.prim_func(s_tir=True)
    def diagonal(A: T.Buffer((C, C), "float64"), Out: T.Buffer((C,), "float64")):
        m = T.sblock_alloc_buffer((C,), "float64")
        for i, k in T.grid(C, C):
            with T.sblock("m"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    m[vi] = T.float64(0)
                m[vi] = m[vi] + A[vi, vk] / T.float64(C)
        for i, k in T.grid(C, C):
            with T.sblock("out"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    Out[vi] = T.float64(0)
                Out[vi] = Out[vi] + (A[vk, vk] - m[vk]) * (A[vk, vk] - m[vk])
    assert zero_gradients(differentiate(diagonal, ["A"])) == ()
    first, second = te.placeholder((R, C), "float64", name="X"), te.placeholder((R, C), "float64", name="X")
    k, k2 = te.reduce_axis((0, C), "k"), te.reduce_axis((0, C), "k2")
    m = te.compute((R,), lambda i: te.sum(second[i, k] / tirx.const(C, "float64"), axis=k), name="m")
    v = te.compute((R,), lambda i: te.sum((first[i, k2] - m[i]) * (first[i, k2] - m[i]), axis=k2), name="v")
    func = te.create_prim_func([first, second, v]).with_attr("global_symbol", "f")
    assert zero_gradients(differentiate(func, [func.params[0].name])) == ()


def test_the_examples_layernorm_drops_the_term_and_its_moments_form_has_none():
    """examples/layernorm.py (1/N rounded to float32 at N = 45: counted as 1/N) loses the block; the
    moments form (var = E[x²] − m², no centered sum) has nothing to drop."""
    backward = differentiate(make_layernorm(7, 45), ["X", "gamma", "beta"])
    assert [(z.block, z.buffer) for z in zero_gradients(backward)] == [("var", "mean")]
    assert not [b for b in _blocks(backward) if b.startswith("d_mean") and b.endswith("from_var")]
    assert zero_gradients(differentiate(make_layernorm_moments(7, 45), ["X", "gamma", "beta"])) == ()


def test_the_same_variance_written_in_te_drops_the_term_too():
    """A rewrite that keeps the meaning: TE's compute ops (the sum, then the mean as its own op, the 1/C
    inside the variance's sum) prove the same zero, and the gradient matches torch."""
    a = te.placeholder((R, C), "float64", name="A")
    k, j = te.reduce_axis((0, C), "k"), te.reduce_axis((0, C), "j")
    total = te.compute((R,), lambda i: te.sum(a[i, k], axis=k), name="total")
    m = te.compute((R,), lambda i: total[i] / tirx.const(C, "float64"), name="m")
    var = te.compute((R,), lambda i: te.sum((a[i, j] - m[i]) * (a[i, j] - m[i]) / tirx.const(C, "float64"), axis=j),
                     name="var")
    out = te.compute((R, C), lambda i, c: (a[i, c] - m[i]) * tirx.rsqrt(var[i] + tirx.const(EPS, "float64")),
                     name="Out")
    func = te.create_prim_func([a, out]).with_attr("global_symbol", "normalized")
    assert [(z.block, z.buffer) for z in zero_gradients(differentiate(func, ["A"]))] == [("var", "m")]
    _check(func, _torch)
