"""A saved module's own tune() on the GPU: its run() timed before and after, in one process.

    python benchmarks/suite.py generate generated/suite                     # here, with TVM
    python3 benchmarks/module_tune_gpu.py generated/suite OUT.json [names]  # on the GPU, no TVM

tune() is tir-triton's tuner with the never-slower rule (triton_codegen/tuning.tune_loaded): the
default stays unless a finalist beats it beyond the noise. Each module's run() is timed with
triton.testing.do_bench (median, L2 flushed) before tune() and after, on the same arguments;
`after / before` above 1 beyond the noise would be a slower tuned module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _load(path: str):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time(module, args) -> float:
    from triton.testing import do_bench

    module.run(*args)
    return float(do_bench(lambda: module.run(*args), warmup=25, rep=200, return_mode="median"))


def measure(path: str, sizes: dict[str, int]) -> dict:
    from triton_codegen.tuning import random_arguments

    module = _load(path)
    args = random_arguments(module.PARAMS, sizes, "cuda")
    before = _time(module, args)
    report = module.tune(*args)
    after = _time(module, args)
    return {"module": os.path.basename(path), "before_ms": before, "after_ms": after, "after_over_before": after / before,
            "kept_default": report["kept_default"], "noise": report["noise"], "chosen": report["chosen"]}


def main(argv: list[str]) -> int:
    folder, out, names = argv[0], argv[1], argv[2:]
    os.environ.setdefault("TIR_TRITON_CACHE", tempfile.mkdtemp(prefix="tir-triton-tune-cache-"))
    cases = {c["name"]: c for c in json.load(open(os.path.join(folder, "suite_cases.json")))}
    results = []
    for name in names or sorted(cases):
        case = cases[name]
        try:
            results.append({"case": name, **measure(os.path.join(folder, case["module"]), case.get("shape_vars", {}))})
        except Exception as err:  # noqa: BLE001 - one case's failure is reported, the others still run
            results.append({"case": name, "error": f"{type(err).__name__}: {str(err)[:300]}"})
        print(json.dumps(results[-1], default=str), flush=True)
        with open(out, "w") as handle:
            json.dump(results, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
