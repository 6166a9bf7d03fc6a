"""ncu profiles of suite cases: what limits a kernel, next to the peer it is measured against.

    python benchmarks/profile_misses.py run generated/suite OUT [--only a,b]    # on the GPU (ncu)
    python benchmarks/profile_misses.py table OUT/profiles.json                 # docs/benchmarks.md's table

For each case named (the ones whose goals the suite's last run missed), Nsight Compute profiles one launch of each of our kernels and of the
peer's kernels (torch.compile's Triton kernels, cuBLAS, SDPA), after warm-up calls, and reads the
metrics below. The table puts them side by side: time, DRAM and SM throughput as a fraction of
peak, achieved occupancy, issue slots busy, tensor-pipe activity, registers, grid, and the two
largest warp-stall reasons. Runs with torch + triton + ncu only (no TVM).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

METRICS = {
    "gpu__time_duration.sum": "time_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_pct",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "gmma_pct",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "hmma_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
}
STALLS = ["long_scoreboard", "short_scoreboard", "barrier", "math_pipe_throttle", "mio_throttle", "lg_throttle",
          "wait", "not_selected", "membar", "branch_resolving", "dispatch_stall", "no_instruction", "selected",
          "drain", "sleeping", "tex_throttle", "imc_miss", "math"]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
PEER_KERNELS = {   # the kernels each peer launches, as ncu's -k regex (torch.compile: Triton kernels)
    "torch.compile": "regex:^triton_", "cuBLAS": "regex:(gemm|gemv|sm90|cutlass|Kernel)", "SDPA flash": "regex:flash",
    "SDPA efficient": "regex:(fmha|efficient|cutlass)", "SDPA cuDNN": "regex:(cudnn|sm90|fmha)",
    "SDPA default": "regex:(cudnn|flash|fmha|sm90)",
}


# --- on the GPU: the child that ncu watches ------------------------------------------------------------
def child(folder: str, name: str, who: str) -> None:
    """Run the case's module (who = "ours") or a peer a few times: ncu profiles the last launch."""
    import suite
    import suite_torch
    import torch

    case = next(c for c in json.load(open(os.path.join(folder, suite.MANIFEST))) if c["name"] == name)
    args = suite._arguments(case, "cuda")
    if who == "ours":
        module = suite._load(os.path.join(folder, case["module"]))
        call = lambda: module.run(*args)  # noqa: E731
    else:
        peer = suite_torch.peers(case["program"], "cuda")[who]
        call = lambda: peer(args)  # noqa: E731
    for _ in range(3):
        call()
    torch.cuda.synchronize()


def _profile(folder: str, name: str, who: str, kernels: str) -> list[dict]:
    metrics = list(METRICS) + [STALL_METRIC.format(s) for s in STALLS]
    command = ["ncu", "--csv", "--page", "raw", "-k", kernels, "--metrics", ",".join(metrics),
               sys.executable, os.path.abspath(__file__), "child", folder, name, who]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    rows = [r for r in csv.DictReader(io.StringIO(_csv_part(done.stdout)))]
    if not rows:
        return [{"error": (done.stderr or done.stdout)[-400:]}]
    launches = [_launch(row) for row in rows[1:] if row.get("ID", "").strip().isdigit()]   # row 0: units
    return _last_call(launches)


def _csv_part(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith('"')]
    return "\n".join(lines)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def _launch(row: dict) -> dict:
    found = {"kernel": row.get("Kernel Name", "")[:60]}
    for metric, key in METRICS.items():
        found[key] = _number(row.get(metric))
    if found["time_us"] is not None:
        found["time_us"] /= 1000.0   # ncu reports nanoseconds
    stalls = {s: _number(row.get(STALL_METRIC.format(s))) for s in STALLS}
    found["stalls"] = sorted(((v, s) for s, v in stalls.items() if v), reverse=True)[:2]
    return found


def _last_call(launches: list[dict]) -> list[dict]:
    """The last launch of each kernel (warm-up calls, and torch.compile's own benchmarking, launch
    the same kernels before), in launch order."""
    last = {launch["kernel"]: launch for launch in launches}
    return list(last.values())


def _our_kernels(case: dict) -> str:
    """ncu's -k regex of the module's kernels (each name a prefix: its `_tma` variant too), from the model's
    entry in the manifest; the program's name where there is none (it need not prefix the kernels'
    names: the fp32 attention case's program is attention_fp32_high, its kernel attention_kernel0)."""
    kernels = (case.get("model") or {}).get("kernels")
    return "regex:^(" + "|".join(sorted(kernels)) + ")" if kernels else "regex:" + case["program"]


def run(folder: str, out: str, names: list[str]) -> dict:
    import suite
    import suite_torch

    cases = {c["name"]: c for c in json.load(open(os.path.join(folder, suite.MANIFEST)))}
    results = {}
    for name in names:
        case = cases[name]
        entry = {"ours": _profile(folder, name, "ours", _our_kernels(case))}
        for peer in suite_torch.peers(case["program"], "cuda"):
            if peer in PEER_KERNELS:
                entry[peer] = _profile(folder, name, peer, PEER_KERNELS[peer])
        results[name] = entry
        print(json.dumps({name: entry})[:600], flush=True)
        os.makedirs(out, exist_ok=True)
        json.dump(results, open(os.path.join(out, "profiles.json"), "w"), indent=1)
    return results


# --- here: the table ---------------------------------------------------------------------------------
def _cell(value, digits=0) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table(results: dict) -> str:
    lines = ["| case | who | kernel | µs | DRAM % | L2 % | SM % | occupancy % | issue % | tensor pipe % | regs | grid | top stalls (cycles per issue) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, entry in results.items():
        for who, launches in entry.items():
            for launch in launches:
                if "error" in launch:
                    lines.append(f"| {name} | {who} | profile failed: {launch['error'][:80]} | | | | | | | | | | |")
                    continue
                tensor = max(launch.get("gmma_pct") or 0.0, launch.get("hmma_pct") or 0.0)
                stalls = ", ".join(f"{s} {v:.1f}" for v, s in launch["stalls"])
                lines.append(f"| {name} | {who} | `{launch['kernel'][:40]}` | {_cell(launch['time_us'], 1)} | "
                             f"{_cell(launch['dram_pct'])} | {_cell(launch.get('l2_pct'))} | {_cell(launch['sm_pct'])} | {_cell(launch['occupancy_pct'])} | "
                             f"{_cell(launch['issue_pct'])} | {_cell(tensor)} | {_cell(launch['registers'])} | "
                             f"{_cell(launch['grid'])} | {stalls} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv and argv[0] == "child":
        child(*argv[1:4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("folder")
    go.add_argument("out")
    go.add_argument("--only", required=True, help="comma-separated case names")
    show = sub.add_parser("table")
    show.add_argument("profiles")
    options = parser.parse_args(argv)
    if options.command == "run":
        run(options.folder, options.out, options.only.split(","))
    else:
        print(table(json.load(open(options.profiles))), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
