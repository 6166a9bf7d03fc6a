"""The tuner's GPU campaign (issue 12): for each case, on one GPU,

  (a) the exhaustive search of the tuner's space: every config of every kernel's space timed
      (a multi-kernel program: one kernel varied at a time, the others at their default, the whole
      run() timed, then the per-kernel bests together); every config is compiled first, in
      parallel worker processes that launch it once (Triton's disk cache then serves this process;
      processes, because compiling holds the GIL for long stretches);
  (b) the model-guided search with its 25-evaluation budget, replaying (a)'s timings, for seeds
      0-2: the share of the optimum it reaches and after how many evaluations it is within 98%;
  (c) `tir-triton tune`'s own path (triton_codegen.tuning.tune_module): a fresh search on real
      timings, the never-slower confirmation (default and finalists interleaved, noise measured),
      the cache (a second call must hit) and the write-back (the module re-imported shows CHOSEN);
  (d) the hardware model's prediction, with the registers and shared memory Triton reported,
      beside the measurement: the default config's time, and the rank correlation over the space.

It writes OUT/tuner_results.json after every case and prints the tables as markdown.

The tuner's space is bounded by design (search_space.py: the model keeps at most --max-space
configs per kernel, default 64, within 3x of its best prediction), so (a) is exhaustive over that
space, not over every legal config; the JSON records both counts. A deadline (--deadline seconds,
default 330) keeps the whole run inside the lease: past 55% of it the precompile stops (later
configs compile when first timed), and a case that would start with less than 25 s left skips
(a) and (b).

    python benchmarks/tuner_gpu.py generate [DIR]            # here (TVM): DIR/*.py and DIR/cases.json
    python3 benchmarks/tuner_gpu.py run DIR OUT              # on the GPU: torch + triton (+ scikit-learn)
    python benchmarks/tuner_gpu.py smoke                     # here, CPU: tiny cases, interpreter, all steps

The GPU machine has no TVM: the tuner's modules are imported without running the packages'
__init__ files, which import it (`_import_tuner`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = (0, 1, 2)
TARGET = 0.98

# name, example module and maker, full-size arguments, smoke-size arguments
CASES = [
    ("matmul_fp16_4096", "matmul", "make_matmul", (4096, 4096, 4096), (67, 45, 33)),
    ("matmul_fp16_3000x5000x1000", "matmul", "make_matmul", (3000, 5000, 1000), (37, 29, 21)),
    ("matmul_bias_gelu_fp16_4096", "matmul_bias_gelu", "make_matmul_bias_gelu", (4096, 4096, 4096), (48, 40, 24)),
    ("batch_matmul_fp16_32x1024x1024x256", "batch_matmul", "make_batch_matmul", (32, 1024, 1024, 256), (2, 37, 29, 21)),
    ("softmax_fp16_16384x8192", "softmax", "make_softmax", (16384, 8192, "float16"), (37, 45, "float16")),
    ("layernorm_fp16_16384x8192", "layernorm", "make_layernorm", (16384, 8192, "float16"), (37, 45, "float16")),
    ("transpose_fp32_8192", "transpose", "make_transpose", (8192, 8192), (67, 45)),
    ("elementwise_fp32_8192", "elementwise", "make_scale_shift_relu", (8192, 8192), (67, 45)),
    ("conv2d_nhwc_fp16_32x56x56x64x64", "conv2d_nhwc", "make_conv2d_nhwc", (32, 56, 56, 64, 64), (1, 4, 5, 16, 16)),
    ("attention_scores_fp16_4096x4096x128", "attention_scores", "make_attention_scores", (4096, 4096, 128),
     (37, 45, 32)),
]


# --- here: generate the modules -----------------------------------------------------------------
def generate(out_dir: str, smoke: bool = False) -> None:
    import importlib

    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from triton_codegen import compile

    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for name, example, maker, full, tiny in CASES:
        started = time.perf_counter()
        func = getattr(importlib.import_module(example), maker)(*(tiny if smoke else full))
        kernel = compile(func, verify=False)
        path = kernel.save(os.path.join(out_dir, name + ".py"))
        entries.append({"name": name, "module": os.path.basename(path), "sizes": {},
                        "kernels": [k.name for k in kernel.program.kernels]})
        print(f"{name}: {len(kernel.program.kernels)} kernel(s) in {time.perf_counter() - started:.1f}s")
    with open(os.path.join(out_dir, "cases.json"), "w") as handle:
        json.dump(entries, handle, indent=1)


# --- there: the campaign ----------------------------------------------------------------------
def _import_tuner():
    """The tuner's modules import no TVM, but the packages' __init__ files do: stand-in packages
    with the real folders let `from triton_codegen import tuner` work without them."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    for package in ("tir_passes", "lowering", "triton_codegen"):
        if package not in sys.modules:
            stand_in = types.ModuleType(package)
            stand_in.__path__ = [os.path.join(ROOT, package)]
            sys.modules[package] = stand_in
    from triton_codegen import gpu_timing, hardware_model, loader, search_space, tuner, tuning  # noqa: F401

    return types.SimpleNamespace(gpu_timing=gpu_timing, model=hardware_model, loader=loader, space=search_space,
                                 tuner=tuner, tuning=tuning)


class Campaign:
    def __init__(self, folder: str, out_dir: str, options):
        self.folder, self.out_dir, self.options = folder, out_dir, options
        self.started = time.perf_counter()
        self.t = _import_tuner()
        self.smoke = options.smoke
        self.device = "cpu" if self.smoke else "cuda"
        with open(os.path.join(folder, "cases.json")) as handle:
            self.cases = json.load(handle)
        self.report = {"settings": vars(options), "cases": []}

    def left(self) -> float:
        return self.options.deadline - (time.perf_counter() - self.started)

    def run(self) -> int:
        import torch
        import triton

        from tir_passes.contracts.gpu_specs import gpu_for_device, gpu_spec

        if self.smoke:
            self.spec, gpu_name = gpu_spec("H200"), "H200 (smoke: CPU interpreter)"
        else:
            gpu_name = torch.cuda.get_device_name()
            major, minor = torch.cuda.get_device_capability()
            self.spec = gpu_for_device(gpu_name, major * 10 + minor)
        self.report.update(gpu=gpu_name, model_gpu=self.spec.name if self.spec else None, torch=torch.__version__,
                           triton=triton.__version__)
        print(f"GPU: {gpu_name} (model: {self.report['model_gpu']})  torch {torch.__version__}  triton {triton.__version__}",
              flush=True)
        loaded = [self._load(case) for case in self.cases]
        if not self.smoke:
            try:
                self.report["precompile"] = precompile([s for s in loaded if "error" not in s], self.options.workers,
                                                       self.started + 0.55 * self.options.deadline)
            except Exception as err:  # noqa: BLE001 - configs then compile when first timed
                self.report["precompile"] = {"error": f"{type(err).__name__}: {err}"[:500]}
            print(f"precompiled {self.report['precompile']}", flush=True)
            _busy_gpu(1.0)
        for case, state in zip(self.cases, loaded):
            started = time.perf_counter()
            try:
                result = self.run_case(case, state)
            except Exception as err:  # noqa: BLE001 - one case's failure must not end the campaign
                result = {"name": case["name"], "error": f"{type(err).__name__}: {err}"[:2000]}
            result["seconds"] = time.perf_counter() - started
            self.report["cases"].append(result)
            self._save()
            print(f"{case['name']}: {result['seconds']:.1f}s {'(' + result['error'][:200] + ')' if 'error' in result else ''}",
                  flush=True)
        self.report["seconds"] = time.perf_counter() - self.started
        self._save()
        print(tables(self.report))
        return 0

    def _load(self, case: dict) -> dict:
        try:
            return self._load_case(case)
        except Exception as err:  # noqa: BLE001 - reported with the case
            return {"error": f"loading: {type(err).__name__}: {err}"[:2000]}

    def _load_case(self, case: dict) -> dict:
        path = os.path.join(self.folder, case["module"])
        module = self.t.loader.import_module(path, interpret=self.smoke)
        args = self.t.tuning.random_arguments(module.PARAMS, case["sizes"], self.device)
        sizes = self.t.tuning.shape_sizes(module.PARAMS, args)
        spaces = self.t.tuning.module_spaces(module, self.spec, sizes, self.options.max_space)
        return {"path": path, "module": module, "args": args, "sizes": sizes, "case_sizes": case["sizes"],
                "spaces": spaces}

    def run_case(self, case: dict, state: dict) -> dict:
        """(a) to (d) while there is time: (a) and (b) need 40 s left, (c) and (d) 15 s."""
        if "error" in state:
            return {"name": case["name"], "error": state["error"]}
        module, spaces = state["module"], state["spaces"]
        result = {"name": case["name"], "kernels": len(spaces),
                  "space": {s.name: {"legal": s.legal, "runnable": s.runnable, "searched": len(s.configs)}
                            for s in spaces}}
        if self.left() < 15:
            return {**result, "error": "skipped: the campaign's deadline"}
        timer = self._timer(module, state["args"])
        table: dict[str, float] = {}
        if self.left() > 40:
            result["exhaustive"] = self.exhaustive(spaces, timer, table)
            if not result["exhaustive"]["partial"]:
                result["guided"] = self.guided(spaces, timer, table)
        result["tuned"] = self.tune_for_real(state)
        result["model"] = self.model_vs_measured(spaces, state, timer, table, result["tuned"]["default_ms"])
        return result

    def _timer(self, module, args):
        if self.smoke:
            return WallTimer(module, args, self.t.gpu_timing.assigned)
        timer = self.t.gpu_timing.RunTimer(module, args, warmup_ms=5, rep_ms=20)
        timer.warm_up(0.3)
        return timer

    def exhaustive(self, spaces, timer, table: dict) -> dict:
        """Every config of every kernel's space, one kernel at a time, then the bests together."""
        key = self.t.tuner.assignment_key
        default = {s.name: s.default for s in spaces}
        started = time.perf_counter()
        best = dict(default)
        partial = False
        for space in spaces:
            for config in space.configs:
                assignment = {**default, space.name: config}
                if key(assignment) not in table and not partial:
                    table[key(assignment)] = timer(assignment)
                    partial = self.left() < 15
            timed = [c for c in space.configs if key({**default, space.name: c}) in table]
            best[space.name] = min(timed, key=lambda c: table[key({**default, space.name: c})])
        if key(best) not in table and not partial:
            table[key(best)] = timer(best)
        finite = {k: v for k, v in table.items() if math.isfinite(v)}
        fastest = min(finite, key=finite.get)
        return {"timed": len(table), "refused": len(table) - len(finite), "best_ms": finite[fastest],
                "best": json.loads(fastest), "default_ms": table[key(default)], "partial": partial,
                "seconds": time.perf_counter() - started}

    def guided(self, spaces, timer, table: dict) -> dict:
        """The search on (a)'s timings, for several seeds; assignments (a) did not time are timed now."""
        def replay(assignment):
            k = self.t.tuner.assignment_key(assignment)
            if k not in table:
                table[k] = timer(assignment)
            return table[k]

        runs = []
        for seed in SEEDS:
            history, _ = self.t.tuner.search(spaces, replay, budget=self.options.budget, seed=seed)
            runs.append([entry["ms"] for entry in history])
        optimum = min(v for v in table.values() if math.isfinite(v))
        seeds = []
        for seed, times in zip(SEEDS, runs):
            best = min(times)
            running = [min(times[:i + 1]) for i in range(len(times))]
            reach = next((i + 1 for i, ms in enumerate(running) if optimum / ms >= TARGET), None)
            seeds.append({"seed": seed, "best_ms": best, "share_of_optimum": optimum / best,
                          "evaluations": sum(math.isfinite(t) for t in times), "evaluations_to_98": reach})
        return {"optimum_ms": optimum, "seeds": seeds, "worst_share": min(s["share_of_optimum"] for s in seeds)}

    def tune_for_real(self, state: dict) -> dict:
        """`tir-triton tune`'s own path, twice: a search and confirmation on real timings, then a cache hit."""
        tune = self.t.tuning.tune_module
        options = dict(budget=self.options.budget, progress=False, max_space=self.options.max_space,
                       interpret=self.smoke, gpu="H200" if self.smoke else None, rounds=self.options.rounds)
        if self.smoke:
            options["timer_factory"] = lambda module, args: WallTimer(module, args, self.t.gpu_timing.assigned)
        first = tune(state["path"], state["case_sizes"], use_cache=False, **options)
        second = tune(state["path"], state["case_sizes"], **options)
        deployed = _fresh_import(state["path"], self.smoke)
        shown = {name: deployed.CONFIGS[name][deployed.CHOSEN[name]] for name in deployed.CHOSEN}
        return {**{k: first[k] for k in ("default_ms", "tuned_ms", "noise", "gain", "kept_default", "evaluations",
                                         "chosen")},
                "second_call_cache_hit": second["cache_hit"], "deployed_matches": shown == first["chosen"]}

    def model_vs_measured(self, spaces, state: dict, timer, table: dict, default_ms: float) -> dict:
        model = self.t.model
        summary = getattr(state["module"], "TILE_SUMMARY", {})
        if self.spec is None or not summary:
            return {"error": "no model for this GPU or module"}

        def predicted(assignment):
            return sum(model.predict(summary[name], config, self.spec, state["sizes"],
                                     _resources(timer, name, config)).seconds * 1e3
                       for name, config in assignment.items())

        default = {s.name: s.default for s in spaces}
        kernels = {}
        for name, config in default.items():
            p = model.predict(summary[name], config, self.spec, state["sizes"], _resources(timer, name, config))
            kernels[name] = {"predicted_ms": p.ms, "bound": p.bound, "programs_per_sm": p.occupancy.programs_per_sm,
                             "limiter": p.occupancy.limiter, "registers": p.resources.registers,
                             "shared_bytes": p.resources.shared_bytes, "measured_resources": p.resources.measured,
                             "hiding": p.hiding, "wave_efficiency": p.wave_efficiency}
        pairs = [(predicted(json.loads(k)), ms) for k, ms in table.items() if math.isfinite(ms)]
        predicted_default = predicted(default)
        return {"kernels": kernels, "predicted_ms": predicted_default, "measured_ms": default_ms,
                "error": predicted_default / default_ms - 1 if default_ms else None,
                "memory_bound": all(k["bound"] != "tensor cores" for k in kernels.values()),
                "rank_correlation": spearman(pairs) if len(pairs) > 2 else None, "points": len(pairs)}

    def _save(self) -> None:
        with open(os.path.join(self.out_dir, "tuner_results.json"), "w") as handle:
            json.dump(self.report, handle, indent=1, default=str)


def _resources(timer, name: str, config: dict):
    lookup = getattr(timer, "kernel_resources", None)
    resources = lookup(name, config) if lookup else None
    return resources if resources is not None and resources.measured else None


def _fresh_import(path: str, interpret: bool):
    """The module as a deployment imports it, not the object the campaign has been mutating."""
    import importlib.util

    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    spec = importlib.util.spec_from_file_location(f"deployed_{os.path.basename(path)[:-3]}_{time.time_ns()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WallTimer:
    """Smoke mode's timer: wall-clock run() in the interpreter (meaningless as a speed, but every
    step of the campaign runs)."""

    def __init__(self, module, args, assigned):
        self.module, self.args, self.assigned = module, args, assigned

    def __call__(self, assignment) -> float:
        try:
            with self.assigned(self.module, assignment):
                times = []
                for _ in range(2):
                    started = time.perf_counter()
                    self.module.run(*self.args)
                    times.append((time.perf_counter() - started) * 1e3)
                return min(times)
        except Exception:  # noqa: BLE001 - as RunTimer: a config that cannot run is not timed
            return math.inf


def spearman(pairs: list[tuple[float, float]]) -> float | None:
    """Rank correlation of predicted and measured times (ties get their mean rank)."""
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        result = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                result[order[k]] = (i + j) / 2
            i = j + 1
        return result

    a, b = ranks([p for p, _ in pairs]), ranks([m for _, m in pairs])
    if statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
        return None
    return statistics.correlation(a, b)


# --- compiling every config first, in parallel -------------------------------------------------------
def precompile(loaded: list[dict], workers: int, deadline: float) -> dict:
    """Launch every config of every space once, in worker processes, until `deadline` (perf_counter)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    started = time.perf_counter()
    tasks = []
    for state in loaded:
        for space in state["spaces"]:
            for chunk in range(0, len(space.configs), 4):
                tasks.append((state["path"], state["case_sizes"], space.name, space.configs[chunk:chunk + 4]))
    # the deadline as seconds left: perf_counter does not compare across processes
    left = deadline - time.perf_counter()
    context = multiprocessing.get_context("spawn")
    outcomes = {"compiled": 0, "failed": 0, "skipped": 0}
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start,
                             initargs=(time.time() + left,)) as pool:
        for counts in pool.map(_compile_task, tasks):
            for name, count in counts.items():
                outcomes[name] += count
    return {**outcomes, "tasks": len(tasks), "workers": workers, "seconds": time.perf_counter() - started}


_WORKER: dict = {}


def _worker_start(deadline: float) -> None:
    _WORKER["deadline"] = deadline
    _WORKER["tuner"] = _import_tuner()


def _compile_task(task) -> dict:
    path, sizes, kernel, configs = task
    counts = {"compiled": 0, "failed": 0, "skipped": 0}
    if time.time() > _WORKER["deadline"]:
        counts["skipped"] = len(configs)
        return counts
    import torch

    t = _WORKER["tuner"]
    if _WORKER.get("path") != path:  # one case's arguments at a time
        module = t.loader.import_module(path, interpret=False)
        args = t.tuning.random_arguments(module.PARAMS, sizes, "cuda")
        _WORKER.update(path=path, module=module, prepared=module._prepare(tuple(args), {}))
    module, (tensors, shape_sizes) = _WORKER["module"], _WORKER["prepared"]
    launch = dict(module.LAUNCHERS)[kernel]
    for config in configs:
        try:
            launch(tensors, shape_sizes, config)
            torch.cuda.synchronize()
            counts["compiled"] += 1
        except Exception:  # noqa: BLE001 - the timer will refuse it too
            counts["failed"] += 1
    return counts


def _busy_gpu(seconds: float) -> None:
    """Clocks up before the first timing (they idle at a few hundred MHz)."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


# --- the tables -----------------------------------------------------------------------------
def tables(report: dict) -> str:
    rows_a = ["| case | kernels | space: legal → runnable → searched | exhaustive: timed | optimum ms | default ms "
              "| guided best ms (seed 0) | share of optimum, worst of 3 seeds | evaluations to 98% (seeds) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows_b = ["| case | bound (model) | programs/SM (limiter) | predicted ms | measured ms | error | rank corr. over space |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    rows_c = ["| case | default ms | tuned ms | noise | gain | decision | cache hit (2nd) | deployed CHOSEN |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case in report["cases"]:
        name = case["name"]
        if "error" in case:
            rows_a.append(f"| {name} | failed: {case['error'][:120]} |")
            continue
        space = " + ".join(f"{s['legal']} → {s['runnable']} → {s['searched']}" for s in case["space"].values())
        if "guided" in case:
            g, e = case["guided"], case["exhaustive"]
            optimum = min(g["optimum_ms"], e["best_ms"])
            reach = ", ".join(str(s["evaluations_to_98"]) for s in g["seeds"])
            rows_a.append(f"| {name} | {case['kernels']} | {space} | {e['timed']} | {optimum:.4f} | "
                          f"{e['default_ms']:.4f} | {g['seeds'][0]['best_ms']:.4f} | {100 * g['worst_share']:.1f}% | {reach} |")
        else:
            rows_a.append(f"| {name} | {case['kernels']} | {space} | skipped or partial (deadline) |")
        m = case["model"]
        if "kernels" in m:
            bound = ", ".join(k["bound"] for k in m["kernels"].values())
            occ = ", ".join(f"{k['programs_per_sm']} ({k['limiter']})" for k in m["kernels"].values())
            corr = f"{m['rank_correlation']:.2f}" if m["rank_correlation"] is not None else "-"
            rows_b.append(f"| {name} | {bound} | {occ} | {m['predicted_ms']:.4f} | {m['measured_ms']:.4f} | "
                          f"{100 * m['error']:+.0f}% | {corr} ({m['points']}) |")
        tuned = case["tuned"]
        decision = "kept default" if tuned["kept_default"] else "tuned"
        rows_c.append(f"| {name} | {tuned['default_ms']:.4f} | {tuned['tuned_ms']:.4f} | {100 * tuned['noise']:.1f}% | "
                      f"{100 * tuned['gain']:.1f}% | {decision} | {tuned['second_call_cache_hit']} | "
                      f"{tuned['deployed_matches']} |")
    return "\n".join(["", "Tuner vs exhaustive:", *rows_a, "", "Model vs measurement:", *rows_b, "",
                      "Default vs tuned (same run):", *rows_c, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate")
    gen.add_argument("dir", nargs="?", default=os.path.join(ROOT, "generated_tuner"))
    run = commands.add_parser("run")
    run.add_argument("dir")
    run.add_argument("out")
    smoke = commands.add_parser("smoke")
    smoke.add_argument("out", nargs="?", default=None)
    for sub in (run, smoke):
        sub.add_argument("--max-space", type=int, default=64)
        sub.add_argument("--budget", type=int, default=25)
        sub.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
        sub.add_argument("--rounds", type=int, default=5, help="confirmation rounds of the never-slower rule")
        sub.add_argument("--deadline", type=float, default=330.0)
    args = parser.parse_args(argv)
    if args.command == "generate":
        generate(args.dir)
        return 0
    if args.command == "smoke":
        os.environ["TRITON_INTERPRET"] = "1"
        folder = tempfile.mkdtemp(prefix="tuner-smoke-")
        generate(folder, smoke=True)
        args.smoke, args.dir, args.out = True, folder, args.out or folder
        args.max_space, args.budget, args.rounds = min(args.max_space, 4), min(args.budget, 5), 2
    else:
        args.smoke = False
    os.makedirs(args.out, exist_ok=True)
    return Campaign(args.dir, args.out, args).run()


if __name__ == "__main__":
    sys.exit(main())
