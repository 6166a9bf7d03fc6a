"""The Gluon backend on the H200: correctness against torch, speed against the copy bandwidth and
cuBLAS, and (with --ncu) Nsight Compute's shared-memory counters next to the model's and Gluon's
bank-conflict counts. Two halves, so the GPU needs no TVM:

    python benchmarks/gluon_gpu.py generate DIR          # here (TVM): modules, cases.json, predictions
    python3 benchmarks/gluon_gpu.py run DIR OUT [--ncu]  # on the GPU (torch + triton only)

`run` keeps within BUDGET_S: a case that would start after it is listed as skipped, not run.

Each case is compiled twice: with every staged tile left row-major ("unchanged") and with
BankConflictFreeTiling's layouts ("pass"), so the table shows what the pass buys in the kernel.
`run` checks every kernel against torch before timing it; a wrong result is reported, not timed.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = {
    "ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}
BUDGET_S = 420          # the whole `run`, ncu included
NCU_TIMEOUT_S = 60      # one profiled launch (a fresh Python: torch import, cached kernel, metric replays)


# --- generate (TVM) --------------------------------------------------------------------------------
def _cases():
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from matmul import make_matmul
    from shared_memory import (schedule_matmul, schedule_matmul_tensor_core, schedule_transpose,
                               schedule_transpose_vectorized)
    from transpose import make_transpose

    return [
        ("transpose_vectorized", "transpose", schedule_transpose_vectorized(make_transpose(4096, 4096))),
        ("transpose_scalar", "transpose", schedule_transpose(make_transpose(4096, 4096))),
        ("matmul_tensor_core", "matmul", schedule_matmul_tensor_core(make_matmul(4096, 4096, 4096, "float16", "float32"))),
        ("matmul_cuda_cores", "matmul", schedule_matmul(make_matmul(1024, 1024, 1024, "float32", "float32"))),
    ]


def _predicted(kernel, variant_mod) -> dict:
    """The model's totals for one launch: per-warp counts of every shared access as the Gluon
    backend issues it, under the decided layout, times the warps launched. wgmma's operand reads
    are no ld.shared: not counted."""
    from tir_passes.passes.bank_conflict_free_tiling import as_issued
    from tir_passes.analyses.bank_conflicts import analyze, wavefronts_under

    totals = {key: 0 for key in METRICS}
    warps = kernel.num_warps
    for _, extent in kernel.grid:
        warps *= extent
    tiles = {t.name: t.decision for t in kernel.shared}
    for access in analyze(variant_mod):
        decision = tiles[access.buffer]
        if decision.kind == "nvmma" and access.kind == "load":
            continue
        issued = as_issued(access, decision.element_bytes)
        waves, ideal = wavefronts_under(issued, decision)
        kind = "ld" if access.kind == "load" else "st"
        totals[f"{kind}_wavefronts"] += waves * issued.executions * warps
        totals[f"{kind}_conflicts"] += (waves - ideal) * issued.executions * warps
    return totals


def generate(out_dir: str) -> int:
    from triton_codegen import compile
    from triton_codegen.gluon.aot import compile_modules
    from triton_codegen.gluon.bank_check import gluon_counts_of
    from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling
    from tir_passes.contracts.shared_layout import UNCHANGED

    os.makedirs(out_dir, exist_ok=True)
    compiled = []
    for name, reference, mod in _cases():
        for variant, passes in (("unchanged", [BankConflictFreeTiling((UNCHANGED,))]), ("pass", None)):
            kernel = compile(mod, verify=False, passes=passes, backend="gluon")
            path = kernel.save(os.path.join(out_dir, f"{name}_{variant}.py"))
            compiled.append((f"{name}_{variant}", reference, kernel, path))
    # one worker each for all the sm_90 compiles and all the gl.bank_conflicts counts
    built = compile_modules([(kernel.module_file(), kernel.program) for _, _, kernel, _ in compiled])
    counted = gluon_counts_of([kernel.program for _, _, kernel, _ in compiled])
    entries = []
    for (name, reference, kernel, path), (aot, *_), counts in zip(compiled, built, counted):
        program = kernel.program
        entries.append({
            "name": name, "module": os.path.basename(path), "reference": reference, "kernel": program.kernels[0].name,
            "params": [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape), "written": p.written}
                       for p in program.params],
            "layouts": {t.name: t.decision.describe() for t in program.kernels[0].shared},
            "predicted": _predicted(program.kernels[0], kernel.tir),
            "gluon_bank_conflicts": [{"block": p.block, "buffer": p.buffer, "kind": p.kind, "conflicts": n}
                                     for p, n in counts],
            "ptx": {"shared_instructions": aot.shared_instructions, "wgmma": aot.mma, "shared_bytes": aot.shared_bytes},
        })
        print(name, entries[-1]["layouts"], entries[-1]["predicted"])
    with open(os.path.join(out_dir, "cases.json"), "w") as handle:
        json.dump(entries, handle, indent=1)
    return 0


# --- run (GPU: torch + triton) ---------------------------------------------------------------------
def _module(folder: str, entry: dict):
    spec = importlib.util.spec_from_file_location(entry["name"], os.path.join(folder, entry["module"]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _arguments(entry: dict):
    import torch

    generator = torch.Generator(device="cuda").manual_seed(0)
    tensors = []
    for p in entry["params"]:
        dtype = getattr(torch, p["dtype"])
        if p["written"]:
            tensors.append(torch.full(p["shape"], float("nan"), dtype=dtype, device="cuda"))
        else:
            tensors.append(torch.randn(p["shape"], dtype=dtype, device="cuda", generator=generator))
    return tensors


def _check(entry: dict, tensors) -> str | None:
    import torch

    if entry["reference"] == "transpose":
        a, b = tensors
        return None if torch.equal(b, a.T) else "transpose differs from torch"
    a, b, c = tensors
    expected = a.float() @ b.float()
    error = (c - expected).abs().max().item()
    scale = expected.abs().max().item()
    return None if error <= 1e-2 * scale else f"matmul differs from torch by {error:.3g} (scale {scale:.3g})"


def _bench(fn) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def _baseline(entry: dict, tensors) -> tuple[str, float]:
    import torch

    if entry["reference"] == "transpose":
        a, b = tensors
        return "copy", _bench(lambda: b.copy_(a))
    a, b, _ = tensors
    return "cuBLAS fp16", _bench(lambda: torch.matmul(a, b))


def _measure(folder: str, entry: dict) -> dict:
    import torch

    module = _module(folder, entry)
    tensors = _arguments(entry)
    module.run(*tensors)
    torch.cuda.synchronize()
    problem = _check(entry, tensors)
    result = {"name": entry["name"], "layouts": entry["layouts"]}
    if problem:
        return {**result, "error": problem}
    ms = _bench(lambda: module.run(*tensors))
    label, base_ms = _baseline(entry, tensors)
    result.update(ms=ms, baseline=label, baseline_ms=base_ms, fraction_of_baseline=base_ms / ms)
    if entry["reference"] == "transpose":
        result["tb_per_s"] = 2 * tensors[0].numel() * tensors[0].element_size() / ms / 1e9
    else:
        m, k = tensors[0].shape
        result["tflops"] = 2 * m * k * tensors[1].shape[1] / ms / 1e9
    return result


def _ncu(folder: str, entry: dict) -> dict:
    command = ["ncu", "--metrics", ",".join(METRICS.values()), "--csv", "--kernel-name", entry["kernel"],
               "--launch-count", "1", sys.executable, os.path.abspath(__file__), "launch", folder, entry["name"]]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"error": f"ncu did not finish: {type(err).__name__}: {err}"}
    rows = [r for r in csv.reader(io.StringIO(done.stdout[done.stdout.find('"ID"'):])) if r]
    values = {}
    for row in rows[1:]:
        record = dict(zip(rows[0], row))
        for key, metric in METRICS.items():
            if record.get("Metric Name") == metric:
                values[key] = int(float(record["Metric Value"].replace(",", "")))
    return values or {"error": f"ncu gave no metrics: {done.stdout[-800:]} {done.stderr[-800:]}"}


def run(folder: str, out_dir: str, with_ncu: bool = False) -> int:
    start = time.time()
    with open(os.path.join(folder, "cases.json")) as handle:
        entries = json.load(handle)
    results = []
    for entry in entries:
        if time.time() - start > BUDGET_S:
            results.append({"name": entry["name"], "error": f"skipped: past the {BUDGET_S} s budget"})
            _write(out_dir, start, results)
            continue
        try:
            result = _measure(folder, entry)
        except Exception as err:  # noqa: BLE001 - one failing case must not hide the others
            result = {"name": entry["name"], "error": f"{type(err).__name__}: {str(err)[:500]}"}
        result.update(predicted=entry["predicted"], gluon_bank_conflicts=entry["gluon_bank_conflicts"])
        if with_ncu and "error" not in result and time.time() - start < BUDGET_S - NCU_TIMEOUT_S:
            result["ncu"] = _ncu(folder, entry)
        results.append(result)
        print(json.dumps(result), flush=True)
        _write(out_dir, start, results)
    print(f"done in {time.time() - start:.0f} s; {os.path.join(out_dir, 'gluon_gpu.json')}")
    return 0


def _write(out_dir: str, start: float, results: list) -> None:
    """After every case, so a run stopped from outside still leaves what it measured."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gluon_gpu.json"), "w") as handle:
        json.dump({"seconds": time.time() - start, "results": results}, handle, indent=1)


def launch(folder: str, name: str) -> int:
    """One launch of one case (what ncu profiles)."""
    import torch

    with open(os.path.join(folder, "cases.json")) as handle:
        entry = next(e for e in json.load(handle) if e["name"] == name)
    _module(folder, entry).run(*_arguments(entry))
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "generate":
        sys.exit(generate(*args))
    if command == "run":
        sys.exit(run(args[0], args[1], "--ncu" in args[2:]))
    if command == "launch":
        sys.exit(launch(*args))
    sys.exit(f"usage: {sys.argv[0]} generate DIR | run DIR OUT [--ncu]")
