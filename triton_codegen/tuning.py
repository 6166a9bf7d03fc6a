"""Tune saved modules: random inputs of their declared shapes, the tuner (tuner.py) on the
module's whole run(), the result cached on disk and written into the module and its manifest.

`tune_module` tunes one module in this process (on this process's GPU). `tune_modules` spreads
many over the GPUs of the host: one worker process per GPU, each seeing only its GPU
(CUDA_VISIBLE_DEVICES), each running `tir-triton tune` on its share of the modules; every worker
writes its results as JSON for this process to collect. The cache is shared (atomic writes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from typing import Callable

from tir_passes.errors import FrontendError
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_for_device, gpu_spec

from . import tuning_cache
from .environment import gpu_worker_environment
from .loader import import_module
from .runtime_support import shape_text, shape_value
from . import search_space
from .search_space import MAX_SPACE, kernel_space
from .tuner import BUDGET, ROUNDS, TuneResult, tune
from .writeback import write_back


def random_arguments(params, sizes: dict[str, int], device: str) -> list:
    import torch

    args = []
    for name, kind, dtype, shape, _written, _narrow in params:
        if kind == "scalar":
            if name not in sizes:
                raise FrontendError(f"scalar parameter {name}: give its value with --sizes {name}=N")
            args.append(sizes[name])
            continue
        dims = [_dimension(name, dim, sizes) for dim in shape]
        torch_dtype = getattr(torch, dtype)
        tensor = torch.randn(dims, device=device).to(torch_dtype) if torch_dtype.is_floating_point else \
            torch.randint(-8, 8, dims, device=device).to(torch_dtype)
        args.append(tensor)
    return args


def _check_size_names(params, sizes: dict[str, int]) -> None:
    """--sizes names only the module's size variables and scalars: a misspelled name would leave
    the size it meant unbound (or tune at another size) without saying so."""
    from .model_report import shape_names

    known = {name for name, kind, *_ in params if kind == "scalar"}
    known |= {var for _, kind, _, shape, *_ in params if kind != "scalar"
              for entry in shape for var in shape_names(entry)}
    unknown = sorted(set(sizes) - known)
    if unknown:
        theirs = f"its sizes and scalars: {', '.join(sorted(known))}" if known else "its sizes are all static"
        raise FrontendError(f"--sizes names {', '.join(unknown)}, which this module does not have ({theirs})")


def _dimension(param: str, entry, sizes: dict[str, int]) -> int:
    try:
        return shape_value(entry, sizes)
    except KeyError as missing:
        raise FrontendError(
            f"parameter {param}: give the size {missing.args[0]} with --sizes {missing.args[0]}=N"
        ) from None
    except ZeroDivisionError:
        raise FrontendError(
            f"parameter {param}: its dimension {shape_text(entry)} divides by zero with these --sizes"
        ) from None


def shape_sizes(params, args) -> dict[str, int]:
    """The shape variables' values these arguments bind (what the hardware model's formulas name)."""
    sizes: dict[str, int] = {}
    for (name, kind, _dtype, shape, _written, _narrow), value in zip(params, args):
        if kind == "scalar":
            sizes[name] = value
            continue
        for axis, entry in enumerate(shape):
            if isinstance(entry, str):
                sizes.setdefault(entry, int(value.shape[axis]))
    return sizes


def module_spaces(module, spec: GpuSpec | None, sizes: dict[str, int], max_space: int = MAX_SPACE) -> list:
    """Each kernel's search space: from the module's TILE_SUMMARY and the model, else its CONFIGS."""
    summary = getattr(module, "TILE_SUMMARY", {})
    spaces = []
    for name, _launch in module.LAUNCHERS:
        default = module.CONFIGS[name][module.CHOSEN[name]]
        spaces.append(
            kernel_space(name, summary.get(name), default, spec, sizes, max_space, fallback=tuple(module.CONFIGS[name]))
        )
    return spaces


def tune_module(
    path: str,
    sizes: dict[str, int],
    *,
    budget: int = BUDGET,
    seed: int = 0,
    use_cache: bool = True,
    write: bool = True,
    progress: bool = True,
    gpu: str | None = None,
    max_space: int = MAX_SPACE,
    rounds: int = ROUNDS,
    timer_factory: Callable | None = None,
    interpret: bool = False,
) -> dict:
    """Tune one saved module; returns a report (choice, timings, noise, gain, cache hit).

    On a GPU the timer is gpu_timing.RunTimer and the GPU's name comes from the device. Tests pass
    `timer_factory(module, args)`, `interpret=True` (CPU tensors) and `gpu` (the spec's name)."""
    _device(gpu, interpret)  # a missing GPU is said before anything is imported or allocated
    module = import_module(path, interpret=interpret)
    _check_size_names(module.PARAMS, sizes)
    args = random_arguments(module.PARAMS, sizes, "cpu" if interpret else "cuda")
    name = os.path.splitext(os.path.basename(path))[0]
    result, report = tune_loaded(
        module,
        args,
        name,
        budget=budget,
        seed=seed,
        use_cache=use_cache,
        progress=progress,
        gpu=gpu,
        max_space=max_space,
        rounds=rounds,
        timer_factory=timer_factory,
        interpret=interpret,
    )
    report = {"module": path, **report}
    if write:
        report["written"] = write_back(path, result.chosen, {k: v for k, v in report.items() if k != "chosen"})
    return report


def tune_loaded(
    module,
    args,
    name: str,
    *,
    budget: int = BUDGET,
    seed: int = 0,
    use_cache: bool = True,
    progress: bool = True,
    gpu: str | None = None,
    max_space: int = MAX_SPACE,
    rounds: int = ROUNDS,
    timer_factory: Callable | None = None,
    interpret: bool = False,
) -> tuple[TuneResult, dict]:
    """Tune an imported module on `args` (the tuner's never-slower rule: the default stays unless a
    finalist beats it beyond the noise) and make the choice the module's in memory (CHOSEN)."""
    device_name, spec = _device(gpu, interpret)
    key = tuning_cache.cache_key(
        module, device_name, tuning_cache.argument_shapes(module.PARAMS, args), _triton_version()
    )
    try:
        cached = tuning_cache.load(name, key) if use_cache else None
    except tuning_cache.CacheFileError as err:
        raise FrontendError(str(err)) from None
    refused = cached_choice_problem(module, cached, shape_sizes(module.PARAMS, args)) if cached is not None else ""
    if refused:
        warnings.warn(
            f"{name}: the cached tuning choice is refused and the module tuned again: {refused}", stacklevel=2
        )
    if cached is not None and not refused:
        result = TuneResult.from_json(cached)
        result.cache_hit = True
    else:
        spaces = module_spaces(module, spec, shape_sizes(module.PARAMS, args), max_space)
        timer = timer_factory(module, args) if timer_factory else _gpu_timer(module, args)
        result = tune(spaces, timer, budget=budget, seed=seed, rounds=rounds, progress=progress, label=name)
        tuning_cache.store(name, key, result.to_json())
    _choose_in_memory(module, result.chosen)
    report = {
        "gpu": device_name,
        "cache_key": key,
        "cache_hit": result.cache_hit,
        "cache_refused": refused,
        "default_ms": result.default_ms,
        "tuned_ms": result.chosen_ms,
        "noise": result.noise,
        "gain": result.gain,
        "kept_default": result.kept_default,
        "evaluations": result.timed_evaluations,
        "chosen": result.chosen,
    }
    return result, report


def _choose_in_memory(module, chosen: dict[str, dict]) -> None:
    for kernel, config in chosen.items():
        configs = module.CONFIGS[kernel]
        if config not in configs:
            configs.append(config)
        module.CHOSEN[kernel] = configs.index(config)


def _device(gpu: str | None, interpret: bool) -> tuple[str, GpuSpec | None]:
    if gpu is not None:
        return gpu, gpu_spec(gpu)
    if interpret:
        raise FrontendError("tuning in the interpreter needs the GPU to model (gpu=...)")
    import torch

    if not torch.cuda.is_available():
        raise FrontendError("tune needs a CUDA GPU (timings in the interpreter mean nothing)")
    name = torch.cuda.get_device_name()
    major, minor = torch.cuda.get_device_capability()
    return name, gpu_for_device(name, major * 10 + minor)


def _gpu_timer(module, args):
    from .gpu_timing import RunTimer

    timer = RunTimer(module, args)
    timer.warm_up()
    return timer


def _triton_version() -> str:
    import triton

    return triton.__version__


def cached_choice_problem(module, result: dict, sizes: dict[str, int]) -> str:
    """Why a cached choice may not be written into this module, or "": it must name the module's
    kernels, and each config must be legal in the kernel's search space (search_space.config_problem)."""
    kernels = [name for name, _launch in module.LAUNCHERS]
    chosen = result.get("chosen", {})
    if sorted(chosen) != sorted(kernels):
        return f"it names the kernels {sorted(chosen)}, the module has {sorted(kernels)}"
    summary = getattr(module, "TILE_SUMMARY", {})
    for name in kernels:
        default = module.CONFIGS[name][module.CHOSEN[name]]
        problem = search_space.config_problem(
            summary.get(name), default, chosen[name], sizes, tuple(module.CONFIGS[name])
        )
        if problem:
            return f"kernel {name}: {problem}"
    return ""


# --- several GPUs ------------------------------------------------------------------------------
def plan_workers(paths: list[str], gpus: list[int]) -> list[tuple[int, list[str]]]:
    """Modules dealt round-robin to GPUs (in the order given), GPUs without modules left out."""
    shares = [(gpu, paths[index :: len(gpus)]) for index, gpu in enumerate(gpus)]
    return [(gpu, share) for gpu, share in shares if share]


def worker_command(paths: list[str], json_out: str, options: list[str]) -> list[str]:
    return [sys.executable, "-m", "triton_codegen.cli", "tune", *paths, "--gpus", "1", "--json-out", json_out, *options]


def tune_modules(
    paths: list[str],
    gpus: list[int],
    options: list[str],
    command: Callable[[list[str], str, list[str]], list[str]] = worker_command,
) -> list[dict]:
    """Tune `paths` with one worker process per GPU; the reports of all, in the order of `paths`."""
    with tempfile.TemporaryDirectory(prefix="tir-triton-tune-") as folder:
        workers = []
        for gpu, share in plan_workers(paths, gpus):
            out = os.path.join(folder, f"gpu{gpu}.json")
            env = gpu_worker_environment(gpu)
            workers.append((gpu, out, subprocess.Popen(command(share, out, options), env=env)))
        reports: dict[str, dict] = {}
        failed = []
        for gpu, out, process in workers:
            if process.wait() != 0 or not os.path.exists(out):
                failed.append(gpu)
                continue
            with open(out) as handle:
                for report in json.load(handle):
                    reports[report["module"]] = {**report, "gpu_index": gpu}
    if failed:
        raise FrontendError(f"tuning failed on GPU(s) {', '.join(map(str, failed))} (their errors are above)")
    return [reports[path] for path in paths]
