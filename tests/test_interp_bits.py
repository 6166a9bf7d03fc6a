"""The interpreter-against-GPU bit check on the CPU: the generator writes three tiny programs (two
expressible, one control) with the interpreter's outputs, and the GPU script's comparison, run here
in the interpreter again, finds every program equal; a changed bit is found, and fails the claim
only for an expressible program."""

import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import interp_bits_generate  # noqa: E402
import interp_bits_gpu  # noqa: E402

ONLY = ["scale_shift_relu_fp32", "argmax_fp32", "divide_fp32"]


def _flip_one_bit(folder, entry: dict) -> None:
    """The interpreter's first output, its first element one ulp (one bit) off."""
    path = os.path.join(folder, entry["data"])
    arrays = dict(np.load(path))
    key = f"out__{entry['written'][0]}"
    flat = arrays[key].reshape(-1).copy()
    flat.view(np.int32 if flat.dtype.itemsize == 4 else np.int64)[0] ^= 1
    arrays[key] = flat.reshape(arrays[key].shape)
    np.savez(path, **arrays)


def test_the_interpreter_reproduces_itself_and_a_changed_bit_is_found(tmp_path):
    folder = str(tmp_path / "bits")
    assert interp_bits_generate.main([folder, "--fuzz", "0", "--only", *ONLY]) == 0
    with open(os.path.join(folder, "plan.json")) as handle:
        plan = {entry["name"]: entry for entry in json.load(handle)["cases"]}
    assert sorted(plan) == sorted(ONLY)
    assert plan["scale_shift_relu_fp32"]["expressible"] and plan["argmax_fp32"]["expressible"]
    assert not plan["divide_fp32"]["expressible"] and "div.full.f32" in plan["divide_fp32"]["reasons"][0]

    out = str(tmp_path / "bits.json")
    assert interp_bits_gpu.main(folder, out) == 0
    with open(out) as handle:
        report = json.load(handle)
    assert all(p["bit_equal"] and p["max_ulp"] == 0 for p in report["programs"]), report["programs"]
    assert report["summary"]["expressible_equal"] == 2 and report["summary"]["controls"] == 1

    _flip_one_bit(folder, plan["divide_fp32"])        # a control that differs: reported, not failed
    assert interp_bits_gpu.main(folder, out) == 0
    _flip_one_bit(folder, plan["scale_shift_relu_fp32"])
    assert interp_bits_gpu.main(folder, out) == 1
    with open(out) as handle:
        report = json.load(handle)
    results = {p["name"]: p for p in report["programs"]}
    assert report["summary"]["claim_failures"] == ["scale_shift_relu_fp32"]
    assert report["summary"]["controls_differing"] == ["divide_fp32"]
    assert results["scale_shift_relu_fp32"]["max_ulp"] == 1
    assert results["scale_shift_relu_fp32"]["buffers"]["Y"]["differing"] == 1


def test_ulp_distance_counts_along_the_float_order():
    one = np.array([1.0, -1.0, 0.0], np.float32).view(np.int32)
    nxt = np.array([np.nextafter(np.float32(1), np.float32(2)), np.nextafter(np.float32(-1), np.float32(-2)),
                    -0.0], np.float32).view(np.int32)
    assert interp_bits_gpu.ulp_distance(one, nxt, True) == 1
    smallest = np.array([1], np.int32)              # the smallest subnormal, and its negative: 2 apart
    assert interp_bits_gpu.ulp_distance(smallest, smallest | np.int32(-(2**31)), True) == 2
    assert interp_bits_gpu.ulp_distance(np.array([3], np.int64), np.array([-4], np.int64), False) == 7
