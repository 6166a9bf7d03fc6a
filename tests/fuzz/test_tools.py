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
    assert fuzz_gpu_run.main([folder, "--device", "cpu", "--case", case["name"]]) == 1
    assert f"{written}: " in capsys.readouterr().out


def test_gpu_campaign_carries_bfloat16_through_its_npz_files(tmp_path):
    values = np.array([1.5, -2.25, 3.0e38, -0.0078125], dtype="float32").astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "data.npz", x=fuzz_gpu_generate.storable(values))
    loaded = np.load(tmp_path / "data.npz")["x"]   # without storable: dtype void, which torch refuses
    tensor, _, _ = fuzz_gpu_run.place(loaded, "bfloat16", "cpu", margins=True)
    assert tensor.dtype == torch.bfloat16
    assert tensor.float().numpy().tolist() == values.astype("float32").tolist()
