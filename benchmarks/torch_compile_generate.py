"""Generate the modules of the torch.compile demonstration here (TVM needed), for
benchmarks/torch_compile_gpu.py to run with torch + triton only.

    python benchmarks/torch_compile_generate.py     # generated/torch_compile/{gpu,cpu}/ + cases.json

gpu/ holds the real sizes (softmax 4096x4096, matmul+bias+GELU 4096^3, softmax(Q·Kᵀ) 4096x4096x128
in two kernels); cpu/ the same programs at small odd sizes, for a run in Triton's interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

from attention_scores import make_attention_scores  # noqa: E402
from matmul_bias_gelu import make_matmul_bias_gelu  # noqa: E402
from softmax import make_softmax  # noqa: E402
from triton_codegen import compile  # noqa: E402

# name -> PrimFunc by size set; torch_compile_gpu.py knows each name's model and torch reference
CASES = {
    "softmax_fp16": {"gpu": lambda: make_softmax(4096, 4096, "float16"), "cpu": lambda: make_softmax(37, 29, "float16")},
    "matmul_bias_gelu_fp16": {"gpu": lambda: make_matmul_bias_gelu(4096, 4096, 4096),
                              "cpu": lambda: make_matmul_bias_gelu(37, 29, 21)},
    "attention_scores_fp16": {"gpu": lambda: make_attention_scores(4096, 4096, 128),
                              "cpu": lambda: make_attention_scores(13, 1031, 16)},
}


def describe(kernel, module_file: str) -> dict:
    """What the runner needs without TVM: the module, its kernels, the op's inputs and outputs."""
    outputs = [p for p in kernel.program.params if p.kind == "buffer" and p.written and not p.read]
    inputs = [p for p in kernel.program.params if p not in outputs]
    return {"module": module_file, "kernels": [k.name for k in kernel.program.kernels],
            "inputs": [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape)} for p in inputs],
            "outputs": [{"name": p.name, "dtype": p.dtype, "shape": list(p.shape)} for p in outputs]}


def main(out_dir: str = os.path.join(ROOT, "generated", "torch_compile")) -> None:
    for size in ("gpu", "cpu"):
        folder = os.path.join(out_dir, size)
        os.makedirs(folder, exist_ok=True)
        cases = {}
        for name, funcs in CASES.items():
            started = time.perf_counter()
            kernel = compile(funcs[size](), verify=False)
            path = kernel.save(os.path.join(folder, f"{name}.py"))
            cases[name] = describe(kernel, os.path.basename(path))
            print(f"{size}/{name}: {len(kernel.program.kernels)} kernel(s) in {time.perf_counter() - started:.1f}s")
        with open(os.path.join(folder, "cases.json"), "w") as handle:
            json.dump(cases, handle, indent=1)
            handle.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
