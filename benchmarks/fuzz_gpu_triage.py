"""Second opinions for the GPU fuzz campaign's differences, here where TVM is: which side is wrong.

    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz0 --jobs 16 --results $OUT/fuzz.json --outputs $OUT/outputs   # there
    PYTHONPATH=$PWD python benchmarks/fuzz_gpu_triage.py .gpu/fuzz0 OUT/fuzz.json OUT/outputs          # here

The GPU run compares each kernel with TVM's llvm build of the program, which rounds as written:
a long float32 sum in loop order can be further from the exact sum than the kernel's tree (seed
11249: 2,120 products whose absolute values add to 1,372 and whose sum is 0.4456; TVM's build was
1.0e-4 off, the kernel 7e-6). So every program whose outputs differed there is judged against
TVM's build of the same program with float32 made float64 (tests/fuzz/runner.py: float64_outputs,
the CPU fuzzer's `imprecise` test), on the same inputs, at the same tolerances:

- `imprecise reference`: the kernel's outputs are within tolerance of the float64 build (and
  TVM's float32 build is not): TVM's rounding, not a miscompile;
- `miscompile`: the kernel differs from the float64 build too;
- `stands`: not an output difference (a store outside a tensor, an exception, the sanitizer), or
  no outputs were kept (rerun with --outputs), or the program has no float32 to widen.

Prints one line per program and a summary; writes the verdicts next to the results
(RESULTS.triage.json). Exits 1 when a miscompile or an unjudged difference stands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TRITON_INTERPRET", "1")   # nothing runs on a GPU here

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.fuzz_gpu_run import compare  # noqa: E402
from tests.fuzz.generator import Program  # noqa: E402
from tests.fuzz.runner import float64_outputs  # noqa: E402

OUTPUT_DIFFERENCE = " elements differ; first at "


def datasets_of(case: dict, data) -> list[dict]:
    """The inputs the GPU run used, per data set, in the parameters' dtypes (bfloat16 travels as float32)."""
    buffers = [p for p in case["params"] if p["kind"] == "buffer"]
    return [{p["name"]: _as_dtype(data[f"in{index}__{p['name']}"], p["dtype"]) for p in buffers}
            for index in range(case["datasets"])]


def _as_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    return array.astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else array


def judge(folder: str, case: dict, problems: list[str], tolerances: dict, outputs: str, work_dir: str) -> tuple[str, str]:
    """(verdict, why) for one program whose GPU run reported `problems`."""
    if not all(OUTPUT_DIFFERENCE in problem for problem in problems):
        return "stands", "not only output differences: " + problems[0][:300]
    kept = os.path.join(outputs, f"{case['name']}.npz")
    if not os.path.exists(kept):
        return "stands", f"no outputs kept for it ({kept}): rerun the GPU run with --outputs"
    with open(os.path.join(folder, f"{case['name']}.tir.py")) as handle:
        source = handle.read()
    if "float32" not in source:
        return "stands", "no float32 to widen: the float64 build would be the same build"
    program = Program(case["seed"], case["family"], case["name"], source, case.get("sizes") or {})
    data, gpu = np.load(os.path.join(folder, case["data"])), np.load(kept)
    scalars = {p["name"]: p["value"] for p in case["params"] if p["kind"] == "scalar"}
    accurate = float64_outputs(program, datasets_of(case, data), scalars, work_dir)
    for index, wide in enumerate(accurate):
        for param in (p for p in case["params"] if p["kind"] == "buffer"):
            actual = gpu[f"gpu{index}__{param['name']}"]
            problem = compare(param["name"], wide[param["name"]], actual, tolerances.get(param["dtype"]))
            if problem:
                return "miscompile", f"data set {index}: against TVM's float64 build: {problem}"
    return "imprecise reference", ("the kernel is within tolerance of TVM's float64 build of the program; "
                                   "its float32 build differed from the kernel: " + problems[0][:300])


def triage(folder: str, results_path: str, outputs: str) -> list[dict]:
    with open(os.path.join(folder, "cases.json")) as handle:
        campaign = json.load(handle)
    with open(results_path) as handle:
        results = json.load(handle)["results"]
    cases = {c["name"]: c for c in campaign["cases"]}
    tolerances = {dtype: tuple(tol) for dtype, tol in campaign["tolerances"].items()}
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="fuzz-triage-") as work_dir:
        for result in (r for r in results if r["problems"]):
            case = cases.get(result["name"])
            verdict, why = (judge(folder, case, result["problems"], tolerances, outputs, work_dir) if case
                            else ("stands", "not a program of this folder: " + result["problems"][0][:300]))
            verdicts.append({"name": result["name"], "seed": result["seed"], "family": result["family"],
                             "verdict": verdict, "why": why})
            print(f"{result['name']} ({result['family']}): {verdict}: {why}", flush=True)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the chunk fuzz_gpu_generate.py wrote")
    parser.add_argument("results", help="the GPU run's results.json")
    parser.add_argument("outputs", help="the GPU run's --outputs folder")
    args = parser.parse_args(argv)
    verdicts = triage(args.folder, args.results, args.outputs)
    with open(os.path.splitext(args.results)[0] + ".triage.json", "w") as handle:
        json.dump(verdicts, handle, indent=1)
    standing = [v for v in verdicts if v["verdict"] != "imprecise reference"]
    print(f"{len(verdicts)} differences judged: {len(verdicts) - len(standing)} imprecise references, "
          f"{len(standing)} standing")
    return 1 if standing else 0


if __name__ == "__main__":
    sys.exit(main())
