"""Run the GPU fuzz campaign with torch + triton only: every module of a folder written by
fuzz_gpu_generate.py, on its saved inputs, compared with TVM's saved outputs.

    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz                         # all programs, on the GPU
    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz --sanitize-every 20     # and every 20th under compute-sanitizer
    TRITON_INTERPRET=1 python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz --limit 5   # on the CPU, in the interpreter

Every tensor sits inside a larger allocation whose margins hold a pattern: a changed margin is a
store outside the tensor. Under compute-sanitizer (memcheck, one child process per program)
tensors are allocated exactly, so any access outside them is the sanitizer's to report.
Floats compare within the per-dtype tolerances of cases.json (NaN and Inf positions must match),
integers bit for bit. Writes results.json into the folder; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

MARGIN = 4096
SANITIZER_EXIT = 86


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("fuzz_" + os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def place(array: np.ndarray, device: str, margins: bool) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(tensor, its storage, a copy of the storage's margins) for `array`, inside margins when asked."""
    data = torch.from_numpy(np.array(array, copy=True)).to(device)
    if not margins:
        return data, None, None
    storage = torch.empty(data.numel() + 2 * MARGIN, dtype=data.dtype, device=device)
    pattern = torch.arange(storage.numel(), device=device) % 251 + 1000
    storage.copy_(pattern.to(data.dtype) if data.dtype != torch.bool else pattern % 2 == 0)
    view = storage[MARGIN:MARGIN + data.numel()].view(data.shape)
    view.copy_(data)
    return view, storage, _margins(storage).clone()


def _margins(storage: torch.Tensor) -> torch.Tensor:
    return torch.cat([storage[:MARGIN], storage[-MARGIN:]])


def compare(name: str, expected: np.ndarray, actual: np.ndarray, tolerance: tuple[float, float] | None) -> str | None:
    """None when equal (floats within tolerance, NaN/Inf positions equal; others exactly), else why not."""
    if tolerance is None:
        bad = np.argwhere(expected != actual)
        if len(bad):
            idx = tuple(int(i) for i in bad[0])
            return f"{name}: {len(bad)} of {expected.size} elements differ; first at {idx}: {actual[idx]} != {expected[idx]}"
        return None
    exp, act = expected.astype(np.float64), actual.astype(np.float64)
    if (np.isnan(exp) != np.isnan(act)).any():
        return f"{name}: NaN positions differ"
    if (np.isinf(exp) != np.isinf(act)).any() or (exp[np.isinf(exp)] != act[np.isinf(exp)]).any():
        return f"{name}: Inf positions or signs differ"
    finite = np.isfinite(exp)
    rtol, atol = tolerance
    diff = np.abs(exp - act)
    bad = np.argwhere(finite & (diff > atol + rtol * np.abs(exp)))
    if len(bad):
        idx = tuple(int(i) for i in bad[0])
        return f"{name}: {len(bad)} of {expected.size} elements differ; first at {idx}: {actual[idx]} != {expected[idx]}"
    return None


def run_case(folder: str, case: dict, tolerances: dict, device: str, margins: bool) -> list[str]:
    module = load_module(os.path.join(folder, case["module"]))
    data = np.load(os.path.join(folder, case["data"]))
    problems = []
    for index in range(case["datasets"]):
        placed, args = {}, []
        for param in case["params"]:
            if param["kind"] == "scalar":
                args.append(param["value"])
                continue
            placed[param["name"]] = place(data[f"in{index}__{param['name']}"], device, margins)
            args.append(placed[param["name"]][0])
        module.run(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        for param in case["params"]:
            if param["kind"] != "buffer":
                continue
            view, storage, before = placed[param["name"]]
            tolerance = tolerances.get(param["dtype"])
            problem = compare(param["name"], data[f"out{index}__{param['name']}"], view.cpu().numpy(), tolerance)
            if problem:
                problems.append(f"data set {index}: {problem}")
            if storage is not None and not torch.equal(_margins(storage), before):
                problems.append(f"data set {index}: {param['name']}: the kernel wrote outside the tensor")
    return problems


def sanitize(folder: str, case: dict) -> list[str]:
    """Run one program in a child process under compute-sanitizer's memcheck."""
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        return ["compute-sanitizer is not on PATH"]
    command = [tool, "--tool", "memcheck", "--error-exitcode", str(SANITIZER_EXIT), sys.executable,
               os.path.abspath(__file__), folder, "--case", case["name"], "--no-margins"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return []
    what = "memcheck found errors" if done.returncode == SANITIZER_EXIT else f"exit code {done.returncode}"
    return [f"compute-sanitizer: {what}:\n{(done.stdout + done.stderr)[-3000:]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--device", default="cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")
    parser.add_argument("--case", help="run only the program of this name")
    parser.add_argument("--limit", type=int, help="run only the first N programs")
    parser.add_argument("--no-margins", action="store_true", help="allocate tensors exactly (for compute-sanitizer)")
    parser.add_argument("--sanitize-every", type=int, default=0, help="also run every Nth program under compute-sanitizer")
    args = parser.parse_args(argv)
    with open(os.path.join(args.folder, "cases.json")) as handle:
        campaign = json.load(handle)
    cases = [c for c in campaign["cases"] if args.case in (None, c["name"])][:args.limit]
    tolerances = {dtype: tuple(tol) for dtype, tol in campaign["tolerances"].items()}
    print(f"{len(cases)} programs on {args.device}: torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'Triton interpreter'}", flush=True)
    results, started = [], time.perf_counter()
    for position, case in enumerate(cases):
        try:
            problems = run_case(args.folder, case, tolerances, args.device, margins=not args.no_margins)
        except Exception as err:  # noqa: BLE001 - a failure of this program, reported with the others
            problems = [f"{type(err).__name__}: {str(err)[:2000]}"]
        if args.sanitize_every and position % args.sanitize_every == 0:
            problems += sanitize(args.folder, case)
        results.append({"name": case["name"], "seed": case["seed"], "family": case["family"], "problems": problems})
        if problems:
            print(f"FAIL {case['name']} ({case['family']}, reproducer {case['name']}.tir.py): {problems[0][:500]}", flush=True)
    failed = [r for r in results if r["problems"]]
    if not args.case:
        with open(os.path.join(args.folder, "results.json"), "w") as handle:
            json.dump(results, handle, indent=1)
    sanitized = len(range(0, len(cases), args.sanitize_every)) if args.sanitize_every else 0
    print(f"{len(results) - len(failed)} of {len(results)} programs match TVM's llvm build ({sanitized} under "
          f"compute-sanitizer) in {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
