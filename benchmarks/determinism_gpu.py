"""Check compile(deterministic=True) on a GPU with torch + triton only (modules from
benchmarks/determinism_generate.py):

    python benchmarks/determinism_gpu.py generated-determinism [OUT.json]

For each case, with and without the flag: every batch's module runs on the first rows of the same
inputs, and each row's output bits are compared with the same row in the largest batch; then every
config of the largest batch's module runs and is compared with its default config. With the flag
every comparison must be equal (the promise); without it, differences show what the flag buys.

A deterministic GEMM (a kernel with floors: its K tile pinned, its M/N tiles free) also runs the
generator's probes (other M/N tiles, the wide ones, warps, GROUP_M, PROGRAMS_PER_SM), and every
config and probe with the descriptor variant switched off too (USE_DESCRIPTORS = False: the
pointer kernel): the H200 proves or refutes that M/N tiles and the variant leave the bits alone.
A config the GPU cannot run (OutOfResources: its shared memory) is listed as refused, not equal.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # cpu: the interpreter (TRITON_INTERPRET=1), a smoke run
DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
BYTES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def load(folder: str, module: str):
    spec = importlib.util.spec_from_file_location(module[:-3], os.path.join(folder, module))
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def inputs(entry: dict, rows: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator(device=DEVICE).manual_seed(0)
    tensors = {}
    for param in entry["params"]:
        shape = [rows if isinstance(d, str) else d for d in param["shape"]]
        tensors[param["name"]] = torch.randn(shape, device=DEVICE, generator=generator).to(DTYPES[param["dtype"]])
    return tensors


def run(module, entry: dict, tensors: dict[str, torch.Tensor], rows: int) -> torch.Tensor:
    args = [tensors[p["name"]][:rows].clone() if p["name"] in entry["cut"] else tensors[p["name"]].clone()
            for p in entry["params"]]
    module.run(*args)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    out = args[[p["name"] for p in entry["params"]].index(entry["output"])]
    return out.contiguous().view(-1).view(BYTES[out.element_size()]).view(rows, -1)


def check(folder: str, entry: dict, batches: list[int]) -> dict:
    largest = batches[-1]
    tensors = inputs(entry, largest)
    modules = {b: load(folder, entry["modules"][str(b)]) for b in batches}
    reference = run(modules[largest], entry, tensors, largest)
    same_rows = {str(b): bool(torch.equal(run(modules[b], entry, tensors, b), reference[:b])) for b in batches[:-1]}
    module, differing, refused, total, seen = modules[largest], [], [], 0, set()
    variants = {str(b): dict(getattr(modules[b], "VARIANTS_RUN", {})) for b in batches}  # pointers or descriptors
    probes = entry.get("probes", {})
    for name, configs in module.CONFIGS.items():
        default, listed = module.CHOSEN[name], len(configs)
        configs.extend(probes.get(name, []))
        switches = (True, False) if name in probes else (True,)   # a GEMM: both variants of every config
        for index, descriptors in itertools.product(range(len(configs)), switches):
            if index == default and descriptors:
                continue
            total += 1
            module.CHOSEN[name], module.USE_DESCRIPTORS = index, descriptors
            try:
                if not torch.equal(run(module, entry, tensors, largest), reference):
                    differing.append({"kernel": name, "config": configs[index], "descriptors": descriptors})
                seen.add(module.VARIANTS_RUN.get(name, "pointers").split(":")[0])
            except Exception as err:  # noqa: BLE001  a config the GPU refuses is reported, not counted as equal
                failure = {"kernel": name, "config": configs[index], "descriptors": descriptors,
                           "error": str(err).splitlines()[0][:200]}
                (refused if type(err).__name__ == "OutOfResources" else differing).append(failure)
            finally:
                module.CHOSEN[name], module.USE_DESCRIPTORS = default, True
        del configs[listed:]
    kept = all(same_rows.values()) and not differing
    return {"name": entry["name"], "deterministic": entry["deterministic"], "rows_equal": same_rows,
            "configs": total, "configs_differing": differing, "configs_refused": refused, "bitwise_equal": kept,
            "variants_run": variants, "variants_seen_across_configs": sorted(seen)}


def main(folder: str, out: str | None) -> int:
    with open(os.path.join(folder, "determinism.json")) as handle:
        plan = json.load(handle)
    results = []
    for entry in plan["cases"]:
        result = check(folder, entry, plan["batches"])
        results.append(result)
        flag = "with the flag" if entry["deterministic"] else "without"
        print(f"{entry['name']} {flag}: rows {result['rows_equal']}, {len(result['configs_differing'])} of "
              f"{result['configs']} configs differ ({len(result['configs_refused'])} refused; variants "
              f"{result['variants_seen_across_configs']}) -> {'EQUAL' if result['bitwise_equal'] else 'differs'}",
              flush=True)
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter)"
    report = {"device": device, "torch": torch.__version__,
              "triton": __import__("triton").__version__, "cases": results}
    if out:
        with open(out, "w") as handle:
            json.dump(report, handle, indent=1)
    broken = [r["name"] for r in results if r["deterministic"] and not r["bitwise_equal"]]
    print("promise kept" if not broken else f"PROMISE BROKEN: {', '.join(broken)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
