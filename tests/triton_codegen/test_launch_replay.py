"""run()'s replay of launches (triton_codegen/launch_replay.py): a call keyed like an earlier one
that passed launches what it launched, with its own tensors; every other call is checked in full."""

import gc
import weakref

import pytest
import torch

from tir_passes import differentiate
from triton_codegen import compile

from layernorm import make_layernorm
from matmul import make_matmul
from transpose import make_transpose

M, N, K = 67, 48, 40   # rows of multiples of 16 bytes, tiles that do not divide: the descriptor variant runs


@pytest.fixture(scope="module")
def transpose():
    return compile(make_transpose(16, 24), verify=False)


@pytest.fixture(scope="module")
def matmul():
    return compile(make_matmul(M, N, K), verify=False)


@pytest.fixture(scope="module")
def layernorm_backward():
    """Two kernels: the rows' walk writes each row block's partial weight gradients into scratch
    buffers _prepare allocates per call, the second sums them."""
    kernel = compile(differentiate(make_layernorm(64, 24), ["X", "gamma", "beta"]), verify=False)
    assert len(kernel.program.kernels) == 2 and kernel.program.scratch
    return kernel


def _counting_prepare(module, monkeypatch):
    calls = []
    original = module._prepare
    monkeypatch.setattr(module, "_prepare", lambda args, kwargs: calls.append(1) or original(args, kwargs))
    return calls


def test_a_repeated_call_replays_its_launches_on_the_current_contents(transpose, monkeypatch):
    module = transpose.module()
    prepared = _counting_prepare(module, monkeypatch)
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    module.run(a, b)
    a.mul_(3.0)                        # same metadata, other contents: the kernel must run again
    b.fill_(float("nan"))
    module.run(a, b)
    assert len(prepared) == 1 and torch.equal(b, a.t())
    module.run(A=a, B=b)               # keyword arguments: the full path
    assert len(prepared) == 2


def test_the_checks_still_fire_after_a_replayed_call(transpose):
    module = transpose.module()
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    module.run(a, b)
    module.run(a, b)
    with pytest.raises(module.LaunchError, match="parameter B: expected dtype float32, got float64"):
        module.run(a, torch.empty(24, 16, dtype=torch.float64))
    with pytest.raises(module.LaunchError, match="parameter A: dimension 0 is 15, expected 16"):
        module.run(torch.rand(15, 24), b)
    with pytest.raises(module.LaunchError, match="output tensor requires grad"):
        module.run(a, torch.empty(24, 16, requires_grad=True))
    with pytest.raises(module.LaunchError, match="takes 2 arguments, got 3"):
        module.run(a, b, b)
    square = compile(make_transpose(16, 16), verify=False).module()
    x = torch.rand(16, 16)
    square.run(x, torch.empty(16, 16))
    with pytest.raises(square.LaunchError, match="output aliases parameter"):
        square.run(x, x)
    with pytest.raises(square.LaunchError, match="output tensor has overlapping elements"):
        square.run(x, torch.empty(16, 1).expand(16, 16))


def test_the_descriptor_variant_replays_with_this_calls_tensors(matmul, monkeypatch):
    module = matmul.module()
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=generator).to(torch.float16)
    b = torch.randn(K, N, generator=generator).to(torch.float16)
    c = torch.full((M, N), float("nan"))
    module.run(a, b, c)
    prepared = _counting_prepare(module, monkeypatch)
    module.VARIANTS_RUN.clear()
    a.neg_()
    c.fill_(float("nan"))
    module.run(a.view(M, K), b, c)     # another tensor object with the same metadata
    assert not prepared and module.VARIANTS_RUN == {"matmul_kernel0": "descriptors"}
    torch.testing.assert_close(c, a.double().matmul(b.double()).float(), rtol=1e-3, atol=1e-3)
    monkeypatch.setattr(module, "USE_DESCRIPTORS", False)   # a switch is part of the key
    module.run(a, b, c)
    assert len(prepared) == 1 and module.VARIANTS_RUN["matmul_kernel0"].startswith("pointers: descriptors switched")


def test_a_kernel_replaced_since_is_not_replayed(transpose, monkeypatch):
    module = transpose.module()
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    module.run(a, b)
    launched = []

    class StandIn:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.append(grid)

    (name,) = module.CHOSEN
    for kernel in (name, name + "_tma"):   # whichever variant ran
        if hasattr(module, kernel):
            monkeypatch.setattr(module, kernel, StandIn())
    module.run(a, b)
    assert launched


def test_nothing_kept_holds_a_tensor(transpose):
    module = transpose.module()
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    module.run(a, b)
    module.run(a, b)
    alive = weakref.ref(b)
    del b
    gc.collect()
    assert alive() is None


def test_launches_of_tensors_run_was_not_given_are_not_replayed(transpose):
    """A tensor that is neither one of run()'s arguments nor a scratch buffer _prepare allocated cannot
    be replayed from positions of run()'s arguments."""
    module = transpose.module()
    a, scratch = torch.rand(16, 24), torch.empty(24, 16)
    calls = [(module.transpose_kernel0 if hasattr(module, "transpose_kernel0") else object(), (1,), (a, scratch), {})]
    assert module._replay_of(calls, [], (a, torch.empty(24, 16)), {}) is None
    assert module._replay_of(calls, [], (a, scratch), {}) is not None


def _arguments(module, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.full(shape, float("nan")) if written else torch.randn(shape, generator=generator)
            for _, _, _, shape, written, _ in module.PARAMS]


def test_a_module_with_scratch_buffers_replays_them_as_fresh_allocations(layernorm_backward, monkeypatch):
    module = layernorm_backward.module()
    arguments = _arguments(module, 0)
    module.run(*arguments)
    prepared = _counting_prepare(module, monkeypatch)
    allocated = []
    empty_strided = torch.empty_strided
    monkeypatch.setattr(torch, "empty_strided", lambda *a, **k: allocated.append(a) or empty_strided(*a, **k))
    for value, other in zip(arguments, _arguments(module, 1)):   # same tensors, other contents
        value.copy_(other)
    module.run(*arguments)
    assert not prepared, "the second call went down the full path"
    assert module.VARIANTS_RUN[module.LAUNCHERS[1][0]] == "descriptors"   # the partials' sum reads them by TMA
    assert sorted(allocated) == [((4, 24), (24, 1))] * 2   # the two partials, allocated again
    replayed = [value.clone() for value in arguments]
    for value, (_, _, _, _, written, _) in zip(arguments, module.PARAMS):
        if written:
            value.fill_(float("nan"))
    module.run(**{param[0]: value for param, value in zip(module.PARAMS, arguments)})   # keywords: the full path
    assert len(prepared) == 1
    for ours, checked in zip(replayed, arguments):
        assert torch.equal(ours, checked)


def test_only_fresh_allocations_among_the_prepared_values_count_as_scratch(transpose):
    module = transpose.module()
    a, b = torch.rand(16, 24), torch.empty(24, 16)
    fresh = torch.empty(4, 24)
    assert module._scratch_of({"A": a, "B": b, "part": fresh}, (a, b)) == [fresh]
    for other in (torch.empty(8, 24)[2:6], a.view(24, 16), a.reshape(-1)):   # a view, the memory of an argument
        assert module._scratch_of({"A": a, "B": b, "part": other}, (a, b)) is None


def test_nothing_kept_holds_a_scratch_buffer(layernorm_backward, monkeypatch):
    module = layernorm_backward.module()
    arguments = _arguments(module, 0)
    module.run(*arguments)
    allocated = []
    empty_strided = torch.empty_strided
    monkeypatch.setattr(torch, "empty_strided",
                        lambda *a, **k: allocated.append(weakref.ref(t := empty_strided(*a, **k))) or t)
    module.run(*arguments)
    gc.collect()
    assert len(allocated) == 2 and all(alive() is None for alive in allocated)
