"""On the GPU (torch + triton only, no TVM): the memory-bound kernels of issue 17 over the configs the
tuner may choose, each beside torch.compile and a device copy of the same bytes, in one call.

    python benchmarks/elementwise_probe_generate.py generated/elementwise_probe          # here (TVM)
    python3 benchmarks/elementwise_probe_gpu.py generated/elementwise_probe OUT/elementwise_probe.json \\
        [--deadline 50] [--only transpose_fp32_4096,...]                                # on the GPU, < 60 s

Per case (benchmarks/suite_cases.py's, modules and manifest from suite.generate): a copy_ of a
uint8 tensor moving the case's bytes (half read, half written), torch.compile of the suite's peer,
then each variant of variants.json: run() with that config (gpu_timing.assigned), its output
checked against float64 first (the suite's limits), then timed twice, do_bench's median with the
Python launches ("us") and a CUDA graph's replay ("graph_us": the GPU alone); both against the
copy ("of_copy": copy time / ours) and torch.compile ("x_compile": its time / ours). A variant
"descriptors forced" runs the kernel's `_tma` variant where the runtime would take the pointer
kernel (every tile divides). Each case has its share of the deadline; variants past it are listed
as skipped. The JSON is rewritten after every row; its summary holds each case's best variant.
"""

from __future__ import annotations

import json
import os
import sys
import time

from probe_common import ROOT, RowLog, bench_us, failure, graph_us, instruction_counts, load_module, write_json

DEADLINE_S = 45.0    # the timed part; with the imports and the clocks' warm-up the call stays under 60 s
REP_MS, WARMUP_MS = 15, 5
ORDER = ("transpose", "bias_gelu_residual", "rmsnorm", "layernorm")   # the misses first, softmax last
MANIFEST, VARIANTS = "suite_cases.json", "variants.json"


def run(folder: str, out: str, device: str = "cuda", deadline_s: float = DEADLINE_S,
        only: set[str] | None = None) -> dict:
    import torch

    sys.path.insert(0, ROOT)
    import suite

    began = time.perf_counter()
    with open(os.path.join(folder, MANIFEST)) as handle:
        cases = sorted((c for c in json.load(handle) if not only or c["name"] in only), key=_priority)
    with open(os.path.join(folder, VARIANTS)) as handle:
        table = json.load(handle)
    header = {"device": torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton's interpreter)",
              "torch": torch.__version__}
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    log = RowLog(out, header=header)
    if device == "cuda":
        suite._raise_clocks()
    weights = [len(table[c["name"]]) + 4 for c in cases]   # + the peers' compiles
    for index, case in enumerate(cases):   # each case's share of the time left, as it starts
        left = began + deadline_s - time.perf_counter()
        ends = time.perf_counter() + max(0.0, left) * weights[index] / sum(weights[index:])
        _run_case(folder, case, table[case["name"]], device, log, ends)
        if device == "cuda":
            torch.cuda.empty_cache()
    result = dict(header, seconds=round(time.perf_counter() - began, 1), rows=log.rows, summary=summary(log.rows))
    if out:
        write_json(out, result)
    for line in result["summary"]:
        print(json.dumps(line))
    return result


def _priority(case: dict) -> int:
    return next((i for i, prefix in enumerate(ORDER) if case["program"].startswith(prefix)), len(ORDER))


def _run_case(folder: str, case: dict, variants: list[dict], device: str, log: RowLog, ends: float) -> None:
    import suite
    import suite_torch

    name, timed = case["name"], device == "cuda"
    try:
        module = load_module(os.path.join(folder, case["module"]), "probe_" + name)
        args = suite._arguments(case, device)
        expected = suite_torch.reference(case["program"], args)
    except Exception as err:  # noqa: BLE001 - reported, the other cases go on
        log.emit({"case": name, "failed": failure(err, 500)})
        return
    limit = suite._error_limit(case)
    copy = _copy(case["bytes"], device) if timed else {}
    log.emit({"case": name, "peer": "copy", **copy})
    compiled = _peer(case, args, expected, limit, device)
    log.emit({"case": name, "peer": "torch.compile", **compiled})
    for variant in variants:
        row = {"case": name, "variant": variant["label"], "assignment": variant["assignment"]}
        if "listing" in variant:
            row["listing"] = variant["listing"]
        if time.perf_counter() > ends and variant["label"] != "default":
            log.emit(dict(row, skipped="past the case's share of the deadline"))
            continue
        try:
            row.update(_variant(module, variant, args, expected, limit, timed))
        except Exception as err:  # noqa: BLE001 - reported, the rest goes on
            row["failed"] = failure(err)
        log.emit(_ratios(row, case["bytes"], copy, compiled))


def _variant(module, variant: dict, args, expected: dict, limit: float, timed: bool) -> dict:
    from triton_codegen.gpu_timing import assigned

    forced = variant.get("descriptors") == "forced"
    saved = getattr(module, "_tiles_divide", None)   # in modules whose kernels have `_tma` variants
    _forget_launches(module)
    if forced:   # the `_tma` variant taken where every tile divides (the runtime's rule picks pointers)
        module._tiles_divide = lambda tensor, block: False
    try:
        with assigned(module, variant["assignment"]):
            for index in expected:   # poisoned as the suite does: NaN, an integer output its lowest value
                args[index].fill_(float("nan") if args[index].is_floating_point() else _lowest(args[index]))
            module.run(*args)
            row = _checked(args, expected, limit)
            row["ran"] = dict(module.VARIANTS_RUN)
            if timed:
                row["ptx"] = _launched_ptx(module, args, variant["assignment"])
            if timed and row["ok"]:
                row["us"] = bench_us(lambda: module.run(*args), rep=REP_MS, warmup=WARMUP_MS)
                row["graph_us"] = graph_us(lambda: module.run(*args), rep=REP_MS, warmup=WARMUP_MS)
    finally:
        if saved is not None:
            module._tiles_divide = saved
        _forget_launches(module)
    return row


def _lowest(tensor) -> int:
    import torch

    return torch.iinfo(tensor.dtype).min


def _launched_ptx(module, args, assignment: dict) -> dict:
    """What this GPU's Triton compiled for each kernel (its launch's handle): the memory
    instructions, as the generate side counts them for sm_90 with the Triton there."""
    counts = {}
    try:
        t, s = module._prepare(args, {})
        for name, launch in module.LAUNCHERS:
            handle = launch(t, s, assignment[name])
            counts[name] = instruction_counts(handle.asm["ptx"]) if handle is not None else None
    except Exception as err:  # noqa: BLE001 - the listing is extra: the row keeps its timings
        counts["failed"] = failure(err)
    return counts


def _forget_launches(module) -> None:
    """Drop the module's cached variant choices and recorded launches: both are keyed by the config
    and the tensors, not by the forcing, so a forced variant's would be replayed by the next."""
    for cache in ("_CHOSEN_VARIANT", "_REPLAYS"):
        getattr(module, cache, {}).clear()


def _checked(args, expected: dict, limit: float) -> dict:
    import suite

    errors = {str(index): suite._relative_error(args[index], value) for index, value in expected.items()}
    return {"rel_error": errors, "ok": all(error < limit for error in errors.values())}


def _copy(case_bytes: int, device: str) -> dict:
    """A device copy moving the case's bytes: half of them read, half written."""
    import torch

    source = torch.empty(case_bytes // 2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return {"bytes": 2 * source.numel(), "us": bench_us(lambda: target.copy_(source), rep=REP_MS, warmup=WARMUP_MS),
            "graph_us": graph_us(lambda: target.copy_(source), rep=REP_MS, warmup=WARMUP_MS)}


def _peer(case: dict, args, expected: dict, limit: float, device: str) -> dict:
    import suite
    import suite_torch

    try:
        peer = suite_torch.peers(case["program"], device)["torch.compile"]
        started = time.perf_counter()
        output = {"value": peer(args)}
        entry = {"compile_s": round(time.perf_counter() - started, 1)}
        produced = suite._peer_output(output, expected)
        entry.update(_checked(produced, {index: expected[index] for index in produced}, limit))
        if device == "cuda":
            entry["us"] = bench_us(lambda: peer(args), rep=REP_MS, warmup=WARMUP_MS)
            entry["graph_us"] = graph_us(lambda: peer(args), rep=REP_MS, warmup=WARMUP_MS)
        return entry
    except Exception as err:  # noqa: BLE001 - reported, ours are still timed
        return {"failed": failure(err)}


def _ratios(row: dict, case_bytes: int, copy: dict, compiled: dict) -> dict:
    for key, suffix in (("us", ""), ("graph_us", "_graph")):
        ours = row.get(key)
        if not isinstance(ours, float):
            continue
        row["tbps" + suffix] = case_bytes / ours * 1e-6
        for peer, name in ((copy, "of_copy"), (compiled, "x_compile")):
            if isinstance(peer.get(key), float):
                row[name + suffix] = peer[key] / ours
    return row


def summary(rows: list[dict]) -> list[dict]:
    """Per case: the default's and the fastest checked variant's times and ratios (graph times)."""
    lines = []
    for case in dict.fromkeys(row["case"] for row in rows):
        ran = [r for r in rows if r["case"] == case and "variant" in r and isinstance(r.get("graph_us"), float)]
        if not ran:
            continue
        best = min(ran, key=lambda r: r["graph_us"])
        default = next((r for r in ran if r["variant"] == "default"), None)
        keys = ("variant", "us", "graph_us", "of_copy_graph", "x_compile_graph", "of_copy", "x_compile")
        lines.append({"case": case, "best": {k: best.get(k) for k in keys},
                      "default": {k: default.get(k) for k in keys} if default else None})
    return lines


def _options(argv: list[str]) -> dict:
    options = {}
    if "--deadline" in argv:
        options["deadline_s"] = float(argv[argv.index("--deadline") + 1])
    if "--only" in argv:
        options["only"] = set(argv[argv.index("--only") + 1].split(","))
    return options


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    run(sys.argv[1], sys.argv[2], **_options(sys.argv[3:]))
