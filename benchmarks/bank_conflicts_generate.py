"""Emit CUDA for the shared-memory examples before and after BankConflictFreeTiling, with the
bank-conflict model's predictions, into generated/cuda/ (TVM needed; no GPU).

    python benchmarks/bank_conflicts_generate.py   # then on the GPU: benchmarks/bank_conflicts_gpu.py
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm import tirx  # noqa: E402

from shared_memory import matmul_shared, transpose_shared  # noqa: E402
from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling  # noqa: E402
from tir_passes.analyses.bank_conflicts import analyze_kernel, lower_for_cuda  # noqa: E402


def launch_shape(kernel) -> tuple[list[int], list[int]]:
    grid, block = {"x": 1, "y": 1, "z": 1}, {"x": 1, "y": 1, "z": 1}

    def visit(node):
        if node.attr_key == "thread_extent":
            tag = str(node.node.thread_tag)
            (grid if tag.startswith("blockIdx") else block)[tag[-1]] = int(node.value)

    tvm_ffi.structural_walk(kernel.body, (tirx.AttrStmt, visit))
    return [grid["x"], grid["y"], grid["z"]], [block["x"], block["y"], block["z"]]


def prediction(kernel) -> dict:
    grid, block = launch_shape(kernel)
    warps = max(1, block[0] * block[1] * block[2] // 32) * grid[0] * grid[1] * grid[2]
    totals = {"ld_wavefronts": 0, "st_wavefronts": 0, "ld_conflicts": 0, "st_conflicts": 0}
    for access in analyze_kernel(kernel):
        kind = "ld" if access.kind == "load" else "st"
        totals[f"{kind}_wavefronts"] += access.wavefronts * access.executions * warps
        totals[f"{kind}_conflicts"] += access.conflicts * access.executions * warps
    return {"grid": grid, "block": block, "predicted": totals}


def main(out_dir: str = os.path.join(ROOT, "generated", "cuda")) -> None:
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for name, mod in (("transpose", transpose_shared), ("matmul", matmul_shared)):
        for variant, variant_mod in (("as_scheduled", mod), ("conflict_free", BankConflictFreeTiling()(mod))):
            kernel = lower_for_cuda(variant_mod)[0]
            target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host="llvm")
            source = tvm.compile(variant_mod, target=target).mod.imports[0].inspect_source()
            path = f"{name}_{variant}.cu"
            with open(os.path.join(out_dir, path), "w") as handle:
                handle.write(source)
            params = [p.name for p in variant_mod["main"].params]
            entries.append({"name": f"{name}_{variant}", "source": path, "kernel": str(kernel.attrs["global_symbol"]),
                            "params": params, "n": 1024, **prediction(kernel)})
            print(entries[-1]["name"], entries[-1]["predicted"])
    with open(os.path.join(out_dir, "kernels.json"), "w") as handle:
        json.dump(entries, handle, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
