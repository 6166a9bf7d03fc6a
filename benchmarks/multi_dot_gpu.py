"""A nest of several tl.dots over one K loop on the GPU (issue 22): SwiGLU silu(X·Wgᵀ) * (X·Wuᵀ),
4096×11008×4096 fp16, at its default config, at the tuner's search space and at a fixed grid of
tile shapes, beside torch.compile and cuBLAS eager of the same computation, in one process.

    python benchmarks/multi_dot_gpu.py generate DIR           # here (TVM): DIR/swiglu.py, DIR/variants.json
    python3 benchmarks/multi_dot_gpu.py run DIR OUT.json      # on the GPU (torch, triton), about 90 s
    python benchmarks/multi_dot_gpu.py smoke                  # CPU: a small shape, every variant in the interpreter

Peers first (cuBLAS eager: two F.linear and silu·mul in eager torch; cuBLAS of the concatenated
weights, one GEMM; torch.compile of the eager function, inductor's default mode), then the
default, then the variants in the order generate wrote them (the tuner's space by predicted
time, then the grid) until `--deadline` seconds (default 80) have passed: those left are listed
as skipped. Each variant's output is checked against an fp32 reference; run() is timed with
do_bench (median, L2 flushed). Each row carries the hardware model's prediction
(triton_codegen/hardware_model.py) for model-vs-measured.
"""

import json
import os
import sys
import time

from probe_common import (ROOT, bench_us, command, default_config, failure, first_names, interpreted_smoke,
                          load_module, on_path, write_json)

SHAPE = (4096, 11008, 4096)     # M (tokens), N (hidden), K (model)
SMOKE_SHAPE = (40, 48, 72)
# tile shapes the hardware may favour for two fp32 accumulators (each per dot: M×N×K, warps, stages)
GRID = [(128, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 32, 8, 4), (128, 64, 64, 4, 4),
        (128, 64, 64, 8, 4), (128, 64, 64, 4, 3), (64, 128, 64, 4, 4), (64, 128, 64, 4, 3),
        (128, 128, 64, 4, 3), (256, 64, 64, 8, 3), (64, 256, 64, 8, 3), (128, 128, 128, 8, 2),
        (64, 64, 64, 4, 4)]
SPACE_VARIANTS = 10             # of the tuner's space, the first (by predicted time) kept


def _variants(kernel, summary, shape) -> dict[str, dict]:
    from tir_passes.contracts.gpu_specs import gpu_spec
    from triton_codegen.search_space import block_size_allowed, kernel_space

    default = default_config(kernel)
    found = {"default": default}
    space = kernel_space(kernel.name, summary, default, gpu_spec("H200"), {})
    for config in space.configs[1:1 + SPACE_VARIANTS]:
        found.setdefault("space " + _label(config), config)
    blocks = {d["block"]: d for d in summary["dims"]}
    for m, n, k, warps, stages in GRID:
        config = dict(default, BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, num_warps=warps, num_stages=stages)
        if all(block_size_allowed(config[b], default=d["default"], extent=d["extent"], even=d["even"],
                                  minimum=d["min"]) for b, d in blocks.items() if isinstance(d["extent"], int)):
            found.setdefault("grid " + _label(config), config)
    return first_names(found)


def _label(config: dict) -> str:
    text = f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']} w{config['num_warps']} s{config['num_stages']}"
    extra = [f"{key}={config[key]}" for key in ("GROUP_M", "PROGRAMS_PER_SM") if key in config]
    return " ".join([text] + extra)


def generate(out: str, shape=SHAPE) -> None:
    on_path()
    from swiglu import make_swiglu
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    compiled = compile(make_swiglu(*shape), verify=False)
    assert len(compiled.program.kernels) == 1, "SwiGLU should be one kernel"
    path = os.path.join(out, "swiglu.py")
    compiled.save(path)
    kernel = compiled.program.kernels[0]
    summary = load_module(path).TILE_SUMMARY[kernel.name]
    variants = _variants(kernel, summary, shape)
    write_json(os.path.join(out, "variants.json"), {"kernel": kernel.name, "shape": shape, "variants": variants})
    print(kernel.name, len(summary["dots"]), "dots,", len(variants), "variants; default", variants["default"])


def _peers(x, wg, wu):
    import torch
    import torch.nn.functional as F

    def eager():
        return F.silu(F.linear(x, wg)) * F.linear(x, wu)

    both = torch.cat([wg, wu])

    def concatenated():
        gate, up = F.linear(x, both).chunk(2, dim=1)
        return F.silu(gate) * up

    return {"cuBLAS eager (two F.linear, silu*mul)": eager, "cuBLAS eager, one GEMM of [Wg; Wu]": concatenated,
            "torch.compile (default mode)": torch.compile(eager)}


def run(folder: str, out: str, device: str = "cuda", timed: bool = True, deadline: float = 80.0) -> list[dict]:
    import torch

    start = time.monotonic()
    sys.path.insert(0, ROOT)
    from tir_passes.contracts.gpu_specs import gpu_for_device, gpu_spec
    from triton_codegen.gpu_timing import assigned
    from triton_codegen.hardware_model import predict

    spec = gpu_for_device(torch.cuda.get_device_name()) if device == "cuda" else gpu_spec("H200")
    with open(os.path.join(folder, "variants.json")) as handle:
        table = json.load(handle)
    module, name = load_module(os.path.join(folder, "swiglu.py")), table["kernel"]
    m, n, k = table["shape"]
    flops = 2.0 * 2 * m * n * k
    generator = torch.Generator(device=device).manual_seed(0)
    x, wg, wu = (torch.randn(*s, generator=generator, device=device).div_(8).half() for s in ((m, k), (n, k), (n, k)))
    y = torch.empty(m, n, device=device, dtype=torch.float16)
    gate = x.float() @ wg.float().T
    reference = gate * torch.sigmoid(gate) * (x.float() @ wu.float().T)
    rows = []

    def record(row, fn):
        row["error"] = ((fn().float() - reference).norm() / reference.norm()).item()
        if timed:
            row["us"] = _time(fn)
            row["tflops"] = flops / row["us"] * 1e-6
        rows.append(row)
        print(json.dumps(row), flush=True)

    if device == "cuda":
        for label, fn in _peers(x, wg, wu).items():
            try:
                record({"variant": label, "peer": True}, fn)
            except Exception as err:  # noqa: BLE001 - reported, the rest goes on
                rows.append({"variant": label, "peer": True, "failed": failure(err)})
    summary = module.TILE_SUMMARY[name]
    for label, config in table["variants"].items():
        row = {"variant": label, "config": config}
        if time.monotonic() - start > deadline and label != "default":
            rows.append(dict(row, skipped="deadline"))
            continue
        try:
            row["model_us"] = predict(summary, config, spec, {}).seconds * 1e6
            with assigned(module, {name: config}):
                def ours():
                    module.run(x, wg, wu, y)
                    return y
                y.fill_(float("nan"))
                record(row, ours)
        except Exception as err:  # noqa: BLE001 - reported, the rest goes on
            rows.append(dict(row, failed=failure(err)))
            print(json.dumps(rows[-1]), flush=True)
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else device, "shape": [m, n, k],
              "seconds": time.monotonic() - start, "rows": rows}
    if out:
        write_json(out, result)
    _print_summary(rows)
    return rows


def _print_summary(rows: list[dict]) -> None:
    timed = [row for row in rows if row.get("us")]
    compiled = next((row["us"] for row in timed if row["variant"].startswith("torch.compile")), None)
    for row in sorted(timed, key=lambda row: row["us"]):
        ratio = f"{compiled / row['us']:.3f}x torch.compile" if compiled else ""
        print(f"{row['us']:9.1f} us  {ratio:>22}  {row['variant']}")


def _time(fn) -> float:
    return bench_us(fn, rep=50)


def smoke() -> None:
    """Every variant of a small shape in the interpreter, on the CPU: the run path and the errors."""
    def generate_and_run(folder):
        generate(folder, SMOKE_SHAPE)
        return run(folder, "", device="cpu", timed=False, deadline=1e9)

    interpreted_smoke(generate_and_run)


def _run_command(folder: str, out: str, *options: str) -> None:
    limit = float(options[options.index("--deadline") + 1]) if "--deadline" in options else 80.0
    run(folder, out, deadline=limit)


if __name__ == "__main__":
    command(sys.argv, generate, smoke, _run_command)
