"""The tuner on fake timers (no GPU): the never-slower rule, the budget, determinism under a seed,
multi-kernel programs tuned end to end, the cache, the write-back into a saved module, and the
spread of many modules over GPUs."""

import importlib.util
import json
import math
import os
import random
import sys

import numpy as np
import pytest
import torch

from matmul import make_matmul
from triton_codegen import compile
from triton_codegen.search_space import KernelSpace
from triton_codegen.tuner import BUDGET, confirm, search, tune
from triton_codegen.tuning import module_spaces, plan_workers, tune_loaded, tune_module, tune_modules
from tir_passes.errors import FrontendError
from tir_passes.contracts.gpu_specs import gpu_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Prediction:
    def __init__(self, seconds):
        self.seconds = seconds

    @property
    def ms(self):
        return self.seconds * 1e3


def _space(name, sizes=(16, 32, 64, 128), warps=(2, 4, 8), model=None):
    """A kernel space of BLOCK x warps configs, default first, ranked by `model` (seconds) if given."""
    configs = [{"BLOCK": 64, "num_warps": 4, "num_stages": 2}]
    configs += [{"BLOCK": b, "num_warps": w, "num_stages": 2} for b in sizes for w in warps
                if {"BLOCK": b, "num_warps": w, "num_stages": 2} != configs[0]]
    if model:
        configs = configs[:1] + sorted(configs[1:], key=model)
    predictions = tuple(_Prediction(model(c)) if model else None for c in configs)
    return KernelSpace(name, tuple(configs), predictions, len(configs), len(configs))


def _noisy(true_ms, noise=0.03, seed=0):
    """A fake timer: the true time of the assignment, times uniform noise of +-noise."""
    rng = random.Random(seed)
    calls = []

    def timer(assignment):
        calls.append(assignment)
        return true_ms(assignment) * (1 + rng.uniform(-noise, noise))

    timer.calls = calls
    return timer


def _flat(assignment):
    """Every config within 0.3% of the others: nothing is faster beyond a 3% noise."""
    config = assignment["k"]
    return 1.0 + 0.001 * (config["BLOCK"] % 3) + 0.0005 * (config["num_warps"] == 8)


def _valley(assignment):
    """BLOCK 128 with 8 warps is 30% faster than the default."""
    config = assignment["k"]
    return 1.0 - 0.1 * math.log2(config["BLOCK"] / 16) / 3 - 0.1 * (config["num_warps"] == 8)


def test_within_the_noise_the_default_stays():
    result = tune([_space("k")], _noisy(_flat), seed=0)
    assert result.kept_default and result.chosen == result.default and result.gain == 0.0
    assert result.noise > 0  # measured from the default's repeats


def test_a_finalist_faster_beyond_the_noise_replaces_the_default():
    result = tune([_space("k")], _noisy(_valley), seed=0)
    assert not result.kept_default
    assert result.chosen["k"] == {"BLOCK": 128, "num_warps": 8, "num_stages": 2}
    assert result.gain > result.noise and result.chosen_ms < result.default_ms


def test_a_slower_finalist_never_wins_even_when_its_search_timing_was_lucky():
    # the search saw config B at 0.5 ms once; its real time is 2 ms: confirmation keeps the default
    lucky = {"BLOCK": 16, "num_warps": 2, "num_stages": 2}
    default = {"k": {"BLOCK": 64, "num_warps": 4, "num_stages": 2}}
    timer = _noisy(lambda a: 2.0 if a["k"] == lucky else 1.0, noise=0.01)
    outcome = confirm(default, [{"k": lucky}], timer, rounds=5)
    assert outcome["kept_default"] and outcome["chosen"] == default
    assert len(outcome["confirmation"]["default"]) == 5 and len(outcome["confirmation"]["finalist 1"]) == 5


def test_the_search_spends_at_most_its_budget():
    space = _space("k", sizes=(16, 32, 64, 128, 256, 512), warps=(1, 2, 4, 8, 16))
    timer = _noisy(_valley)
    result = tune([space], timer, seed=3, rounds=5)
    assert result.timed_evaluations == BUDGET  # the space (30 configs) is larger than the budget
    assert len(timer.calls) == BUDGET + 5 * (1 + 3)  # and the confirmation: 5 rounds of default + 3 finalists
    small = tune([space], _noisy(_valley), budget=7, seed=3)
    assert small.timed_evaluations == 7


def test_configs_that_cannot_run_cost_no_evaluation():
    refused = {16, 32}
    result = tune([_space("k")], _noisy(lambda a: math.inf if a["k"]["BLOCK"] in refused else _valley(a)), seed=0)
    finite = [e for e in result.evaluations if math.isfinite(e["ms"])]
    assert len(finite) == len(_space("k").configs) - 6  # everything but the refused
    assert result.chosen["k"]["BLOCK"] not in refused


def test_same_seed_same_search():
    def model(config):
        return 1e-3 * (1 + abs(math.log2(config["BLOCK"] / 64)) * 0.05)

    first = tune([_space("k", model=model)], _noisy(_valley, seed=7), seed=11)
    again = tune([_space("k", model=model)], _noisy(_valley, seed=7), seed=11)
    assert [e["assignment"] for e in first.evaluations] == [e["assignment"] for e in again.evaluations]
    assert first.chosen == again.chosen and first.confirmation == again.confirmation


def test_the_model_ranking_is_where_the_search_starts():
    def model(config):  # predicts the valley exactly
        return _valley({"k": config}) * 1e-3

    history, _best = search([_space("k", model=model)], _noisy(_valley, noise=0.0), budget=3)
    assert history[1]["assignment"]["k"] == {"BLOCK": 128, "num_warps": 8, "num_stages": 2}
    assert history[1]["predicted_ms"] == pytest.approx(_valley(history[1]["assignment"]))


def test_multi_kernel_programs_are_tuned_end_to_end():
    """Every timing is the whole program; both kernels move off their defaults when it pays."""
    def program(assignment):
        a, b = assignment["a"], assignment["b"]
        return 2.0 * _valley({"k": a}) + 1.0 * _valley({"k": b})

    spaces = [_space("a", model=lambda c: 2e-3), _space("b", model=lambda c: 1e-3)]
    timer = _noisy(program, noise=0.005)
    result = tune(spaces, timer, seed=0)
    assert all(set(call) == {"a", "b"} for call in timer.calls)
    assert result.timed_evaluations <= BUDGET
    assert result.chosen["a"]["BLOCK"] >= 64 and result.chosen["b"]["BLOCK"] >= 64
    assert result.chosen_ms < 0.9 * result.default_ms  # the optimum is 2.4 / 2.8 of the default


# --- on a saved module: cache, write-back, deployment ----------------------------------------------
def _favour(config_index):
    """A timer factory whose fake makes the space's config `config_index` 40% faster than the rest."""
    made = []

    def factory(module, args):
        made.append(module)
        name = module.LAUNCHERS[0][0]
        target = module_spaces(module, gpu_spec("H200"), {})[0].configs[config_index]
        return lambda assignment: 0.6 if assignment[name] == target else 1.0

    factory.made = made
    return factory


@pytest.fixture()
def saved_matmul(tmp_path, monkeypatch):
    monkeypatch.setenv("TIR_TRITON_CACHE", str(tmp_path / "cache"))
    kernel = compile(make_matmul(67, 45, 33), verify=False)
    folder = tmp_path / "deploy"
    path = kernel.save(str(folder) + os.sep)
    kernel.write_manifest(str(folder / "manifest.json"))
    return path


def _import_fresh(path):
    spec = importlib.util.spec_from_file_location(f"deployed_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_second_tune_is_a_cache_hit(saved_matmul):
    factory = _favour(5)
    first = tune_module(saved_matmul, {}, timer_factory=factory, interpret=True, gpu="H200", progress=False, write=False)
    second = tune_module(saved_matmul, {}, timer_factory=factory, interpret=True, gpu="H200", progress=False, write=False)
    assert not first["cache_hit"] and second["cache_hit"]
    assert len(factory.made) == 1  # the second call timed nothing
    assert second["chosen"] == first["chosen"] and second["cache_key"] == first["cache_key"]
    files = os.listdir(os.environ["TIR_TRITON_CACHE"])
    assert len(files) == 1 and files[0].startswith("matmul-")
    stored = json.load(open(os.path.join(os.environ["TIR_TRITON_CACHE"], files[0])))
    assert stored["key"]["source_hash"].startswith("0x") and stored["key"]["gpu"] == "H200"
    assert stored["key"]["shapes"][0] == ["A", "float16", [67, 33]]


def test_the_choice_is_written_into_the_module_and_deployed(saved_matmul):
    report = tune_module(saved_matmul, {}, timer_factory=_favour(5), interpret=True, gpu="H200", progress=False)
    assert not report["kept_default"]
    name = "matmul_kernel0"
    deployed = _import_fresh(saved_matmul)
    chosen = deployed.CONFIGS[name][deployed.CHOSEN[name]]
    assert chosen == report["chosen"][name] and deployed.CHOSEN[name] != 0
    manifest = json.load(open(os.path.join(os.path.dirname(saved_matmul), "manifest.json")))["modules"]["matmul.py"]
    assert manifest["kernels"][0]["configs"][manifest["kernels"][0]["chosen"]] == chosen
    assert manifest["tuning"]["gpu"] == "H200" and manifest["tuning"]["gain"] > 0
    # the deployed module computes right with its tuned config (the interpreter, CPU tensors)
    a, b = torch.randn(67, 33).half(), torch.randn(33, 45).half()
    c = torch.full((67, 45), float("nan"))
    deployed.run(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.float().numpy() @ b.float().numpy(), rtol=1e-2, atol=1e-2)


def test_modules_spread_one_worker_per_gpu(tmp_path):
    paths = [str(tmp_path / f"m{i}.py") for i in range(5)]
    assert plan_workers(paths, [0, 1]) == [(0, paths[0::2]), (1, paths[1::2])]
    assert plan_workers(paths[:1], [0, 1, 2]) == [(0, paths[:1])]
    worker = ("import json, os, sys; out, paths = sys.argv[1], sys.argv[2:]; "
              "json.dump([{'module': p, 'device': os.environ['CUDA_VISIBLE_DEVICES']} for p in paths], open(out, 'w'))")

    def command(share, out, options):
        return [sys.executable, "-c", worker, out, *share]

    reports = tune_modules(paths, [0, 1], [], command=command)
    assert [r["module"] for r in reports] == paths
    assert [r["device"] for r in reports] == ["0", "1", "0", "1", "0"]


def test_tuning_without_a_gpu_says_so(saved_matmul):
    with pytest.raises(FrontendError, match="tune needs a CUDA GPU"):
        tune_module(saved_matmul, {}, progress=False)


def test_a_misspelled_size_name_is_refused_with_the_modules_sizes(saved_matmul):
    with pytest.raises(FrontendError, match="--sizes names rows, which this module does not have"):
        tune_module(saved_matmul, {"rows": 64}, interpret=True, gpu="H200", progress=False, write=False,
                    timer_factory=lambda module, args: (lambda assignment: 1.0))


def test_a_modules_own_tune_is_the_never_slower_tuner(saved_matmul):
    """module.tune() goes through tune_loaded: on a CPU-only machine it says a GPU is needed, and
    with a timer where nothing beats the default beyond the noise, the default stays."""
    deployed = _import_fresh(saved_matmul)
    a, b = torch.randn(67, 33).half(), torch.randn(33, 45).half()
    c = torch.empty(67, 45)
    with pytest.raises(FrontendError, match="tune needs a CUDA GPU"):
        deployed.tune(a, b, c)
    flat = lambda module, args: (lambda assignment: 1.0)  # noqa: E731 - no config is faster
    result, report = tune_loaded(deployed, [a, b, c], "matmul", timer_factory=flat, interpret=True, gpu="H200",
                                 progress=False, use_cache=False)
    assert report["kept_default"] and deployed.CHOSEN == {"matmul_kernel0": 0}
    favoured = _favour(5)
    result, report = tune_loaded(deployed, [a, b, c], "matmul", timer_factory=favoured, interpret=True, gpu="H200",
                                 progress=False, use_cache=False)
    name = "matmul_kernel0"
    assert not report["kept_default"] and deployed.CONFIGS[name][deployed.CHOSEN[name]] == report["chosen"][name]
