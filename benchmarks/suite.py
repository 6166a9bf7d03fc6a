"""The benchmark suite: every case beside what a user would run instead, in one GPU run.

    python benchmarks/suite.py generate DIR [--only a,b]     # here (TVM): DIR/<case>.py, DIR/suite_cases.json
    python benchmarks/suite.py run DIR OUT [--only a,b]      # on the GPU (torch + triton only): OUT/suite.json
    python benchmarks/suite.py table OUT/suite.json          # docs/benchmarks.md's section, benchmarks/results/
    python benchmarks/suite.py smoke [DIR] [--only a,b]      # CPU: every step, tiny sizes, Triton's interpreter

Cases: benchmarks/suite_cases.py (programs, sizes, goals); their torch side (float64 reference,
peers: torch eager, torch.compile, cuBLAS, SDPA's flash backend): benchmarks/suite_torch.py.

A run measures the device copy once (512 MiB moved: the device's figure), then per case: outputs
poisoned with NaN, the module's `run()` checked against the float64 reference, then timed; for a
memory-bound case (a copy-fraction goal) a copy of its own floor bytes, timed beside it, is what
its goal divides by (suite_report.copy_fraction); if the module has tensor-descriptor
variants, the same with them switched off (the pointer kernels, the sm_80 path); each peer checked
and timed; then ours and the peers timed again, the best round kept. Cases run in a worker
process that the parent watches: a case past its own limit (a kernel compiling for minutes) is
killed and reported, the next one starts in a fresh worker, and the whole run stops at the
deadline (240 s, compiles included). OUT/suite.json is rewritten after every case, so a run cut
short keeps what it measured; OUT/section.md is the table `table` would write.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import suite_report  # noqa: E402

MANIFEST = "suite_cases.json"
DEADLINE_S = 240.0          # the whole run, compiles included
CASE_LIMIT_S = 75.0         # one case, its compiles included
SMOKE_DEADLINE_S = 900.0
STEP_MARGIN_S = 8.0         # an optional step (pointers, a peer, a second round) needs this much time left
BENCH_WARMUP_MS, BENCH_REP_MS = 10, 40
COPY_BYTES = 256 * 2**20


# --- generate (here, with TVM) ----------------------------------------------------------------
def generate(folder: str, profile: str = "full", only: set[str] | None = None) -> list[dict]:
    """Compile each case's program at the profile's sizes into `folder`; write the manifest."""
    from lowering.rewrites.tile_access import with_tile_accesses
    from suite_cases import CASES
    from triton_codegen import compile
    from triton_codegen.descriptors import plan_descriptors

    os.makedirs(folder, exist_ok=True)
    entries = []
    for case in CASES:
        if only and case.name not in only:
            continue
        sizes = getattr(case, profile)
        started = time.perf_counter()
        kernel = compile(case.make(sizes), verify=False, deterministic=case.deterministic, **case.options)
        shape_vars = case.shape_vars(sizes)
        program = with_tile_accesses(kernel.program)
        entries.append({
            "name": case.name, "program": case.program, "module": os.path.basename(kernel.save(os.path.join(folder, case.name + ".py"))),
            "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "written": p.written,
                        "shape": [d if isinstance(d, int) else shape_vars[d] for d in p.shape]}
                       for p in kernel.program.params],
            "shape_vars": shape_vars, "sizes": sizes, "bytes": case.bytes(sizes), "flops": case.flops(sizes),
            "kernels": len(program.kernels),
            "descriptor_kernels": [k.name for k in program.kernels if plan_descriptors(k) is not None],
            "goal": case.goal.as_json(), "deterministic": case.deterministic,
            "generate_s": round(time.perf_counter() - started, 2),
            "float32_matmul_precision": kernel.program.float32_matmul_precision,
            "model": _model(kernel, shape_vars),
            **_training_entry(case, sizes, folder, shape_vars)})
        print(f"{case.name}: {entries[-1]['kernels']} kernel(s) in {entries[-1]['generate_s']:.1f}s", flush=True)
    with open(os.path.join(folder, MANIFEST), "w") as handle:
        json.dump(entries, handle, indent=1)
    return entries


def _training_entry(case, sizes: dict, folder: str, shape_vars: dict) -> dict:
    """A backward with saved values: its training forward's module (run first, untimed, to make them) and its
    parameters; the backward's parameters that are the saved values."""
    if case.training is None:
        return {}
    from tir_passes.contracts.autodiff import signature
    from triton_codegen import compile

    kernel = compile(case.training(sizes), verify=False, deterministic=case.deterministic, **case.options)
    path = kernel.save(os.path.join(folder, case.name + "_training.py"))
    params = [{"name": p.name, "dtype": p.dtype, "shape": [d if isinstance(d, int) else shape_vars[d] for d in p.shape]}
              for p in kernel.program.params]
    saved = list(signature(case.make(sizes)).saved)
    return {"training": {"module": os.path.basename(path), "params": params, "saved": saved}}


def _model(kernel, shape_vars: dict) -> dict:
    """The hardware model's time of run() at the default configs, each kernel compiled ahead of time
    for sm_90 for its registers and shared memory (triton_codegen/model_report.py), on the H200;
    per kernel its config and resources, so that benchmarks/model_check.py can price it again."""
    from triton_codegen.model_report import model_rows

    try:
        rows = model_rows(kernel, "H200", shape_vars, top=0)
    except Exception as err:  # noqa: BLE001 - the table says the model is missing, the case still runs
        return {"error": f"{type(err).__name__}: {err}"[:500]}
    kernels = {row.kernel: {"us": row.prediction.seconds * 1e6, "bound": row.prediction.bound, "config": row.config,
                            "resources": dataclasses.asdict(row.prediction.resources)} for row in rows}
    return {"gpu": "H200", "us": sum(k["us"] for k in kernels.values()), "kernels": kernels}


def _model_on_this_gpu(model: dict | None, module, shape_vars: dict, device_name: str) -> dict | None:
    """The manifest's model priced again for the GPU the run is on (its entry in
    tir_passes/contracts/gpu_specs.py, `gpu_of_part`), where that is another sm_90 part than the one
    it was priced for: the same configs, registers and shared memory (compiled ahead of time for
    sm_90), only the GPU's figures change (an H100's copy bandwidth is 0.7 of an H200's). Else the
    manifest's model; where pricing fails, the manifest's model with the reason (the case still runs)."""
    from tir_passes.contracts.gpu_specs import gpu_of_part
    from triton_codegen.hardware_model import Resources, predict

    spec = gpu_of_part(device_name)
    if not model or not model.get("kernels") or spec is None or spec.name == model.get("gpu") \
            or spec.compute_capability != 90:
        return model
    try:
        kernels = {}
        for name, priced in model["kernels"].items():
            prediction = predict(module.TILE_SUMMARY[name], priced["config"], spec, shape_vars,
                                 Resources(**priced["resources"]))
            kernels[name] = {**priced, "us": prediction.seconds * 1e6, "bound": prediction.bound}
    except Exception as err:  # noqa: BLE001 - the measurement matters more than its prediction
        return {**model, "reprice_error": f"{spec.name}: {type(err).__name__}: {err}"[:500]}
    return {"gpu": spec.name, "generated_for": model["gpu"], "us": sum(k["us"] for k in kernels.values()),
            "kernels": kernels}


def price_for_the_run(results: dict, folder: str) -> None:
    """Each case's model priced for the GPU the run names (`_model_on_this_gpu`), from the modules and
    manifest of `folder`: for a run made before the worker priced it. In place."""
    with open(os.path.join(folder, MANIFEST)) as handle:
        entries = {entry["name"]: entry for entry in json.load(handle)}
    for case in results["cases"]:
        entry = entries.get(case["name"])
        if entry is not None and case.get("model"):
            module = _load(os.path.join(folder, entry["module"]))
            case["model"] = _model_on_this_gpu(case["model"], module, entry["shape_vars"],
                                               results["meta"].get("device", ""))


# --- run (the parent: workers, limits, the JSON) -----------------------------------------------
def run(folder: str, out: str, *, smoke: bool = False, only: set[str] | None = None,
        deadline_s: float = DEADLINE_S, case_limit_s: float = CASE_LIMIT_S, command: str | None = None) -> dict:
    started = time.time()
    deadline = started + deadline_s
    with open(os.path.join(folder, MANIFEST)) as handle:
        cases = [c for c in json.load(handle) if not only or c["name"] in only]
    os.makedirs(out, exist_ok=True)
    results = {"meta": {"date": datetime.date.today().isoformat(), "folder": folder, "smoke": smoke,
                        "command": command or f"python benchmarks/suite.py run {folder} {out}"},
               "copy": None, "cases": []}
    pending = [c["name"] for c in cases]
    events = os.path.join(out, "events.jsonl")
    open(events, "w").close()
    while pending and time.time() < deadline:
        pending = _watch_worker(folder, events, pending, deadline, case_limit_s, smoke, results, out)
    for name in pending:
        entry = next(c for c in cases if c["name"] == name)
        results["cases"].append({"name": name, "kernels": entry["kernels"], "skipped": "the run's deadline passed"})
    results["meta"]["total_s"] = round(time.time() - started, 1)
    _write(results, out)
    return results


def _watch_worker(folder, events, pending, deadline, case_limit_s, smoke, results, out) -> list[str]:
    """Run the pending cases in one worker until it ends or is stopped; returns those left."""
    env = dict(os.environ, TRITON_INTERPRET="1" if smoke else "0")
    arguments = [sys.executable, os.path.abspath(__file__), "worker", folder, events, str(deadline),
                 "smoke" if smoke else "gpu", "copy" if results["copy"] is None else "no-copy", *pending]
    with open(os.path.join(out, "worker.log"), "a") as log:
        worker = subprocess.Popen(arguments, env=env, stdout=log, stderr=subprocess.STDOUT)
    reader = _EventReader(events)
    current, since = None, time.time()
    pending = list(pending)
    while True:
        ended = worker.poll() is not None  # before reading: the events it wrote before it ended are read below
        for event in reader.new():
            if event["event"] == "meta":
                results["meta"].update(event["meta"])
            elif event["event"] == "copy":
                results["copy"] = event["copy"]
            elif event["event"] == "start":
                current, since = event["case"], time.time()
            elif event["event"] == "done":
                results["cases"].append(event["result"])
                pending.remove(event["case"])
                current = None
            _write(results, out)
        if ended:
            if current is not None:  # it died inside a case: that case is the culprit
                results["cases"].append({"name": current, "error": f"the worker died (exit {worker.returncode}); "
                                         "see worker.log"})
                pending.remove(current)
                _write(results, out)
            return pending
        now = time.time()
        if current is not None and (now - since > case_limit_s or now > deadline):
            worker.kill()
            worker.wait()
            why = "the run's deadline" if now > deadline else f"its {case_limit_s:.0f} s limit"
            results["cases"].append({"name": current, "skipped": f"stopped after {now - since:.0f} s at {why} "
                                     "(compiles included)"})
            pending.remove(current)
            _write(results, out)
            return pending
        time.sleep(0.2)


class _EventReader:
    """The JSON lines a worker appends to the events file, each read once."""

    def __init__(self, path: str):
        self.path, self.offset = path, os.path.getsize(path)

    def new(self) -> list[dict]:
        with open(self.path) as handle:
            handle.seek(self.offset)
            text = handle.read()
        complete = text[:text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def _write(results: dict, out: str) -> None:
    with open(os.path.join(out, "suite.json"), "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    with open(os.path.join(out, "section.md"), "w") as handle:
        handle.write(suite_report.section(results))


# --- the worker (torch + triton only) ----------------------------------------------------------
def worker(folder: str, events: str, deadline: float, mode: str, copy: str, names: list[str]) -> None:
    import torch
    import triton

    import suite_torch  # noqa: F401 - fails here, early, if the torch side cannot load

    device = "cpu" if mode == "smoke" else "cuda"
    emit = _Emitter(events)
    gpu_name = torch.cuda.get_device_name() if device == "cuda" else "CPU (Triton's interpreter)"
    emit("meta", meta={"device": gpu_name,
                       "torch": torch.__version__, "triton": triton.__version__})
    timer = _Timer(device)
    if copy == "copy":
        if device == "cuda":
            _raise_clocks()
        copy_entry = _copy_bandwidth(device, timer)
        copy_entry.pop("call")
        emit("copy", copy=copy_entry)
    with open(os.path.join(folder, MANIFEST)) as handle:
        cases = {c["name"]: c for c in json.load(handle)}
    for name in names:
        emit("start", case=name)
        emit("done", case=name, result=_run_case(folder, cases[name], device, gpu_name, timer, deadline))
        if device == "cuda":
            torch.cuda.empty_cache()


class _Emitter:
    def __init__(self, path: str):
        self.path = path

    def __call__(self, event: str, **fields) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps({"event": event, **fields}, default=str) + "\n")


class _Timer:
    """Median microseconds of one call: triton.testing.do_bench on a GPU, a few timed calls on the CPU."""

    def __init__(self, device: str):
        self.device = device

    def __call__(self, function) -> float:
        if self.device == "cuda":
            from triton.testing import do_bench

            return 1e3 * do_bench(function, warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS, return_mode="median")
        times = []
        for _ in range(3):
            started = time.perf_counter()
            function()
            times.append(time.perf_counter() - started)
        return 1e6 * sorted(times)[1]


def _raise_clocks(seconds: float = 1.0) -> None:
    """GPU clocks idle at a few hundred MHz: keep the GPU busy before the first timing."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def _copy_bandwidth(device: str, timer: _Timer, moved: int | None = None) -> dict:
    """A device copy timed: of COPY_BYTES (the device's figure; a MiB on the CPU), or one that moves
    `moved` bytes (read + write: half read, half written), a case's own floor bytes."""
    import torch

    size = (COPY_BYTES if device == "cuda" else 2**20) if moved is None else max(1, moved // 2)
    source = torch.empty(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    call = lambda: target.copy_(source)  # noqa: E731 - timed twice, the same call
    us = timer(call)
    return {"bytes": 2 * size, "us": us, "gbps": 2 * size / (us * 1e3), "call": call}


def _case_copy(case: dict, device: str, timer: _Timer) -> tuple[dict | None, object]:
    """A memory-bound case (a copy-fraction goal): a copy of its own floor bytes, timed beside it
    (a copy's rate depends on its size: 128 MiB reaches less than the device figure's 512 MiB).
    (entry, the timed call for the second round), or (None, None) for a case without that goal."""
    if (case.get("goal") or {}).get("copy_fraction") is None or not case.get("bytes"):
        return None, None
    try:
        entry = _copy_bandwidth(device, timer, case["bytes"])
    except Exception as err:  # noqa: BLE001 - the goal then falls back to the device copy
        return {"error": f"{type(err).__name__}: {err}"[:500]}, None
    return entry, entry.pop("call")


def _run_case(folder: str, case: dict, device: str, gpu_name: str, timer: _Timer, deadline: float) -> dict:
    """Check and time ours, ours without descriptors, and each peer; every step contained."""
    import suite_torch

    result = {key: case[key] for key in ("name", "program", "kernels", "descriptor_kernels", "bytes", "flops",
                                          "goal", "sizes")}
    result["model"] = case.get("model")
    try:
        module = _load(os.path.join(folder, case["module"]))
        result["model"] = _model_on_this_gpu(case.get("model"), module, case["shape_vars"], gpu_name)
        args = _arguments(case, device)
        _fill_saved_values(folder, case, args, device)
        plain, positions = _without_saved(case, args)
        expected = {positions[k]: v for k, v in suite_torch.reference(case["program"], plain).items()}
        peers = {name: _on_plain(peer, case) for name, peer in suite_torch.peers(case["program"], device).items()}
    except Exception as err:  # noqa: BLE001 - reported in the table, the other cases go on
        result["error"] = f"{type(err).__name__}: {err}"[:2000]
        return result
    limit = _error_limit(case)
    result["ours"] = _check_and_time(lambda: module.run(*args), lambda: _outputs(args, expected), expected,
                                     limit, timer)
    result["variants"] = dict(getattr(module, "VARIANTS_RUN", {}))
    copy_entry, copy_call = _case_copy(case, device, timer)
    if copy_entry is not None:
        result["copy"] = copy_entry
    if case["descriptor_kernels"]:
        result["pointers"] = _without_descriptors(module, args, expected, limit, timer, deadline)
    result["peers"] = {}
    for name, peer in peers.items():
        if time.time() > deadline - STEP_MARGIN_S:
            result["peers"][name] = {"skipped": "the run's deadline is near"}
            continue
        output = {}
        result["peers"][name] = _check_and_time(lambda peer=peer: output.update(value=peer(args)),
                                                lambda: _peer_output(output, expected), expected, limit, timer)
    if time.time() < deadline - STEP_MARGIN_S:
        _second_round(result, module, args, peers, timer, copy_call)
    return result


def _load(path: str):
    import importlib.util

    name = "suite_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _arguments(case: dict, device: str) -> list:
    """Random inputs (seeded) in parameter order; outputs poisoned, so an element never written shows."""
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    args = []
    for param in case["params"]:
        if param["kind"] == "scalar":
            args.append(case["shape_vars"][param["name"]])
            continue
        dtype = getattr(torch, param["dtype"])
        tensor = torch.randn(param["shape"], generator=generator, device=device, dtype=torch.float32).to(dtype)
        if param["written"]:   # an integer output cannot hold NaN: its lowest value, which no case writes
            tensor.fill_(float("nan") if tensor.is_floating_point() else torch.iinfo(dtype).min)
        args.append(tensor)
    return args


def _fill_saved_values(folder: str, case: dict, args: list, device: str) -> None:
    """A backward with saved values: run its training forward (our module, what a user runs) on the case's
    inputs and put the values it saves where the backward takes them (untimed)."""
    training = case.get("training")
    if training is None:
        return
    import torch

    module = _load(os.path.join(folder, training["module"]))
    by_name = {p["name"]: a for p, a in zip(case["params"], args)}
    tensors = [by_name[p["name"]] if p["name"] in by_name and p["name"] not in training["saved"]
               else torch.empty(p["shape"], dtype=getattr(torch, p["dtype"]), device=device)
               for p in training["params"]]
    module.run(*tensors)
    made = {p["name"]: t for p, t in zip(training["params"], tensors)}
    for index, param in enumerate(case["params"]):
        if param["name"] in training["saved"]:
            args[index] = made[param["name"]]


def _without_saved(case: dict, args: list) -> tuple[list, dict]:
    """(the arguments without the saved values, as the torch side takes a backward's: inputs, output gradient,
    gradients; {index among those: index among all})."""
    saved = set((case.get("training") or {}).get("saved", ()))
    kept = [index for index, param in enumerate(case["params"]) if param["name"] not in saved]
    return [args[index] for index in kept], dict(enumerate(kept))


def _on_plain(peer, case: dict):
    return lambda args: peer(_without_saved(case, args)[0])


def _error_limit(case: dict) -> float:
    """Relative error allowed: 2e-2 when 16-bit data is involved or fp32 tl.dots round their
    operands (float32_matmul_precision high or medium), else 1e-4."""
    sixteen = any(p["dtype"] in ("float16", "bfloat16") for p in case["params"] if p["kind"] == "buffer")
    rounded = case.get("float32_matmul_precision", "highest") != "highest"
    return 2e-2 if sixteen or rounded else 1e-4


def _outputs(args, expected) -> dict:
    return {index: args[index] for index in expected}


def _peer_output(output: dict, expected: dict) -> dict:
    if isinstance(output["value"], (tuple, list)):  # a backward: the gradients, in parameter order
        return dict(zip(expected, output["value"]))
    (index,) = expected
    return {index: output["value"]}


def _relative_error(out, ref) -> float:
    if out.shape != ref.shape:
        return float("inf")
    diff = (out.double() - ref).norm().item()
    value = diff / max(ref.norm().item(), 1e-30)
    return value if value == value else float("inf")  # NaN (a poisoned element left) fails


def _check_and_time(call, produced, expected, limit: float, timer: _Timer) -> dict:
    """Call once (compiles), compare with the reference, then time the call."""
    entry = {}
    try:
        started = time.perf_counter()
        call()
        _synchronize()
        entry["first_call_s"] = round(time.perf_counter() - started, 3)
        errors = {str(index): _relative_error(value, expected[index]) for index, value in produced().items()}
        entry.update(rel_error=errors, ok=all(e < limit for e in errors.values()), us=timer(call))
    except Exception as err:  # noqa: BLE001 - reported in the table
        entry["error"] = f"{type(err).__name__}: {err}"[:2000]
    return entry


def _without_descriptors(module, args, expected, limit, timer, deadline) -> dict:
    if time.time() > deadline - STEP_MARGIN_S:
        return {"skipped": "the run's deadline is near"}
    module.USE_DESCRIPTORS = False
    try:
        entry = _check_and_time(lambda: module.run(*args), lambda: _outputs(args, expected), expected, limit, timer)
        entry["variants"] = dict(module.VARIANTS_RUN)
    finally:
        module.USE_DESCRIPTORS = True
    return entry


def _second_round(result: dict, module, args, peers: dict, timer: _Timer, copy_call=None) -> None:
    """Time ours, the peers and the case's copy once more, interleaved; keep each one's best round."""
    rounds = [(result["ours"], lambda: module.run(*args))]
    rounds += [(result["peers"][name], lambda peer=peer: peer(args)) for name, peer in peers.items()]
    if copy_call is not None:
        rounds.append((result["copy"], copy_call))
    for entry, call in rounds:
        if entry.get("us") is None:
            continue
        try:
            again = timer(call)
        except Exception:  # noqa: BLE001 - the first round stands
            continue
        entry["rounds_us"] = [entry["us"], again]
        entry["us"] = min(entry["us"], again)
        if "gbps" in entry:  # the case's copy
            entry["gbps"] = entry["bytes"] / (entry["us"] * 1e3)


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        torch.cuda.synchronize()


# --- the command line ------------------------------------------------------------------------
def _only(text: str | None) -> set[str] | None:
    return set(text.split(",")) if text else None


def main(argv: list[str]) -> int:
    if argv and argv[0] == "worker":  # the parent's subprocess: folder events deadline mode copy names...
        folder, events, deadline, mode, copy, *names = argv[1:]
        worker(folder, events, float(deadline), mode, copy, names)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    generating = commands.add_parser("generate", help="compile every case into DIR (needs TVM)")
    generating.add_argument("folder")
    generating.add_argument("--only", help="comma-separated case names")
    running = commands.add_parser("run", help="check and time every case on the GPU")
    running.add_argument("folder")
    running.add_argument("out")
    running.add_argument("--only", help="comma-separated case names")
    running.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds for the whole run")
    running.add_argument("--case-limit", type=float, default=CASE_LIMIT_S, help="seconds for one case")
    table = commands.add_parser("table", help="write docs/benchmarks.md's section and keep the JSON")
    table.add_argument("json")
    table.add_argument("--generated", help="the run's generated folder: price its model for the run's GPU "
                                           "(a run made before `run` did)")
    smoke = commands.add_parser("smoke", help="every step at tiny sizes on the CPU, in Triton's interpreter")
    smoke.add_argument("folder", nargs="?")
    smoke.add_argument("--only", help="comma-separated case names")
    options = parser.parse_args(argv)
    if options.command == "generate":
        generate(options.folder, "full", _only(options.only))
        return 0
    if options.command == "run":
        results = run(options.folder, options.out, only=_only(options.only), deadline_s=options.deadline,
                      case_limit_s=options.case_limit, command="python benchmarks/suite.py " + " ".join(argv))
        print(suite_report.section(results))
        return 0 if _all_correct(results) else 1
    if options.command == "table":
        results = suite_report.load(options.json)
        if options.generated:
            price_for_the_run(results, options.generated)
        suite_report.rewrite_docs(results)
        print(f"docs/benchmarks.md rewritten; the JSON kept as {suite_report.keep_results(options.json, results)}")
        return 0
    return smoke_run(options.folder, _only(options.only))


def smoke_run(folder: str | None = None, only: set[str] | None = None) -> int:
    """Generate at tiny sizes and run every step in Triton's interpreter; 0 when every case is correct."""
    folder = folder or tempfile.mkdtemp(prefix="tir-triton-suite-smoke-")
    generate(folder, "smoke", only)
    results = run(folder, os.path.join(folder, "out"), smoke=True, only=only, deadline_s=SMOKE_DEADLINE_S,
                  case_limit_s=SMOKE_DEADLINE_S, command=f"python benchmarks/suite.py smoke {folder}")
    print(suite_report.section(results))
    return 0 if _all_correct(results) else 1


def _all_correct(results: dict) -> bool:
    return all((c.get("ours") or {}).get("ok") for c in results["cases"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
