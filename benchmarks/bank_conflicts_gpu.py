"""On the GPU: run TVM-emitted CUDA kernels (generated/cuda/) under Nsight Compute and compare the
shared-memory bank-conflict counters with the model's predictions; also time each kernel.

    python3 benchmarks/bank_conflicts_gpu.py generated/cuda [OUT_DIR]
Needs CuPy and ncu (both on the H200 image); no TVM.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

METRICS = {
    "ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}


def launch(folder: str, entry: dict, repeats: int = 1) -> float:
    import cupy as cp

    with open(os.path.join(folder, entry["source"])) as handle:
        module = cp.RawModule(code=handle.read(), options=("-std=c++17",))
    kernel = module.get_function(entry["kernel"])
    n = entry["n"]
    args = [cp.random.standard_normal((n, n), dtype=cp.float32) for _ in entry["params"]]
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        kernel(tuple(entry["grid"]), tuple(entry["block"]), tuple(args))
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    if entry["name"].startswith("transpose"):
        assert bool(cp.allclose(args[1], args[0].T)), "transpose result is wrong"
    return sorted(times)[len(times) // 2]


def measure(folder: str, entry: dict) -> dict:
    command = ["ncu", "--metrics", ",".join(METRICS.values()), "--csv", "--kernel-name", entry["kernel"],
               sys.executable, os.path.abspath(__file__), "--launch", folder, entry["name"]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    rows = [r for r in csv.reader(io.StringIO(done.stdout[done.stdout.find('"ID"'):])) if r]
    header, values = rows[0], {}
    for row in rows[1:]:
        record = dict(zip(header, row))
        for key, metric in METRICS.items():
            if record.get("Metric Name") == metric:
                values[key] = int(float(record["Metric Value"].replace(",", "")))
    if not values:
        raise RuntimeError(f"ncu gave no metrics: {done.stdout[-1500:]} {done.stderr[-1500:]}")
    return values


def main(folder: str, out_dir: str | None = None) -> int:
    with open(os.path.join(folder, "kernels.json")) as handle:
        entries = json.load(handle)
    results = []
    for entry in entries:
        measured = measure(folder, entry)
        milliseconds = launch(folder, entry, repeats=50)
        results.append({"name": entry["name"], "predicted": entry["predicted"], "measured": measured, "ms": milliseconds})
    if out_dir:
        with open(os.path.join(out_dir, "bank_conflicts.json"), "w") as handle:
            json.dump(results, handle, indent=1)
    print(f"{'kernel':<26}{'':>4}{'ld wavefronts':>15}{'ld conflicts':>15}{'st wavefronts':>15}{'st conflicts':>14}{'ms':>9}")
    for r in results:
        for label in ("predicted", "measured"):
            v = r[label]
            ms = f"{r['ms']:9.4f}" if label == "measured" else ""
            print(f"{r['name'] if label == 'predicted' else '':<26}{label[:4]:>4}{v['ld_wavefronts']:>15}{v['ld_conflicts']:>15}"
                  f"{v['st_wavefronts']:>15}{v['st_conflicts']:>14}{ms}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--launch":
        folder, name = sys.argv[2], sys.argv[3]
        with open(os.path.join(folder, "kernels.json")) as handle:
            launch(folder, next(e for e in json.load(handle) if e["name"] == name))
    else:
        sys.exit(main(*sys.argv[1:]))
