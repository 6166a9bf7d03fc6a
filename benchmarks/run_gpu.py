"""Run the generated kernels on a GPU with torch + triton only: check each against a torch
reference, time it (median of triton.testing.do_bench), then tune its configs and time again.

    python benchmarks/run_gpu.py generated [OUT_DIR]      # on the GPU machine
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16, "int32": torch.int32}


def reference(name: str, args: list[torch.Tensor]) -> dict[int, torch.Tensor]:
    """Expected outputs by parameter index, computed in float32/float64 by torch."""
    f = [a.double() if a.is_floating_point() else a for a in args]
    if name.startswith("elementwise"):
        x, scale, shift = f[0], f[1], f[2]
        return {3: torch.relu(x * scale[None, :] + shift[:, None]) * x}
    if name.startswith("softmax"):
        return {1: torch.softmax(f[0], dim=1)}
    if name.startswith("layernorm"):  # also the one with both moments in one block
        return {3: F.layer_norm(f[0], (f[0].shape[1],), f[1], f[2], eps=1e-5)}
    if name.startswith("cumsum"):
        return {1: torch.cumsum(f[0], dim=1)}
    if name.startswith("argmax"):
        return {1: torch.argmax(f[0], dim=1).to(torch.int32)}
    if name.startswith("rmsnorm"):
        x = f[0]
        return {2: x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * f[1]}
    if name.startswith("matmul_bias_gelu"):
        return {3: F.gelu(f[0] @ f[1] + f[2])}
    if name.startswith("matmul"):
        return {2: f[0] @ f[1]}
    if name.startswith("batch_matmul"):
        return {2: torch.bmm(f[0], f[1])}
    if name.startswith("attention_scores"):
        q, k = f[0], f[1]
        return {2: torch.softmax((q @ k.T) / math.sqrt(q.shape[1]), dim=1)}
    if name.startswith("transpose"):
        return {1: f[0].T}
    if name.startswith("conv2d_nhwc"):
        x, w = f[0].permute(0, 3, 1, 2), f[1].permute(3, 2, 0, 1)
        return {2: F.conv2d(x, w, padding=1).permute(0, 2, 3, 1)}
    if name.startswith("max_pool2d"):
        return {1: F.max_pool2d(f[0], 3, stride=2)}
    raise KeyError(name)


def load(path: str):
    name = "gpu_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_args(case: dict) -> list:
    args = []
    for param in case["params"]:
        if param["kind"] == "scalar":
            args.append(case["sizes"][param["name"]])
            continue
        dtype = DTYPES[param["dtype"]]
        tensor = torch.randn(param["shape"], device="cuda", dtype=torch.float32).to(dtype)
        if param["written"]:  # poison: every element must be written
            tensor.fill_(float("nan") if tensor.is_floating_point() else -12345)
        args.append(tensor)
    return args


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    if not out.is_floating_point():  # indices: exact
        return float((out.long() != ref.long()).sum().item() > 0)
    if torch.isnan(out).any():
        return float("nan")
    diff = (out.double() - ref).norm().item()
    return diff / max(ref.norm().item(), 1e-30)


def run_case(folder: str, case: dict) -> dict:
    module = load(os.path.join(folder, case["module"]))
    args = make_args(case)
    started = time.perf_counter()
    module.run(*args)
    torch.cuda.synchronize()
    first_call = time.perf_counter() - started
    errors = {}
    for index, expected in reference(case["name"], args).items():
        errors[case["params"][index]["name"]] = relative_error(args[index], expected)
    out_dtype = [p["dtype"] for p in case["params"] if p["written"]][0]
    inputs_16bit = any(p["dtype"] in ("float16", "bfloat16") for p in case["params"])
    limit = 2e-2 if (out_dtype != "float32" or inputs_16bit) else 1e-4
    ok = all(e == e and e < limit for e in errors.values())
    default_ms = do_bench(lambda: module.run(*args), warmup=25, rep=100, return_mode="median")
    # the same version timed twice: their difference is this GPU's noise, not a code change
    default_again_ms = do_bench(lambda: module.run(*args), warmup=25, rep=100, return_mode="median")
    tune_started = time.perf_counter()
    tuned = module.tune(*args)
    tune_s = time.perf_counter() - tune_started
    module.run(*args)
    after_tune_errors = {case["params"][i]["name"]: relative_error(args[i], e) for i, e in reference(case["name"], args).items()}
    ok = ok and all(e == e and e < limit for e in after_tune_errors.values())
    tuned_ms = do_bench(lambda: module.run(*args), warmup=25, rep=100, return_mode="median")
    chosen = {name: module.CONFIGS[name][module.CHOSEN[name]] for name in module.CONFIGS}
    return {"name": case["name"], "kernels": case["kernels"], "ok": ok, "rel_error": errors, "limit": limit,
            "first_call_s": first_call, "default_ms": default_ms, "default_again_ms": default_again_ms,
            "tuned_ms": tuned_ms, "tune_s": tune_s,
            "chosen": chosen, "bytes": case["bytes"], "flops": case["flops"],
            "tuning": {k: [(c, t) for c, t in v] for k, v in tuned.items()}}


def rate(result: dict, ms: float) -> str:
    if result["flops"]:
        return f"{result['flops'] / ms / 1e9:8.1f} TFLOP/s"
    return f"{result['bytes'] / ms / 1e9:8.3f} TB/s   "


def main(folder: str, out_dir: str | None = None) -> int:
    with open(os.path.join(folder, "cases.json")) as handle:
        cases = json.load(handle)
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    results = []
    for case in cases:
        try:
            results.append(run_case(folder, case))
        except Exception as err:  # noqa: BLE001 - report and go on with the other cases
            results.append({"name": case["name"], "ok": False, "error": f"{type(err).__name__}: {err}"[:2000]})
        if out_dir:
            with open(os.path.join(out_dir, "gpu_results.json"), "w") as handle:
                json.dump(results, handle, indent=1, default=str)
    print(f"{'case':<40}{'ok':<5}{'rel err':>10}{'kern':>5}{'default ms':>12}{'':>17}{'again':>8}{'tuned ms':>10}{'':>17}")
    for r in results:
        if "error" in r:
            print(f"{r['name']:<40}FAIL {r['error'][:300]}")
            continue
        err = max(r["rel_error"].values())
        print(f"{r['name']:<40}{'yes' if r['ok'] else 'NO':<5}{err:>10.2e}{r['kernels']:>5}{r['default_ms']:>12.3f} {rate(r, r['default_ms'])}"
              f"{r['default_again_ms']:>8.3f}{r['tuned_ms']:>10.3f} {rate(r, r['tuned_ms'])}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
