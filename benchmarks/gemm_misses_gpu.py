"""The GEMM rows issue 17 still misses, measured in one run: each contraction at the tile size model's
default now and at the default it had before (main of 2026-12-02: 128×256 at 3 stages, the output
tile of a `_tma` variant stored through a TMA descriptor), the descriptor-load / pointer-store
variant on and off, a few other wide tiles, cuBLAS and torch.compile; and run()'s host time beside
a bare launch of the same kernel (the launch path).

    python benchmarks/gemm_misses_gpu.py generate DIR        # here (TVM): DIR/*.py, DIR/variants.json
    python3 benchmarks/gemm_misses_gpu.py run DIR OUT.json    # on the GPU (torch + triton only), < 90 s
    python benchmarks/gemm_misses_gpu.py host [DIR]           # CPU: run()'s host time, kernel launch stubbed
    python benchmarks/gemm_misses_gpu.py smoke                # CPU: small cases in the interpreter

Rows: {"case", "variant", "us"} (do_bench median, L2 flushed; `run()` with its Python launch) with
the relative error against float64 of every variant, and per case "host" rows: microseconds a call
of run(), of the module's launcher alone, of a bare `kernel[grid](...)` with the same arguments and
of Triton's compiled kernel launched directly (`CompiledKernel[grid]`, past JITFunction.run), each
timed as 2000 back-to-back calls then one synchronize (host-bound for small kernels).

The run of 2026-12-02 (benchmarks/results/2026-12-02-h200-gemm-misses.json, made before the
CompiledKernel row existed) also timed wide tiles on the decode step: configs outside that
kernel's contract (its 16-row tiles divide, so its loads and stores carry no row masks; 256-row
blocks read and write past the tensors), hence their infinite errors. It no longer times them.
"""

import contextlib
import json
import os
import sys
import time

from probe_common import (ROOT, RowLog, bench_us, command, compiled_into, default_config, failure, gemm_program,
                          host_us, interpreted_smoke, load_module, stub_kernels, write_json)

# (program, M, N, K): linear is X·Wᵀ with a fp16 result, matmul A·B with a fp32 one (as the suite's)
CASES = {
    "matmul_3000x5000x1000": ("matmul", 3000, 5000, 1000),
    "linear_decode_16x4096x4096": ("linear", 16, 4096, 4096),
    "matmul_4096": ("matmul", 4096, 4096, 4096),
    "linear_8192x11008x4096": ("linear", 8192, 11008, 4096),
    "linear_small_16x96x64": ("linear", 16, 96, 64),   # the launch path: all host time
}
LAUNCH_CASE = "linear_small_16x96x64"
WIDE = ((256, 128, 64, 4), (128, 256, 64, 4), (128, 256, 64, 3))   # other tiles timed on the large cases
HOST_CALLS = 2000
HOST_BOUND_US = 60   # host times only for kernels shorter than this (the decode step, the small case)
BUDGET_S = 80   # the run stops timing new rows past this (the lead's slot is 90 s)


@contextlib.contextmanager
def _old_rules():
    """The tile size model and descriptor plan as they were: staged TMA output stores, 3 stages."""
    from tir_passes.contracts import gemm_price
    from tir_passes.passes import tile_sizes

    before = gemm_price.CONTRACTION_OUTPUT_STORE, tile_sizes.WIDE_STAGES
    gemm_price.CONTRACTION_OUTPUT_STORE, tile_sizes.WIDE_STAGES = "descriptors", tile_sizes.PIPELINE_STAGES
    try:
        yield
    finally:
        gemm_price.CONTRACTION_OUTPUT_STORE, tile_sizes.WIDE_STAGES = before


def generate(out: str, cases=CASES) -> None:
    os.makedirs(out, exist_ok=True)
    table = {}
    for name, (kind, m, n, k) in cases.items():
        new = compiled_into(out, name, gemm_program(kind, m, n, k))
        kernel = new.program.kernels[0]
        default = default_config(kernel)
        entry = {"kind": kind, "kernel": kernel.name, "variants": {"new default": ["new", default]}}
        if name != LAUNCH_CASE:
            with _old_rules():
                old = compiled_into(out, f"{name}_old", gemm_program(kind, m, n, k))
            entry["variants"]["old default"] = ["old", default_config(old.program.kernels[0])]
            names = [dim.block for dim in kernel.dims]
            if any(extent % default[block] for extent, block in zip((m, n, k), names)):
                entry["variants"]["new default, pointer kernel (USE_DESCRIPTORS off)"] = ["new", default, False]
            for bm, bn, bk, stages in (WIDE if min(m, n) >= 256 else ()):   # not the decode step's 16 rows
                config = dict(default, num_warps=8, num_stages=stages, **dict(zip(names, (bm, bn, bk))))
                if all(config != v[1] for v in entry["variants"].values()):
                    entry["variants"][f"{bm}x{bn}x{bk} s{stages}"] = ["new", config]
        table[name] = entry
        print(name, {label: v[1] for label, v in entry["variants"].items()}, flush=True)
    write_json(os.path.join(out, "variants.json"), table)


def _tensors(module, device):
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(*p[3], generator=generator, device=device).to(getattr(torch, p[2])) for p in module.PARAMS]


def run(folder: str, out: str, device: str = "cuda") -> list[dict]:
    """`device` "cpu": Triton's interpreter, small cases only, nothing timed (the smoke test)."""
    import torch

    sys.path.insert(0, ROOT)
    with open(os.path.join(folder, "variants.json")) as handle:
        table = json.load(handle)
    log = RowLog(out)
    emit = log.emit
    timed = device == "cuda"
    for case, entry in table.items():
        _time_case(folder, case, entry, device, log)
    for case, entry in table.items():   # last: inductor's compiles take the longest
        if timed and case != LAUNCH_CASE and log.elapsed() < BUDGET_S:
            a, b, _ = _tensors(load_module(os.path.join(folder, f"{case}.py")), device)
            try:
                compiled = torch.compile(_peer(entry["kind"]), fullgraph=True)
                compiled(a, b)
                emit({"case": case, "variant": "torch.compile", "us": _time(lambda: compiled(a, b))})
            except Exception as err:  # noqa: BLE001 - reported, the rest goes on
                emit({"case": case, "variant": "torch.compile", "failed": failure(err)})
    return log.rows


def _peer(kind):
    import torch

    return (lambda x, w: torch.nn.functional.linear(x, w)) if kind == "linear" else torch.matmul


def _time_case(folder, case, entry, device, log):
    """cuBLAS, then every variant of one case: its error against float64, do_bench, host times."""
    from triton_codegen.gpu_timing import assigned

    modules = {"new": load_module(os.path.join(folder, f"{case}.py"))}
    if os.path.exists(os.path.join(folder, f"{case}_old.py")):
        modules["old"] = load_module(os.path.join(folder, f"{case}_old.py"))
    a, b, c = _tensors(modules["new"], device)
    reference = a.double() @ (b.double().T if entry["kind"] == "linear" else b.double())
    timed, peer = device == "cuda", _peer(entry["kind"])
    if timed:
        log.emit({"case": case, "variant": "cuBLAS", "us": _time(lambda: peer(a, b))})
    for label, (which, config, *descriptors) in entry["variants"].items():
        if log.elapsed() > BUDGET_S:
            log.emit({"case": case, "variant": label, "failed": f"skipped: past the {BUDGET_S} s budget"})
            continue
        module = modules[which]
        row = {"case": case, "variant": label, "config": config}
        try:
            module.USE_DESCRIPTORS = descriptors[0] if descriptors else True
            with assigned(module, {entry["kernel"]: config}):
                c.fill_(float("nan"))
                module.run(a, b, c)
                row["ran"] = dict(module.VARIANTS_RUN)
                row["error"] = ((c.double() - reference).norm() / reference.norm()).item()
                row["us"] = _time(lambda: module.run(a, b, c)) if timed else None
                if label == "new default" and (row["us"] or 0) < HOST_BOUND_US:   # longer kernels hide the host
                    row["host"] = _host_times(module, [a, b, c], HOST_CALLS if timed else 3)
        except Exception as err:  # noqa: BLE001 - reported, the rest goes on
            row["failed"] = failure(err)
        finally:
            module.USE_DESCRIPTORS = True
        log.emit(row)


def _bare_launch(module, args):
    """A launch of what run() launches with the same arguments, without run(): the kernel, its grid,
    arguments and options as the module's launcher passed them to launch_variant."""
    captured = {}
    original = module.launch_variant

    def capture(kernel, pointers, descriptors, planned, t, config, grid, kernel_args, options, wrap, **kw):
        handle = original(kernel, pointers, descriptors, planned, t, config, grid, kernel_args, options, wrap, **kw)
        ran = pointers
        extra = {}
        if module.VARIANTS_RUN[kernel] == "descriptors":
            from triton.tools.tensor_descriptor import TensorDescriptor

            ran = descriptors
            for param, (buffer, names) in planned.items():
                block = [config[name] if name else 1 for name in names]
                tensor = t[buffer]
                extra[param] = TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block)
        captured.update(kernel=ran, grid=grid, args=kernel_args, kwargs=dict(extra, **options))
        return handle

    module.launch_variant = capture
    try:   # the launcher itself: run() would replay an earlier call's launches (launch_replay.py)
        checked, sizes = module._prepare(args, {})
        for name, launch in module.LAUNCHERS:
            launch(checked, sizes, module.CONFIGS[name][module.CHOSEN[name]])
    finally:
        module.launch_variant = original
    if not captured:   # a kernel without a `_tma` variant launches without launch_variant
        return None
    bound = captured["kernel"][captured["grid"]]
    return lambda: bound(*captured["args"], **captured["kwargs"]), captured


def _compiled_launch(captured):
    """Triton's compiled kernel launched without JITFunction.run (no binding, specialization or
    cache lookup): what bypassing Triton's own launcher would save. None where this Triton's
    CompiledKernel does not take the call (its API differs between versions)."""
    kernel, grid, kwargs = captured["kernel"], captured["grid"], captured["kwargs"]
    handle = kernel[grid](*captured["args"], **kwargs)
    names = getattr(kernel, "arg_names", None)
    if names is None or not hasattr(handle, "__getitem__"):
        return None
    values = list(captured["args"]) + [kwargs[name] for name in names[len(captured["args"]):]]
    runner = handle[grid]
    try:
        runner(*values)
    except Exception as err:  # noqa: BLE001 - an experiment: reported as missing
        print("compiled-kernel launch not taken:", type(err).__name__, str(err)[:200], flush=True)
        return None
    return lambda: runner(*values)


def _host_times(module, args, calls: int) -> dict:
    """Microseconds a call, `calls` calls back to back then one synchronize."""
    import torch

    sync = torch.cuda.synchronize if args[0].is_cuda else (lambda: None)
    bare, captured = _bare_launch(module, args) or (None, None)
    compiled = _compiled_launch(captured) if captured and args[0].is_cuda else None
    [(name, launch)] = module.LAUNCHERS
    config = module.CONFIGS[name][module.CHOSEN[name]]
    checked, sizes = module._prepare(args, {})
    timings = {}
    runs = (("run", lambda: module.run(*args)), ("launcher", lambda: launch(checked, sizes, config)),
            ("bare kernel[grid]", bare), ("CompiledKernel[grid]", compiled),
            ("_prepare", lambda: module._prepare(args, {})))
    for label, fn in runs:
        if fn is None:
            continue
        for _ in range(min(50, calls)):
            fn()
        sync()
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        timings[label] = round((time.perf_counter() - begin) / calls * 1e6, 2)
    return timings


def _time(fn) -> float:
    return bench_us(fn, rep=40)


def smoke() -> None:
    """Small cases through generate and run in Triton's interpreter, on the CPU: the run path and errors."""
    def generate_and_run(folder):
        generate(folder, {"matmul_small": ("matmul", 144, 96, 40), LAUNCH_CASE: CASES[LAUNCH_CASE]})
        return run(folder, "", device="cpu")

    interpreted_smoke(generate_and_run)


def host(folder: str | None = None) -> None:
    """On the CPU: run()'s host time per call with the kernels replaced by a stub that launches
    nothing (Triton's interpreter would dominate), for the small case: the Python work of the
    argument checks and the launcher."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        folder = folder or scratch
        path = os.path.join(folder, f"{LAUNCH_CASE}.py")
        if not os.path.exists(path):
            generate(folder, {LAUNCH_CASE: CASES[LAUNCH_CASE]})
        print(json.dumps(host_time(load_module(path))))


def host_time(module, calls: int = HOST_CALLS) -> dict:
    """Microseconds per call of run() and its two halves, with every kernel a stub."""
    stub_kernels(module)
    args = _tensors(module, "cpu")
    [(name, launch)] = module.LAUNCHERS
    config = module.CONFIGS[name][module.CHOSEN[name]]
    checked, sizes = module._prepare(args, {})
    return {label: host_us(fn, calls) for label, fn in (
        ("run", lambda: module.run(*args)), ("_prepare", lambda: module._prepare(args, {})),
        ("launcher", lambda: launch(checked, sizes, config)))}


if __name__ == "__main__":
    command(sys.argv, generate, smoke, lambda folder, out, *_: run(folder, out),
            host=lambda folder=None, *_: host(folder))
