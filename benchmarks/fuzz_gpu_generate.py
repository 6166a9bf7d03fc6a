"""Prepare the GPU fuzz campaign here, where TVM is: random programs (tests/fuzz/generator.py),
each compiled to a standalone Triton module, with its input data and TVM's llvm outputs.

    PYTHONPATH=$PWD python benchmarks/fuzz_gpu_generate.py --seed 0 --count 750 --scale 2 --out .gpu/fuzz0
    # carry .gpu/fuzz0 (git-ignored, about 49 MB) to the GPU machine (torch + triton only), then:
    python3 benchmarks/fuzz_gpu_run.py .gpu/fuzz0 --jobs 8 --sanitize-every 20 --time-limit 400 \
        --results $OUT/results.json
    # 5,000 programs and more: seven such chunks, seeds 0, 750, ..., 4500 (docs/fuzzing.md)

The folder (git-ignored) holds, per program NAME: NAME.py (the Triton module), NAME.tir.py (the
S-TIR program: the reproducer), NAME.npz (inputs `in<d>__<param>` and TVM's results
`out<d>__<param>`, left out for a buffer the program does not change, for each data set d:
standard normal, then strictly negative), and one cases.json entry (parameters in call order, scalar values, tolerances per dtype). Programs the
compiler refuses or fails on are not written; they are listed in skipped.json with the outcome.
--scale multiplies the generator's extents (70 -> 70 * scale) and its nest budget (by scale²).

Each program is prepared in a forked child (tir_passes/checks/sandbox.py) with a wall-clock limit
(--time-limit, 120 s): TVM's C++ cannot be interrupted in process, and a program on which it hangs
(seed 5178 at scale 2, in tvm.compile) or crashes is listed in skipped.json as a "timeout" or
"crash" and the campaign goes on. The TVM reference follows the kernels' accumulation rule
(16-bit reductions accumulate in fp32, docs/verification.md), so the GPU run compares like with like.
A longer campaign is one command: --count N --chunk 750 writes chunks OUT/fuzz0, OUT/fuzz1, ...
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
from tir_passes.checks.sandbox import ChildError, Crash, run_isolated
from triton_codegen import compile


def storable(array: np.ndarray) -> np.ndarray:
    """`array` as np.load reads it back without ml_dtypes: bfloat16 as float32 (exactly; the run
    script casts it back by the parameter's dtype in cases.json)."""
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


SAVE_EVERY = 25   # programs between rewrites of cases.json


def prepare(seed: int, scale: int, out_dir: str, verify: bool) -> dict:
    """Write one program's module, data and expected outputs; return its cases.json entry."""
    program = generate(seed, scale=scale)
    tir_path = write_program(program, out_dir)
    os.replace(tir_path, os.path.join(out_dir, f"{program.name}.tir.py"))
    func = load_program(os.path.join(out_dir, f"{program.name}.tir.py"))
    try:
        kernel = compile(func, verify=verify, backend=program.backend)
        reference = ReferenceRun.of(func, sizes=program.sizes or None)
    except Exception as err:  # noqa: BLE001 - classified and listed, the campaign goes on
        kind, detail = classify(err, func, program.sizes)
        return {"name": program.name, "seed": seed, "family": program.family, "skipped": kind, "detail": detail[:2000]}
    kernel.save(os.path.join(out_dir, f"{program.name}.py"))
    arrays = {}
    for index, (inputs, outputs) in enumerate(zip(reference.datasets, reference.outputs)):
        for buf in buffer_params(reference.concrete):
            stored_in, stored_out = storable(inputs[buf.name]), storable(outputs[buf.name])
            arrays[f"in{index}__{buf.name}"] = stored_in
            if not _same(stored_in, stored_out):   # a buffer the program leaves as it was: its input is its result
                arrays[f"out{index}__{buf.name}"] = stored_out
    np.savez(os.path.join(out_dir, f"{program.name}.npz"), **arrays)
    params = []
    for param in func.params:
        if param.name in reference.scalars:
            params.append({"name": param.name, "kind": "scalar", "value": reference.scalars[param.name]})
        else:
            params.append({"name": param.name, "kind": "buffer", "dtype": str(param.dtype)})
    return {"name": program.name, "seed": seed, "family": program.family, "module": f"{program.name}.py",
            "data": f"{program.name}.npz", "datasets": len(reference.datasets), "params": params,
            "sizes": program.sizes, "kernels": len(kernel.program.kernels), "backend": program.backend}


def prepare_isolated(seed: int, scale: int, out_dir: str, verify: bool, seconds: float) -> dict:
    """`prepare` in a forked child: a hang or a crash in TVM is a skipped program, not the end."""
    if seconds <= 0:
        return prepare(seed, scale, out_dir, verify)
    try:
        entry = run_isolated(lambda: prepare(seed, scale, out_dir, verify), seconds)
    except ChildError as err:
        return {"name": f"fuzz_{seed}", "seed": seed, "family": generate(seed, scale=scale).family,
                "skipped": "internal", "detail": str(err)[:2000]}
    if isinstance(entry, Crash):
        kind = "timeout" if entry.signal == "timeout" else "crash"
        return {"name": f"fuzz_{seed}", "seed": seed, "family": generate(seed, scale=scale).family, "skipped": kind,
                "detail": f"preparing the program {entry.describe()}"}
    return entry


def write_chunk(seeds: range, scale: int, out_dir: str, verify: bool, seconds: float) -> tuple[int, int]:
    os.makedirs(out_dir, exist_ok=True)
    cases, skipped = [], []
    for done, seed in enumerate(seeds, 1):
        entry = prepare_isolated(seed, scale, out_dir, verify, seconds)
        (skipped if "skipped" in entry else cases).append(entry)
        if "skipped" in entry:
            print(f"seed {seed} ({entry['family']}): {entry['skipped']}: {entry['detail'].splitlines()[0][:200]}", flush=True)
        if done % SAVE_EVERY == 0 or done == len(seeds):   # an interrupted chunk is a campaign of what it holds
            _write_json(out_dir, "cases.json", {"tolerances": TOLERANCES, "scale": scale, "cases": cases})
            _write_json(out_dir, "skipped.json", skipped)
    return len(cases), len(skipped)


def _write_json(out_dir: str, name: str, value) -> None:
    """Atomically: a reader (the packer) never sees half a file."""
    partial = os.path.join(out_dir, name + ".partial")
    with open(partial, "w") as handle:
        json.dump(value, handle, indent=1)
    os.replace(partial, os.path.join(out_dir, name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--scale", type=int, default=2, help="multiplies the generator's sizes")
    parser.add_argument("--out", default=os.path.join(ROOT, ".gpu", "fuzz"))
    parser.add_argument("--verify", action="store_true", help="compile with the per-pass checks (slower)")
    parser.add_argument("--time-limit", type=float, default=120.0,
                        help="wall-clock seconds per program before it is skipped as a timeout (0: no child)")
    parser.add_argument("--chunk", type=int, default=0,
                        help="programs per folder OUT/fuzz<k> (one device call each); 0: one folder, OUT")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    seeds = range(args.seed, args.seed + args.count)
    size = args.chunk or len(seeds) or 1
    folders = [(seeds[i:i + size], os.path.join(args.out, f"fuzz{i // size}") if args.chunk else args.out)
               for i in range(0, len(seeds), size)]
    written = skipped = 0
    for chunk, folder in folders:
        done = write_chunk(chunk, args.scale, folder, args.verify, args.time_limit)
        written, skipped = written + done[0], skipped + done[1]
        print(f"{done[0]} programs written to {folder}, {done[1]} skipped", flush=True)
    seconds = time.perf_counter() - started
    print(f"{written} programs written, {skipped} skipped, in {seconds:.0f}s "
          f"({(written + skipped) / max(seconds, 1e-9):.2f} programs/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
