"""GEMM tiles measured (issue 17): the tile size model's defaults against the tiles it chose before
(the base 128×128×64 / 16×128×64 tiles), its other candidates, the persistent grid, and cuBLAS.

    python benchmarks/gemm_tiles_gpu.py generate DIR        # here (TVM): DIR/<case>.py, DIR/variants.json
    python3 benchmarks/gemm_tiles_gpu.py run DIR OUT.json    # on the GPU (torch, triton, the repo's TVM-free parts)
    python benchmarks/gemm_tiles_gpu.py smoke                # CPU: small shapes, every variant in the interpreter

Each module's output is checked against float64 for every variant; `run()` is timed with do_bench
(median, L2 flushed), once per variant (a config assigned to the kernel for the while), beside
cuBLAS (torch.matmul / F.linear, fp16 out). Each row carries the hardware model's prediction of the
variant (triton_codegen/hardware_model.py from the module's TILE_SUMMARY), for model-vs-measured.
"""

import glob
import json
import os
import sys

from probe_common import (ROOT, bench_us, command, compiled_into, default_config, failure, first_names,
                          gemm_program, interpreted_smoke, load_module, write_json)

# (program, M, N, K): linear is X·Wᵀ with a fp16 result, matmul A·B with a fp32 one (as the suite's)
CASES = {
    "linear_decode_16x4096x4096": ("linear", 16, 4096, 4096),
    "linear_skinny_32x11008x4096": ("linear", 32, 11008, 4096),
    "matmul_3000x5000x1000": ("matmul", 3000, 5000, 1000),
    "matmul_2000x3000x700": ("matmul", 2000, 3000, 700),
    "matmul_4096": ("matmul", 4096, 4096, 4096),
    "linear_8192x11008x4096": ("linear", 8192, 11008, 4096),
}
SMOKE = {"linear_small": ("linear", 16, 96, 64), "matmul_small": ("matmul", 150, 100, 40)}


def _variants(kernel, extents, out_bytes) -> dict[str, dict]:
    """Named configs of the kernel: the base tiles, each candidate of the size model, and the
    persistent grids (1 and 2 programs an SM) of the default."""
    from tir_passes.contracts.gpu_specs import gpu_spec
    from tir_passes.passes import tile_sizes

    spec = gpu_spec("H200")
    blocks = {dim.name: dim.block for dim in kernel.dims}
    names = list(dict.fromkeys(blocks.values()))   # BLOCK_M, BLOCK_N, BLOCK_K in the kernel's order
    default = default_config(kernel)
    sizes = tile_sizes.base_sizes(spec, "float16", extents)
    base = tile_sizes.GemmTiles(sizes["M"], sizes["N"], sizes["K"], tile_sizes.PIPELINE_STAGES,
                                tile_sizes.contraction_warps(sizes))
    candidates = [base] + tile_sizes.candidates_wide(spec, 2, extents, base, out_bytes=out_bytes) + \
        tile_sizes.candidates_filling(spec, 2, extents, base, batch=1)
    found = {"default": default}
    for tiles in candidates:
        config = dict(default, num_warps=tiles.warps, num_stages=tiles.stages)
        config.update(zip(names, (tiles.m, tiles.n, tiles.k)))
        label = f"{tiles.m}x{tiles.n}x{tiles.k} s{tiles.stages} w{tiles.warps}"
        found.setdefault(("base " if tiles == base else "") + label, config)
        if tiles.stages != 4:
            found.setdefault(f"{label} (4 stages)", dict(config, num_stages=4))
    if kernel.persistent:
        for programs in (1, 2):
            found[f"default, persistent {programs}/SM"] = dict(default, PROGRAMS_PER_SM=programs)
    return first_names(found)


def generate(out: str, cases=CASES) -> None:
    os.makedirs(out, exist_ok=True)
    table = {}
    for name, (kind, m, n, k) in cases.items():
        compiled = compiled_into(out, name, gemm_program(kind, m, n, k))
        kernel = compiled.program.kernels[0]
        table[name] = {"kernel": kernel.name, "variants": _variants(kernel, {"M": m, "N": n, "K": k},
                                                                     2 if kind == "linear" else 4)}
        print(name, kernel.name, compiled.program.kernels[0].block_sizes, len(table[name]["variants"]), "variants")
    write_json(os.path.join(out, "variants.json"), table)


def run(folder: str, out: str, device: str = "cuda", timed: bool = True) -> list[dict]:
    import torch

    sys.path.insert(0, ROOT)
    from tir_passes.contracts.gpu_specs import gpu_for_device, gpu_spec
    from triton_codegen.gpu_timing import assigned
    from triton_codegen.hardware_model import predict

    spec = gpu_for_device(torch.cuda.get_device_name()) if device == "cuda" else gpu_spec("H200")
    with open(os.path.join(folder, "variants.json")) as handle:
        table = json.load(handle)
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        case = os.path.basename(path)[:-3]
        module, entry = load_module(path), table[case]
        kind = "linear" if "linear" in case else "matmul"
        generator = torch.Generator(device=device).manual_seed(0)
        a, b, c = ((torch.randn(*p[3], generator=generator, device=device).to(getattr(torch, p[2])) if not p[4]
                    else torch.full(p[3], float("nan"), device=device, dtype=getattr(torch, p[2])))
                   for p in module.PARAMS)
        reference = a.double() @ (b.double().T if kind == "linear" else b.double())
        peer = (lambda: torch.nn.functional.linear(a, b)) if kind == "linear" else (lambda: torch.matmul(a, b))
        cublas = _time(peer) if timed else None
        summary = module.TILE_SUMMARY[entry["kernel"]]
        sizes = {}
        for label, config in entry["variants"].items():
            row = {"case": case, "variant": label, "config": config, "cublas_us": cublas}
            try:
                with assigned(module, {entry["kernel"]: config}):
                    c.fill_(float("nan"))
                    module.run(a, b, c)
                    row["error"] = ((c.double() - reference).norm() / reference.norm()).item()
                    row["us"] = _time(lambda: module.run(a, b, c)) if timed else None
                row["model_us"] = predict(summary, config, spec, sizes).seconds * 1e6
            except Exception as err:  # noqa: BLE001 - reported, the rest goes on
                row["failed"] = failure(err)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if out:
        write_json(out, rows)
    return rows


def _time(fn) -> float:
    return bench_us(fn, rep=60)


def smoke() -> None:
    """Every variant of small cases in the interpreter, on the CPU: the run path and the errors."""
    def generate_and_run(folder):
        generate(folder, SMOKE)
        return run(folder, "", device="cpu", timed=False)

    interpreted_smoke(generate_and_run)


if __name__ == "__main__":
    command(sys.argv, generate, smoke, lambda folder, out, *_: run(folder, out))
