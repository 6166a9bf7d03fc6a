"""Generate the GPU check of compile(deterministic=True) (issue 20), here with TVM:

    python benchmarks/determinism_generate.py generated-determinism     # then, on the GPU machine:
    python benchmarks/determinism_gpu.py generated-determinism [OUT.json]

For the norms, softmax and matmul: one module per batch size (1, 7, 33, 300 rows, static sizes:
each compile takes its own default tiles) with the flag, and the same without it (what the flag
changes); rmsnorm with a symbolic row count (one module for every batch, launched with a size of 1
too). Rows that fit one tile (whole rows, read once) and rows of 20000 (fixed chunks). The GPU side
runs each on the first rows of the same inputs and compares every row bit for bit, and every
config of the largest batch's module with its default (docs/determinism.md).
"""

from __future__ import annotations

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
    ]


def main(folder: str) -> None:
    from triton_codegen import compile

    os.makedirs(folder, exist_ok=True)
    entries = []
    for name, make, symbolic, output, cut in cases():
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
                            "cut": list(cut), "params": params, "modules": {str(b): m for b, m in modules.items()}})
            print(f"{name} deterministic={deterministic}: {len(set(modules.values()))} module(s)", flush=True)
    with open(os.path.join(folder, "determinism.json"), "w") as handle:
        json.dump({"batches": list(BATCHES), "cases": entries}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "generated-determinism")
