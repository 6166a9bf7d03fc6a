"""Fuzzing that grows: the Gluon backend's family, and a GPU campaign's generation that cannot hang
(each program prepared in a forked child with a time limit) and is one command (--chunk)."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import numpy as np
import pytest

from .generator import GLUON_SHARE, generate, generate_gluon
from .runner import ROOT, run_program

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import fuzz_gpu_generate


def _fake_prepare(seed, scale, out_dir, verify):
    if seed == 11:
        time.sleep(60)   # TVM hanging in tvm.compile: nothing in process can interrupt it
    return {"name": f"fuzz_{seed}", "seed": seed, "family": "elementwise"}


def test_a_hanging_program_is_skipped_and_the_campaign_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz_gpu_generate, "prepare", _fake_prepare)
    started = time.monotonic()
    written, skipped = fuzz_gpu_generate.write_chunk(range(10, 13), 1, str(tmp_path), False, 2.0)
    assert (written, skipped) == (2, 1) and time.monotonic() - started < 30
    [entry] = json.loads((tmp_path / "skipped.json").read_text())
    assert entry["seed"] == 11 and entry["skipped"] == "timeout" and "did not finish within 2 s" in entry["detail"]
    assert [c["seed"] for c in json.loads((tmp_path / "cases.json").read_text())["cases"]] == [10, 12]


def test_a_campaign_is_one_command_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz_gpu_generate, "prepare", lambda seed, *rest: {"name": f"fuzz_{seed}", "seed": seed})
    assert fuzz_gpu_generate.main(["--seed", "20", "--count", "5", "--chunk", "2", "--out", str(tmp_path)]) == 0
    chunks = {name: [c["seed"] for c in json.loads((tmp_path / name / "cases.json").read_text())["cases"]]
              for name in sorted(os.listdir(tmp_path))}
    assert chunks == {"fuzz0": [20, 21], "fuzz1": [22, 23], "fuzz2": [24]}


def test_the_gluon_family_is_drawn_from_a_stream_of_its_own():
    seeds = range(4058230196, 4058230196 + 300)
    drawn = [s for s in seeds if generate(s).family == "gluon"]
    assert 0 < len(drawn) < 3 * GLUON_SHARE * len(seeds)
    assert all(generate(s).backend == "gluon" and generate(s).source == generate_gluon(s).source for s in drawn)
    assert generate(drawn[0] + 1).backend == "triton"


TILE_LOOP = re.compile(r"range\((\d+)\)|thread_binding\((\d+), thread=\"threadIdx")


def test_the_gluon_family_draws_only_power_of_two_tile_loops():
    # seed 6177 (scale 2) drew `for c in range(3)`, which the backend's linear layouts refuse
    sources = [generate_gluon(seed, scale).source for seed in range(6000, 6400) for scale in (1, 2)]
    extents = {int(serial or threads) for source in sources for serial, threads in TILE_LOOP.findall(source)}
    assert extents and all(e & (e - 1) == 0 for e in extents), sorted(extents)


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("seed", [4, 9])   # a map, a transpose staged through shared memory
def test_a_gluon_program_compiles_matches_tvm_and_compiles_for_sm90(tmp_path, seed):
    program = generate_gluon(seed)
    assert ("(map)" in program.source) != ("(staged)" in program.source)
    outcome = run_program(program, str(tmp_path), verify=seed == 4)
    assert outcome.kind == "ok", outcome.detail


def test_the_gpu_campaign_stores_the_fp32_accumulating_reference(tmp_path, monkeypatch):
    """fuzz_5105 of the 2026-12-01 H200 run differed only by TVM's 16-bit accumulation: the stored
    expected outputs now follow the kernels' rule (docs/verification.md)."""
    half_sum = generate(5, "loaded_integers", scale=2)
    assert "half_sum" in half_sum.source and '"float16"' in half_sum.source
    monkeypatch.setattr(fuzz_gpu_generate, "generate", lambda seed, scale: half_sum)
    entry = fuzz_gpu_generate.prepare(5, 2, str(tmp_path), False)
    data = np.load(tmp_path / entry["data"])
    for index in range(entry["datasets"]):
        a = data[f"in{index}__A0"]
        expected = np.cumsum(a.astype(np.float32), axis=1, dtype=np.float32)[:, -1].astype(np.float16)
        assert data[f"out{index}__Out0"].tolist() == expected.tolist()
