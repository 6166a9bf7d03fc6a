"""Run the GPU fuzz campaign with torch + triton only: every module of a folder written by
fuzz_gpu_generate.py, on its saved inputs, compared with TVM's saved outputs.

    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz                         # all programs, on the GPU
    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz --jobs 8 --sanitize-every 20 --time-limit 420 \
        --results $OUT/results.json                                      # the device campaign (docs/fuzzing.md)
    TRITON_INTERPRET=1 python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz --limit 5   # on the CPU, in the interpreter

Every tensor sits inside a larger allocation whose margins hold a pattern: a changed margin is a
store outside the tensor. Under compute-sanitizer (memcheck, one child process per program)
tensors are allocated exactly, so any access outside them is the sanitizer's to report.
Floats compare within the per-dtype tolerances of cases.json (NaN and Inf positions must match),
integers bit for bit. `--jobs N` runs N processes on the one GPU, each a slice of the programs
(Triton's JIT compile, on the CPU, is most of a program's time). `--time-limit` starts no program
after that many seconds, so a run fits a time-limited machine; the summary says how many ran.
Writes results.json (into the folder unless --results says where); exits 1 when anything failed.
Without a working compute-sanitizer (missing, or refusing the device) the sanitizer runs are
reported as not done, not as failures of the programs.

`--outputs DIR` keeps the kernel's outputs of every program whose outputs differ (DIR/NAME.npz,
`gpu<d>__<param>`), so that `benchmarks/fuzz_gpu_triage.py` can ask, where TVM is, which side is
wrong: TVM's llvm build rounds too (a long fp32 sum in order), and a difference it alone makes is
not a miscompile (the same second opinion the kernel check asks, triton_codegen/check.py).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import triton

MARGIN = 4096
SANITIZER_EXIT = 86


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("fuzz_" + os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def place(array: np.ndarray, dtype: str, device: str,
          margins: bool) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(tensor of `dtype`, its storage, a copy of the storage's margins) for `array` (bfloat16
    arrives as float32), inside margins when asked."""
    data = torch.from_numpy(np.array(array, copy=True)).to(device=device, dtype=getattr(torch, dtype))
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


def expected_output(data, index: int, name: str):
    """TVM's result for a buffer; a buffer the program leaves as it was has none stored (its input)."""
    key = f"out{index}__{name}"
    return data[key] if key in data.files else data[f"in{index}__{name}"]


def run_case(folder: str, case: dict, tolerances: dict, device: str, margins: bool,
             outputs: str | None = None) -> list[str]:
    module = load_module(os.path.join(folder, case["module"]))
    data = np.load(os.path.join(folder, case["data"]))
    problems, kept, differs = [], {}, False
    for index in range(case["datasets"]):
        placed, args = {}, []
        for param in case["params"]:
            if param["kind"] == "scalar":
                args.append(param["value"])
                continue
            placed[param["name"]] = place(data[f"in{index}__{param['name']}"], param["dtype"], device, margins)
            args.append(placed[param["name"]][0])
        module.run(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        for param in case["params"]:
            if param["kind"] != "buffer":
                continue
            view, storage, before = placed[param["name"]]
            tolerance = tolerances.get(param["dtype"])
            actual = (view.float() if view.dtype == torch.bfloat16 else view).cpu().numpy()
            kept[f"gpu{index}__{param['name']}"] = actual
            problem = compare(param["name"], expected_output(data, index, param["name"]), actual, tolerance)
            if problem:
                problems.append(f"data set {index}: {problem}")
                differs = True
            if storage is not None and not torch.equal(_margins(storage), before):
                problems.append(f"data set {index}: {param['name']}: the kernel wrote outside the tensor")
    if differs and outputs:
        os.makedirs(outputs, exist_ok=True)
        np.savez(os.path.join(outputs, f"{case['name']}.npz"), **kept)
    return problems


class SanitizerUnavailable(Exception):
    """compute-sanitizer is missing or cannot run on this device (gVisor refuses it)."""


def sanitizer_tool() -> str | None:
    found = shutil.which("compute-sanitizer")
    candidates = [found] if found else sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"))
    return candidates[0] if candidates else None


def sanitize(folder: str, case: dict) -> list[str]:
    """Run one program in a child process under compute-sanitizer's memcheck."""
    tool = sanitizer_tool()
    if tool is None:
        raise SanitizerUnavailable("compute-sanitizer is not on PATH nor in /usr/local/cuda*/bin")
    command = [tool, "--tool", "memcheck", "--error-exitcode", str(SANITIZER_EXIT), sys.executable,
               os.path.abspath(__file__), folder, "--case", case["name"], "--no-margins"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    if "Device not supported" in output:
        raise SanitizerUnavailable(output.strip().splitlines()[0][:300] if output.strip() else "no output")
    if done.returncode == 0:
        return []
    what = "memcheck found errors" if done.returncode == SANITIZER_EXIT else f"exit code {done.returncode}"
    return [f"compute-sanitizer: {what}:\n{output[-3000:]}"]


def run_cases(folder: str, cases: list[dict], tolerances: dict, args) -> tuple[list[dict], int, str | None]:
    """(results, programs run under compute-sanitizer, why the sanitizer could not run) for this
    process's slice of `cases`, starting none after args.time_limit seconds."""
    index, of = (int(n) for n in args.slice.split("/"))
    results, sanitized, unavailable, started = [], 0, None, time.perf_counter()
    for position in range(index, len(cases), of):
        case = cases[position]
        if args.time_limit and time.perf_counter() - started > args.time_limit:
            break
        try:
            problems = run_case(folder, case, tolerances, args.device, margins=not args.no_margins,
                                outputs=args.outputs)
        except Exception as err:  # noqa: BLE001 - a failure of this program, reported with the others
            problems = [f"{type(err).__name__}: {str(err)[:2000]}"]
        if args.sanitize_every and position % args.sanitize_every == 0 and unavailable is None:
            try:
                problems += sanitize(folder, case)
                sanitized += 1
            except SanitizerUnavailable as err:
                unavailable = str(err)
                print(f"compute-sanitizer cannot run here, no more sanitizer runs: {unavailable}", flush=True)
        results.append({"name": case["name"], "seed": case["seed"], "family": case["family"], "problems": problems})
        if problems:
            print(f"FAIL {case['name']} ({case['family']}, reproducer {case['name']}.tir.py): {problems[0][:500]}", flush=True)
    return results, sanitized, unavailable


def run_in_processes(args, count: int) -> tuple[list[dict], int, str | None]:
    """Run slice k of the programs (every jobs-th from k) in child process k; merge their results."""
    parts = [os.path.join(tempfile.mkdtemp(prefix="fuzz-gpu-"), f"part{k}.json") for k in range(args.jobs)]
    children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), args.folder, "--slice", f"{k}/{args.jobs}",
                                  "--results", part, "--sanitize-every", str(args.sanitize_every), "--device", args.device,
                                  "--time-limit", str(args.time_limit or 0)]
                                 + (["--limit", str(count)] if args.limit else [])
                                 + (["--outputs", args.outputs] if args.outputs else []))
                for k, part in enumerate(parts)]
    results, sanitized, unavailable = [], 0, None
    for k, (child, part) in enumerate(zip(children, parts)):
        if child.wait() != 0 and not os.path.exists(part):   # a crash: its slice is unaccounted for
            results.append({"name": f"slice {k}/{args.jobs}", "seed": -1, "family": "-",
                            "problems": [f"the process of slice {k} died with exit code {child.returncode}"]})
            continue
        with open(part) as handle:
            done = json.load(handle)
        results += done["results"]
        sanitized += done["sanitized"]
        unavailable = unavailable or done["sanitizer_unavailable"]
    return sorted(results, key=lambda r: r["seed"]), sanitized, unavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--device", default="cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")
    parser.add_argument("--case", help="run only the program of this name")
    parser.add_argument("--limit", type=int, help="run only the first N programs")
    parser.add_argument("--no-margins", action="store_true", help="allocate tensors exactly (for compute-sanitizer)")
    parser.add_argument("--sanitize-every", type=int, default=0, help="also run every Nth program under compute-sanitizer")
    parser.add_argument("--jobs", type=int, default=1, help="processes sharing the GPU, each a slice of the programs")
    parser.add_argument("--slice", default="0/1", help=argparse.SUPPRESS)
    parser.add_argument("--time-limit", type=float, default=0, help="start no program after this many seconds (0: none)")
    parser.add_argument("--results", help="where to write results.json (default: into the folder)")
    parser.add_argument("--outputs", help="keep the outputs of programs that differ here (for fuzz_gpu_triage.py)")
    args = parser.parse_args(argv)
    with open(os.path.join(args.folder, "cases.json")) as handle:
        campaign = json.load(handle)
    cases = [c for c in campaign["cases"] if args.case in (None, c["name"])][:args.limit]
    of = int(args.slice.split("/")[1])
    tolerances = {dtype: tuple(tol) for dtype, tol in campaign["tolerances"].items()}
    started = time.perf_counter()
    if args.jobs > 1:
        print(f"{len(cases)} programs in {args.jobs} processes", flush=True)
        results, sanitized, unavailable = run_in_processes(args, len(cases))
    else:
        if of == 1:
            print(f"{len(cases)} programs on {args.device}: torch {torch.__version__}, triton {triton.__version__}, "
                  f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'Triton interpreter'}", flush=True)
        results, sanitized, unavailable = run_cases(args.folder, cases, tolerances, args)
    if args.case:
        return 1 if any(r["problems"] for r in results) else 0
    with open(args.results or os.path.join(args.folder, "results.json"), "w") as handle:
        json.dump({"results": results, "sanitized": sanitized, "sanitizer_unavailable": unavailable}, handle, indent=1)
    if of == 1:
        failed = [r for r in results if r["problems"]]
        print(f"{len(results) - len(failed)} of {len(results)} programs (of {len(cases)}) match TVM's llvm build, "
              f"{sanitized} of them also under compute-sanitizer"
              + (f" (sanitizer unavailable: {unavailable})" if unavailable else "")
              + f", in {time.perf_counter() - started:.0f}s")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
