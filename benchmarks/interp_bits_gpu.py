"""Compare the GPU's bits with Triton's interpreter's, with torch + triton only (a folder written by
benchmarks/interp_bits_generate.py):

    python3 benchmarks/interp_bits_gpu.py generated/interp_bits OUT/interp_bits.json

Every saved module runs once on its saved inputs; each buffer it writes is compared bit for bit
with the interpreter's output, and the largest difference is counted in units in the last place
(floats: the distance of their bit patterns in the float order; integers and bools: the values).
Per program the JSON says expressible (the generator's decision, triton_codegen/interpreter_exact.py),
bit_equal and max_ulp. An expressible program that differs fails the claim (exit 1); the others
are controls, reported. Run on a machine without a GPU (TRITON_INTERPRET=1) the modules run in the
interpreter again, and every program must come back equal (tests/benchmarks/test_interp_bits.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import torch

DEVICE = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"


def load(folder: str, module: str):
    spec = importlib.util.spec_from_file_location("interp_bits_" + module[:-3], os.path.join(folder, module))
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def to_tensor(array: np.ndarray, dtype: str) -> torch.Tensor:
    """The saved array as the parameter's dtype on the device (bfloat16 was saved as float32, exactly)."""
    return torch.from_numpy(np.array(array, copy=True)).to(device=DEVICE, dtype=getattr(torch, dtype))


def bits(tensor: torch.Tensor) -> np.ndarray:
    """The elements' bit patterns as signed integers of their width (bools as 0 and 1)."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bool:
        return tensor.numpy().astype(np.int8)
    width = tensor.element_size()
    return tensor.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).numpy()


def ulp_distance(expected: np.ndarray, actual: np.ndarray, is_float: bool) -> int:
    """The largest distance between two arrays of bit patterns: floats in the float order (adjacent
    floats are 1 apart, +0 and -0 are 0 apart), integers by value (in Python integers: no overflow)."""
    a, b = expected.astype(np.int64), actual.astype(np.int64)
    if is_float:
        magnitude = (np.int64(1) << (8 * expected.dtype.itemsize - 1)) - 1
        a, b = (np.where(x < 0, -(x & magnitude), x) for x in (a, b))
    return int(np.max(np.abs(a.astype(object) - b.astype(object)), initial=0))


def compare(expected: torch.Tensor, actual: torch.Tensor) -> dict:
    """Bit-equal?, how many elements differ, the largest difference in ulps."""
    want, got = bits(expected), bits(actual)
    differing = int(np.count_nonzero(want != got))
    is_float = expected.dtype.is_floating_point
    return {"bit_equal": differing == 0, "differing": differing, "elements": int(want.size),
            "max_ulp": ulp_distance(want, got, is_float) if differing else 0}


def check(folder: str, entry: dict) -> dict:
    """Run one program on the device and compare what it writes with the interpreter's outputs."""
    data = np.load(os.path.join(folder, entry["data"]))
    args, tensors = [], {}
    for param in entry["params"]:
        if param["kind"] == "scalar":
            args.append(param["value"])
            continue
        tensors[param["name"]] = to_tensor(data[f"in__{param['name']}"], param["dtype"])
        args.append(tensors[param["name"]])
    module = load(folder, entry["module"])
    module.run(*args)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    dtypes = {p["name"]: p["dtype"] for p in entry["params"] if p["kind"] == "buffer"}
    buffers = {name: compare(to_tensor(data[f"out__{name}"], dtypes[name]), tensors[name]) for name in entry["written"]}
    return {"name": entry["name"], "expressible": entry["expressible"], "reasons": entry["reasons"],
            "bit_equal": all(b["bit_equal"] for b in buffers.values()),
            "max_ulp": max((b["max_ulp"] for b in buffers.values()), default=0), "buffers": buffers,
            "variants_run": dict(getattr(module, "VARIANTS_RUN", {}))}   # pointers or descriptors, per kernel


def summarize(results: list[dict]) -> dict:
    expressible = [r for r in results if r["expressible"]]
    controls = [r for r in results if not r["expressible"]]
    return {"expressible": len(expressible), "expressible_equal": sum(r["bit_equal"] for r in expressible),
            "claim_failures": [r["name"] for r in expressible if not r["bit_equal"]],
            "controls": len(controls), "controls_differing": [r["name"] for r in controls if not r["bit_equal"]]}


def main(folder: str, out: str | None) -> int:
    with open(os.path.join(folder, "plan.json")) as handle:
        plan = json.load(handle)
    results = []
    for entry in plan["cases"]:
        try:
            result = check(folder, entry)
        except Exception as err:  # noqa: BLE001 - a program that does not run is reported, and fails if expressible
            result = {"name": entry["name"], "expressible": entry["expressible"], "reasons": entry["reasons"],
                      "bit_equal": False, "max_ulp": None, "error": f"{type(err).__name__}: {str(err)[:300]}"}
        results.append(result)
        kind = "expressible" if entry["expressible"] else "control"
        print(f"{entry['name']} ({kind}): {'EQUAL' if result['bit_equal'] else 'differs'}, "
              f"max {result['max_ulp']} ulp" + (f" {result['error']}" if "error" in result else ""), flush=True)
    summary = summarize(results)
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter)"
    report = {"device": device, "torch": torch.__version__, "triton": __import__("triton").__version__,
              "summary": summary, "programs": results}
    if out:
        with open(out, "w") as handle:
            json.dump(report, handle, indent=1)
    print(f"{summary['expressible_equal']} of {summary['expressible']} expressible programs bit-equal; "
          f"{len(summary['controls_differing'])} of {summary['controls']} controls differ")
    if summary["claim_failures"]:
        print(f"CLAIM BROKEN: {', '.join(summary['claim_failures'])}")
    return 1 if summary["claim_failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
