"""Generate the GPU check of compile(deterministic=True) (issue 20), here with TVM:

    python benchmarks/determinism_generate.py generated-determinism [--only NAME,...]   # then, on the GPU:
    python benchmarks/determinism_gpu.py generated-determinism [OUT.json]

For the norms, softmax and matmul: one module per batch size (1, 7, 33, 300 rows, static sizes:
each compile takes its own default tiles) with the flag, and the same without it (what the flag
changes); rmsnorm with a symbolic row count (one module for every batch, launched with a size of 1
too). Rows that fit one tile (whole rows, read once) and rows of 20000 (fixed chunks). The GPU side
runs each on the first rows of the same inputs and compares every row bit for bit, and every
config of the largest batch's module with its default (docs/determinism.md).

GEMMs (their only sum a tl.dot: K pinned, the M/N tiles free above the MMA floors) also get probes:
configs of other BLOCK_M and BLOCK_N (the wide 128x256 and 256x128 tiles among them), warps 4 and 8,
GROUP_M and, for a persistent kernel, PROGRAMS_PER_SM, each legal for the module's tile summary
(search_space.config_problem); the GPU side runs every config and probe with descriptors on and
off (both variants). The batch modules of matmul 300x12288x256 take other tiles themselves (64x128
at 4 warps for 1 row, 128x256 at 8 warps and persistent for 300).
"""

from __future__ import annotations

import itertools
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)

BATCHES = (1, 7, 33, 300)


def cases():
    """(name, make(batch) -> PrimFunc, symbolic rows?, output parameter, the parameters cut to the batch)."""
    from layernorm import make_layernorm
    from matmul import make_matmul
    from rmsnorm import make_rmsnorm
    from softmax import make_softmax

    return [
        ("rmsnorm_fp16_4096", lambda b: make_rmsnorm(4096, "float16"), True, "Y", ("X", "Y")),
        # rows of 700 fp32: a row stride Triton does not know to be a multiple of 16 (1-element
        # loads), and tiles that do not divide the tensor (where a TMA variant would run)
        ("rmsnorm_fp32_700", lambda b: make_rmsnorm(700), True, "Y", ("X", "Y")),
        ("layernorm_fp32_700", lambda b: make_layernorm(b, 700), False, "Y", ("X", "Y")),
        # rows longer than one tile (16384): fixed chunks, the online softmax
        ("rmsnorm_fp32_20000", lambda b: make_rmsnorm(20000), True, "Y", ("X", "Y")),
        ("softmax_fp16_20000", lambda b: make_softmax(b, 20000, "float16"), False, "Out", ("A", "Out")),
        ("layernorm_fp16_8192", lambda b: make_layernorm(b, 8192, "float16"), False, "Y", ("X", "Y")),
        ("softmax_fp32_700", lambda b: make_softmax(b, 700), False, "Out", ("A", "Out")),
        ("softmax_fp16_8192", lambda b: make_softmax(b, 8192, "float16"), False, "Out", ("A", "Out")),
        ("matmul_fp16_300x512x1024", lambda b: make_matmul(b, 512, 1024), False, "C", ("A", "C")),
        ("matmul_fp16_300x12288x256_out_fp16", lambda b: make_matmul(b, 12288, 256, "float16", "float16"), False,
         "C", ("A", "C")),
    ]


PROBE_TILES = ((64, 64), (64, 256), (128, 128), (128, 256), (256, 128), (256, 64))


def probes(module) -> dict[str, list[dict]]:
    """Per kernel with floors (a deterministic GEMM), configs beyond the module's own that keep its
    pins and floors: other M/N tiles at 4 and 8 warps, GROUP_M 4, PROGRAMS_PER_SM 1 where persistent."""
    from tir_passes.contracts.gemm_price import ACCUMULATOR_ELEMENTS_PER_THREAD
    from triton_codegen.search_space import config_problem

    found = {}
    for name, configs in module.CONFIGS.items():
        summary = module.TILE_SUMMARY[name]
        if not summary.get("at_least"):
            continue
        default, extra = configs[0], []
        for (m, n), warps in itertools.product(PROBE_TILES, (4, 8)):
            config = {**default, "BLOCK_M": m, "BLOCK_N": n, "num_warps": warps, "num_stages": 3}
            if m * n > ACCUMULATOR_ELEMENTS_PER_THREAD * 32 * warps:
                continue   # its accumulators would spill: slow, and not what a plan picks
            if summary["group_m"]:
                config["GROUP_M"] = 4
            if "persistent" in summary:
                config["PROGRAMS_PER_SM"] = 1
            if config not in configs and not config_problem(summary, default, config, {}):
                extra.append(config)
        found[name] = extra
    return found


def main(folder: str, only: tuple[str, ...] = ()) -> None:
    from triton_codegen import compile

    os.makedirs(folder, exist_ok=True)
    entries = []
    for name, make, symbolic, output, cut in cases():
        if only and name not in only:
            continue
        for deterministic in (True, False):
            modules = {}
            for batch in BATCHES:
                if symbolic and modules:
                    modules[batch] = modules[BATCHES[0]]
                    continue
                kernel = compile(make(batch), verify=False, deterministic=deterministic)
                label = f"{name}_{'det' if deterministic else 'free'}" + ("" if symbolic else f"_b{batch}")
                modules[batch] = os.path.basename(kernel.save(os.path.join(folder, label + ".py")))
            params = [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape)} for p in kernel.program.params]
            entries.append({"name": name, "deterministic": deterministic, "symbolic": symbolic, "output": output,
                            "cut": list(cut), "params": params, "modules": {str(b): m for b, m in modules.items()},
                            "probes": probes(kernel.module(interpret=True)) if deterministic else {}})
            print(f"{name} deterministic={deterministic}: {len(set(modules.values()))} module(s)", flush=True)
    with open(os.path.join(folder, "determinism.json"), "w") as handle:
        json.dump({"batches": list(BATCHES), "cases": entries}, handle, indent=1)


if __name__ == "__main__":
    only = tuple(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else ()
    main(sys.argv[1] if len(sys.argv) > 1 else "generated-determinism", only)
