"""Generate the GPU smoke-run kernels here (TVM needed) into generated/, with cases.json.

    python benchmarks/generate.py            # then carry generated/ to the GPU and run run_gpu.py
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from cases import cases  # noqa: E402
from triton_codegen import compile  # noqa: E402


def _shape(spec, sizes):
    return [d if isinstance(d, int) else sizes[d] for d in spec]


def main(out_dir: str = os.path.join(ROOT, "generated")) -> None:
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for case in cases():
        started = time.perf_counter()
        kernel = compile(case["func"], verify=False)
        path = kernel.save(os.path.join(out_dir, case["name"] + ".py"))
        params = [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "shape": _shape(p.shape, case["sizes"]) if p.kind == "buffer" else [],
                   "written": p.written} for p in kernel.program.params]
        entries.append({"name": case["name"], "module": os.path.basename(path), "params": params, "sizes": case["sizes"],
                        "bytes": case["bytes"], "flops": case["flops"], "kernels": len(kernel.program.kernels)})
        print(f"{case['name']}: {len(kernel.program.kernels)} kernel(s) in {time.perf_counter() - started:.1f}s")
    with open(os.path.join(out_dir, "cases.json"), "w") as handle:
        json.dump(entries, handle, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
