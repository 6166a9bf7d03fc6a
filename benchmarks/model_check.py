"""The hardware model against every measured kernel it can price again (issue 17: within 25%).

    python benchmarks/suite.py generate generated/suite      # here, with TVM: the modules, their plans
    python benchmarks/model_check.py generated/suite          # CPU, no GPU: the table and the counts

Each row is a measurement in benchmarks/results with the kernels that ran: a suite case (its
module's kernels at their default configs; the manifest's registers and shared memory, compiled
ahead of time for sm_90) or a sweep's row of a suite case at a stated config (resources
estimated, hardware_model.estimate_resources). A suite case whose measured run launched another
number of kernels than today's plan is skipped (its plan changed since). The model is whatever
`triton_codegen.hardware_model` is imported: this checkout's, or `--model-from` another's (the
model before a change). Rows are grouped by the result file's date, so that the model's
terms can be chosen on one day's measurements (2026-12-01) and checked on the next (2026-12-02).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

RESULTS = os.path.join(HERE, "results")
WITHIN = 0.25
# the sweeps' names of suite cases (benchmarks/gemm_tiles_gpu.py, gemm_misses_gpu.py, attention_gpu.py)
SWEEP_CASES = {"linear_8192x11008x4096": "linear_fp16_8192x11008x4096", "matmul_4096": "matmul_fp16_4096",
               "matmul_3000x5000x1000": "matmul_fp16_3000x5000x1000",
               "linear_decode_16x4096x4096": "linear_decode_fp16_16x4096x4096",
               "attention.py": "attention_fp16_b4h32s4096d128",
               "attention_causal.py": "attention_causal_fp16_b4h32s4096d128"}


# rows that did not time the kernel: gemm_tiles_gpu.py timed run() with do_bench and no graph, so a
# kernel shorter than the host's call measured the call (the decode step: 58.9 µs there, 19.9 in
# gemm_misses_gpu.py and 20.6 in the suite for the same kernel and config)
NOT_THE_KERNEL = {("2026-12-02-h200-gemm-tiles.json", "linear_decode_fp16_16x4096x4096")}
FIRST_DAY = "2026-12-01"   # earlier runs measured plans two days older (the suite's kernels then)


def load_plans(folder: str) -> dict[str, dict]:
    """{case: {"sizes", "kernels": {name: {"summary", "config", "resources"}}}} of a generated suite."""
    from triton_codegen.loader import import_module

    with open(os.path.join(folder, "suite_cases.json")) as handle:
        manifest = json.load(handle)
    plans = {}
    for entry in manifest:
        module = import_module(os.path.join(folder, entry["module"]), interpret=False)
        recorded = (entry.get("model") or {}).get("kernels") or {}
        kernels = {}
        for name, _launch in module.LAUNCHERS:
            config = dict(module.CONFIGS[name][module.CHOSEN[name]])
            if module.TILE_SUMMARY[name].get("group_m"):
                config.setdefault("GROUP_M", module.TILE_SUMMARY[name]["group_m"])
            kernels[name] = {"summary": module.TILE_SUMMARY[name], "config": config,
                             "resources": (recorded.get(name) or {}).get("resources")}
        plans[entry["name"]] = {"sizes": entry["shape_vars"], "kernels": kernels}
    return plans


def measurements(results: str = RESULTS) -> list[dict]:
    """Every row: {"source", "day", "case", "variant", "us", "configs": {kernel: config} or None (defaults),
    "kernels": kernels launched or None}."""
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "*.json"))):
        name = os.path.basename(path)
        with open(path) as handle:
            data = json.load(handle)
        day = name[:10]
        if isinstance(data, dict) and "cases" in data and isinstance(data["cases"], list) and "copy" in data:
            for case in data["cases"]:
                us = (case.get("ours") or {}).get("us")
                if us and (case.get("ours") or {}).get("ok", True):
                    rows.append(dict(source=name, day=day, case=case["name"], variant="suite", us=us, configs=None,
                                     kernels=case.get("kernels"), device=(data.get("meta") or {}).get("device")))
        elif "gemm-tiles" in name or "gemm-misses" in name:
            for row in data:
                if row.get("config") and row.get("us") and "switched off" not in json.dumps(row.get("ran") or ""):
                    rows.append(_sweep_row(name, day, SWEEP_CASES.get(row["case"]), row["variant"], row["us"],
                                           row["config"]))
        elif "attention-tiles" in name:
            for module in data:
                for variant, row in module["variants"].items():
                    if "pointers" not in variant:
                        rows.append(_sweep_row(name, day, SWEEP_CASES.get(module["module"]), variant, row["us"],
                                               row["config"]))
        elif "swiglu-multi-dot" in name:
            for row in data["rows"]:
                if row.get("config") and row.get("us"):
                    rows.append(_sweep_row(name, day, "swiglu_fp16_4096x11008x4096", row["variant"], row["us"],
                                           row["config"]))
    return [row for row in rows if row["case"] and row["day"] >= FIRST_DAY
            and (row["source"], row["case"]) not in NOT_THE_KERNEL]


def _sweep_row(source, day, case, variant, us, config) -> dict:
    return dict(source=source, day=day, case=case, variant=variant, us=us, configs={"*": config}, kernels=1,
                device=None)


def row_gpu(row: dict, default: str = "H200"):
    """The spec a row is priced on: the sm_90 part its run names (a suite run's meta; a sweep's file
    name, `...-h100-...`), else `default` (the sweeps of 2026-12-01 and 02 all ran on the H200; the
    plans' registers are compiled for sm_90, so another generation is not priced on its own figures)."""
    from tir_passes.contracts.gpu_specs import gpu_of_part, gpu_spec

    named = gpu_of_part(row.get("device") or " ".join(row["source"].replace(".json", "").split("-")))
    return named if named is not None and named.compute_capability == 90 else gpu_spec(default)


def predict_row(row: dict, plans: dict, spec) -> tuple[float, str] | None:
    """The model's µs and bound of a row's kernels, or None where today's plan cannot stand for it."""
    from triton_codegen import hardware_model

    plan = plans.get(row["case"])
    if plan is None or (row["kernels"] is not None and row["kernels"] != len(plan["kernels"])):
        return None
    total, bounds = 0.0, []
    for name, kernel in plan["kernels"].items():
        config = (row["configs"] or {}).get("*") or (row["configs"] or {}).get(name) or kernel["config"]
        resources = None
        if config == kernel["config"] and kernel["resources"]:
            resources = hardware_model.Resources(**kernel["resources"])
        prediction = hardware_model.predict(kernel["summary"], config, spec, plan["sizes"], resources)
        total += prediction.seconds * 1e6
        bounds.append(prediction.bound)
    return total, "+".join(sorted(set(bounds)))


def table(rows: list[dict], plans: dict, gpu: str = "H200") -> tuple[list[tuple], dict[str, list[int]]]:
    """The priced rows (source, case, variant, measured, predicted, measured/predicted, bound), each on
    the GPU it ran on (`gpu` where a row does not say), and per day, and per day's suite runs and
    sweeps, [within 25%, priced]."""
    priced, counts = [], {}
    for row in rows:
        predicted = predict_row(row, plans, row_gpu(row, gpu))
        if predicted is None:
            continue
        us, bound = predicted
        ratio = row["us"] / us
        for key in (row["day"], f"{row['day']} {'suite' if row['variant'] == 'suite' else 'sweeps'}"):
            counts.setdefault(key, [0, 0])
            counts[key][0] += abs(ratio - 1) <= WITHIN
            counts[key][1] += 1
        priced.append((row["source"], row["case"], row["variant"], row["us"], us, ratio, bound))
    return priced, counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a generated suite (benchmarks/suite.py generate DIR)")
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--misses", action="store_true", help="print only the rows outside 25%%")
    parser.add_argument("--model-from", help="a checkout whose triton_codegen and tir_passes price the rows")
    args = parser.parse_args(argv)
    if args.model_from:
        sys.path.insert(0, os.path.abspath(args.model_from))
    priced, counts = table(measurements(args.results), load_plans(args.folder))
    print(f"{'source':38} {'case':48} {'variant':34} {'measured':>9} {'model':>9} {'ratio':>6}  bound")
    for source, case, variant, measured, predicted, ratio, bound in priced:
        if args.misses and abs(ratio - 1) <= WITHIN:
            continue
        mark = "" if abs(ratio - 1) <= WITHIN else "  <-"
        print(f"{source[:38]:38} {case[:48]:48} {variant[:34]:34} {measured:9.1f} {predicted:9.1f} {ratio:6.2f}"
              f"  {bound}{mark}")
    for day, (within, total) in sorted(counts.items()):
        print(f"{day}: {within} of {total} within {WITHIN:.0%} (measured / model in [{1 - WITHIN:.2f}, {1 + WITHIN:.2f}])")


if __name__ == "__main__":
    main()
