"""Prepare the GPU fuzz campaign here, where TVM is: random programs (tests/fuzz/generator.py),
each compiled to a standalone Triton module, with its input data and TVM's llvm outputs.

    PYTHONPATH=$PWD python benchmarks/fuzz_gpu_generate.py --seed 0 --count 750 --scale 2 --out .gpu/fuzz0
    # carry .gpu/fuzz0 (git-ignored, about 49 MB) to the GPU machine (torch + triton only), then:
    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz0 --jobs 8 --sanitize-every 20 --time-limit 400 \
        --results $OUT/results.json
    # 5,000 programs and more: seven such chunks, seeds 0, 750, ..., 4500 (docs/fuzzing.md)

The folder (git-ignored) holds, per program NAME: NAME.py (the Triton module), NAME.tir.py (the
S-TIR program: the reproducer), NAME.npz (inputs `in<d>__<param>` and TVM's results
`out<d>__<param>` for each data set d: standard normal, then strictly negative), and one
cases.json entry (parameters in call order, scalar values, tolerances per dtype). Programs the
compiler refuses or fails on are not written; they are listed in skipped.json with the outcome.
--scale multiplies the generator's extents (70 -> 70 * scale) and its nest budget (by scale²).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TRITON_INTERPRET", "1")   # nothing runs here: Triton must not look for a GPU

import numpy as np

from tests.fuzz.generator import generate
from tests.fuzz.runner import classify, load_program, write_program
from tir_passes.checks.numerics import TOLERANCES, ReferenceRun, buffer_params
from triton_codegen import compile


def storable(array: np.ndarray) -> np.ndarray:
    """`array` as np.load reads it back without ml_dtypes: bfloat16 as float32 (exactly; the run
    script casts it back by the parameter's dtype in cases.json)."""
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def prepare(seed: int, scale: int, out_dir: str, verify: bool) -> dict:
    """Write one program's module, data and expected outputs; return its cases.json entry."""
    program = generate(seed, scale=scale)
    tir_path = write_program(program, out_dir)
    os.replace(tir_path, os.path.join(out_dir, f"{program.name}.tir.py"))
    func = load_program(os.path.join(out_dir, f"{program.name}.tir.py"))
    try:
        kernel = compile(func, verify=verify)
        reference = ReferenceRun.of(func, sizes=program.sizes or None)
    except Exception as err:  # noqa: BLE001 - classified and listed, the campaign goes on
        kind, detail = classify(err, func, program.sizes)
        return {"name": program.name, "seed": seed, "family": program.family, "skipped": kind, "detail": detail[:2000]}
    kernel.save(os.path.join(out_dir, f"{program.name}.py"))
    arrays = {}
    for index, (inputs, outputs) in enumerate(zip(reference.datasets, reference.outputs)):
        for buf in buffer_params(reference.concrete):
            arrays[f"in{index}__{buf.name}"] = storable(inputs[buf.name])
            arrays[f"out{index}__{buf.name}"] = storable(outputs[buf.name])
    np.savez(os.path.join(out_dir, f"{program.name}.npz"), **arrays)
    params = []
    for param in func.params:
        if param.name in reference.scalars:
            params.append({"name": param.name, "kind": "scalar", "value": reference.scalars[param.name]})
        else:
            params.append({"name": param.name, "kind": "buffer", "dtype": str(param.dtype)})
    return {"name": program.name, "seed": seed, "family": program.family, "module": f"{program.name}.py",
            "data": f"{program.name}.npz", "datasets": len(reference.datasets), "params": params,
            "sizes": program.sizes, "kernels": len(kernel.program.kernels)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--scale", type=int, default=2, help="multiplies the generator's sizes")
    parser.add_argument("--out", default=os.path.join(ROOT, ".gpu", "fuzz"))
    parser.add_argument("--verify", action="store_true", help="compile with the per-pass checks (slower)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    cases, skipped = [], []
    for seed in range(args.seed, args.seed + args.count):
        entry = prepare(seed, args.scale, args.out, args.verify)
        (skipped if "skipped" in entry else cases).append(entry)
        if "skipped" in entry:
            print(f"seed {seed} ({entry['family']}): {entry['skipped']}: {entry['detail'].splitlines()[0][:200]}", flush=True)
    with open(os.path.join(args.out, "cases.json"), "w") as handle:
        json.dump({"tolerances": TOLERANCES, "scale": args.scale, "cases": cases}, handle, indent=1)
    with open(os.path.join(args.out, "skipped.json"), "w") as handle:
        json.dump(skipped, handle, indent=1)
    print(f"{len(cases)} programs written to {args.out}, {len(skipped)} skipped, in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
