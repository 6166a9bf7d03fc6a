"""The fuzzer's own machinery: outcome classification, the float64 cross-check of the reference,
reproducers, the shrinker, and the GPU campaign scripts (run here in the interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest
import torch

from tir_passes.errors import UnsupportedConstructError

from .generator import Program
from .reduce import shrink
from .runner import (
    ROOT,
    ProgramTimeout,
    classify,
    ill_conditioned,
    load_program,
    run_program,
    time_limit,
    write_program,
)

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import fuzz_gpu_generate
import fuzz_gpu_run
import fuzz_gpu_triage


def program(name: str, body: str, sizes: dict | None = None) -> Program:
    return Program(0, "handwritten", name, f"from tvm.script import tirx as T\n\n\n{body}", sizes or {})


# a guard that folds to a constant: the kernel crashes in the interpreter (found/constant_condition_mask.py),
# with an unused parameter and an extra term for the shrinker to remove
FAILING = program("failing", '''@T.prim_func(s_tir=True)
def failing(A: T.Buffer((1,), "float32"), C: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(1):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = T.if_then_else(not (v == 0), A[v - 1], T.float32(0)) + T.exp(A[v])
''')


def test_only_documented_constructs_may_be_refused():
    documented = UnsupportedConstructError("x.py:3: reduction block 'B' updates B with `B[v] | A[v]`; supported "
                                           "combiners are +, *, T.max and T.min of the old value")
    other = UnsupportedConstructError("x.py:3: the store to B is guarded by `v < 3`, which varies along axes its "
                                      "index does not")
    assert classify(documented, None, {})[0] == "refused"
    assert classify(other, None, {})[0] == "unexpected_refusal"


def test_an_ill_conditioned_float32_reference_is_recognized(tmp_path):
    # sin(x * 1e8): float32 rounding of the argument alone changes the result completely
    cancelling = program("cancelling", '''@T.prim_func(s_tir=True)
def cancelling(A: T.Buffer((7,), "float32"), B: T.Buffer((7,), "float32")):
    for i in range(7):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = T.sin(A[v] * T.float32(100000000))
''')
    plain = program("plain", cancelling.source.replace("cancelling", "plain").replace("100000000", "1"))
    for case in (cancelling, plain):
        write_program(case, str(tmp_path))
    assert "float64 build" in ill_conditioned(cancelling, load_program(str(tmp_path / "cancelling.py")), str(tmp_path))
    assert ill_conditioned(plain, load_program(str(tmp_path / "plain.py")), str(tmp_path)) is None


def test_a_failure_writes_a_reproducer_that_replays_the_program(tmp_path, monkeypatch):
    """An internal error (here a compiler fault injected in this process) is classified, and the
    reproducer replays the same program with the same options: it fails while the bug is there and
    is silent once fixed (the subprocess runs the real compiler, which compiles FAILING now)."""
    import triton_codegen

    def broken_compile(func, **options):
        raise IndexError("tuple index out of range (an injected compiler fault)")

    monkeypatch.setattr(triton_codegen, "compile", broken_compile)
    outcome = run_program(FAILING, str(tmp_path / "work"), verify=False, out_dir=str(tmp_path))
    assert outcome.kind == "internal" and "injected compiler fault" in outcome.detail
    assert "verify=False" in (tmp_path / "seed_0_internal" / "reproduce.py").read_text()
    done = subprocess.run([sys.executable, os.path.join(outcome.reproducer, "reproduce.py")], capture_output=True,
                          text=True, cwd=ROOT, check=False, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0 and "matches TVM's llvm build" in done.stdout, done.stderr


def test_the_time_limit_counts_cpu_time_so_load_elsewhere_does_not_change_an_outcome():
    with time_limit(0.3):
        time.sleep(0.6)   # waiting, as when other processes hold the cores: no CPU time spent
    with pytest.raises(ProgramTimeout, match="CPU time"), time_limit(0.3):
        while True:
            pass


def test_shrinking_keeps_what_fails_and_drops_the_rest():
    smaller = shrink(FAILING, lambda variant: "T.if_then_else(not" in variant.source, log=lambda line: None)
    assert "T.exp" not in smaller.source and "C: T.Buffer" not in smaller.source
    assert "B[v] = T.if_then_else(not v == 0, A[v], T.float32(0))" in smaller.source


def test_gpu_campaign_runs_end_to_end_in_the_interpreter(tmp_path, capsys):
    folder = str(tmp_path / "campaign")
    assert fuzz_gpu_generate.main(["--seed", "11", "--count", "3", "--out", folder]) == 0
    campaign = json.loads((tmp_path / "campaign" / "cases.json").read_text())
    assert [c["seed"] for c in campaign["cases"]] == [11, 12, 13]
    assert fuzz_gpu_run.main([folder, "--device", "cpu"]) == 0
    results = json.loads((tmp_path / "campaign" / "results.json").read_text())["results"]
    assert [r["seed"] for r in results] == [11, 12, 13] and not any(r["problems"] for r in results)

    # the device's form: slices in two processes, results where asked
    elsewhere = tmp_path / "out" / "results.json"
    elsewhere.parent.mkdir()
    assert fuzz_gpu_run.main([folder, "--device", "cpu", "--jobs", "2", "--time-limit", "300",
                              "--results", str(elsewhere)]) == 0
    assert json.loads(elsewhere.read_text())["results"] == results

    case = campaign["cases"][0]
    written = next(p["name"] for p in case["params"] if p["kind"] == "buffer" and p["name"].startswith("Out"))
    data = dict(np.load(os.path.join(folder, case["data"])))
    read_only = [p["name"] for p in case["params"] if p["kind"] == "buffer" and not p["name"].startswith("Out")]
    assert read_only and not any(f"out0__{name}" in data for name in read_only)   # an input's result is itself
    data[f"out0__{written}"] = data[f"out0__{written}"] + 1   # the expected result, wrong
    np.savez(os.path.join(folder, case["data"]), **data)
    kept = str(tmp_path / "outputs")
    assert fuzz_gpu_run.main([folder, "--device", "cpu", "--case", case["name"], "--outputs", kept]) == 1
    assert f"{written}: " in capsys.readouterr().out
    assert f"gpu0__{written}" in np.load(os.path.join(kept, f"{case['name']}.npz")).files   # for fuzz_gpu_triage.py


# a float32 sum in loop order loses every 1 added to 2^24: TVM's build of it gives 0, the sum is 1000
ABSORBING_SUM = program("absorbing_sum", '''@T.prim_func(s_tir=True)
def absorbing_sum(A: T.Buffer((1002,), "float32"), Out: T.Buffer((1,), "float32")):
    for k in range(1002):
        with T.sblock("sum"):
            v = T.axis.remap("R", [k])
            with T.init():
                Out[0] = T.float32(0)
            Out[0] = Out[0] + A[v]
''')


def _gpu_difference(folder, kernel_result: float) -> tuple[str, str, str]:
    """A one-program chunk as fuzz_gpu_generate writes it, TVM's float32 result (0), and a GPU run
    whose kernel returned `kernel_result`, with its outputs kept: (folder, results.json, outputs)."""
    values = np.array([2.0 ** 24] + [1.0] * 1000 + [-(2.0 ** 24)], dtype="float32")
    os.makedirs(folder)
    write_program(ABSORBING_SUM, folder)
    os.replace(os.path.join(folder, "absorbing_sum.py"), os.path.join(folder, "absorbing_sum.tir.py"))
    np.savez(os.path.join(folder, "absorbing_sum.npz"), in0__A=values, in0__Out=np.zeros(1, "float32"),
             out0__Out=np.zeros(1, "float32"))
    params = [{"name": "A", "kind": "buffer", "dtype": "float32"}, {"name": "Out", "kind": "buffer", "dtype": "float32"}]
    case = {"name": "absorbing_sum", "seed": 0, "family": "reduction", "module": "absorbing_sum.py",
            "data": "absorbing_sum.npz", "datasets": 1, "params": params, "sizes": {}, "kernels": 1}
    with open(os.path.join(folder, "cases.json"), "w") as handle:
        json.dump({"tolerances": {"float32": [1e-4, 1e-5]}, "scale": 1, "cases": [case]}, handle)
    kernel = np.array([kernel_result], dtype="float32")
    problem = fuzz_gpu_run.compare("Out", np.zeros(1, "float32"), kernel, (1e-4, 1e-5))
    results, outputs = os.path.join(folder, "results.json"), os.path.join(folder, "outputs")
    with open(results, "w") as handle:
        json.dump({"results": [{"name": "absorbing_sum", "seed": 0, "family": "reduction",
                                "problems": [f"data set 0: {problem}"]}]}, handle)
    os.makedirs(outputs)
    np.savez(os.path.join(outputs, "absorbing_sum.npz"), gpu0__A=values, gpu0__Out=kernel)
    return folder, results, outputs


def test_gpu_triage_blames_the_reference_only_where_its_float64_build_agrees_with_the_kernel(tmp_path, capsys):
    exact = _gpu_difference(str(tmp_path / "exact"), 1000.0)
    assert fuzz_gpu_triage.main(list(exact)) == 0
    assert "imprecise reference" in capsys.readouterr().out
    wrong = _gpu_difference(str(tmp_path / "wrong"), 999.0)
    assert fuzz_gpu_triage.main(list(wrong)) == 1
    [verdict] = json.loads((tmp_path / "wrong" / "results.triage.json").read_text())
    assert verdict["verdict"] == "miscompile" and "float64 build" in verdict["why"]


def test_gpu_campaign_carries_bfloat16_through_its_npz_files(tmp_path):
    values = np.array([1.5, -2.25, 3.0e38, -0.0078125], dtype="float32").astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "data.npz", x=fuzz_gpu_generate.storable(values))
    loaded = np.load(tmp_path / "data.npz")["x"]   # without storable: dtype void, which torch refuses
    tensor, _, _ = fuzz_gpu_run.place(loaded, "bfloat16", "cpu", margins=True)
    assert tensor.dtype == torch.bfloat16
    assert tensor.float().numpy().tolist() == values.astype("float32").tolist()
