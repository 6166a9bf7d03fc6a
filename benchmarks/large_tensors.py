"""Buffers of more than 2**31 elements (catalogue #26, issue 9): the kernels index them with 64-bit
offsets and compute the right values.

    python benchmarks/large_tensors.py generate [OUT]   # here (TVM): generated/large/*.py + cases.json
    python3 benchmarks/large_tensors.py run [DIR]       # on the GPU (torch + triton only)

Each case fills its inputs on the GPU, runs the module's run(), and compares with torch in float64,
in slices (the full float64 copies would need tens of GB); every output element is checked, the
output first poisoned with NaN.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = 2**31 + 4096   # elements: past the int32 range, by more than a tile


def cases() -> list[dict]:
    """Programs whose largest buffer has more than 2**31 elements."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from matmul_bias_gelu import make_matmul_bias_gelu
    from rmsnorm import make_rmsnorm
    from tvm.script import tirx as T

    rows, cols = BIG // 8192 + 1, 8192

    @T.prim_func(s_tir=True)
    def add_scaled(X: T.Buffer((T.int64(BIG),), "float16"), Y: T.Buffer((T.int64(BIG),), "float16")):
        for i in T.serial(T.int64(BIG)):
            with T.sblock("Y"):
                vi = T.axis.spatial(T.int64(BIG), i)
                Y[vi] = X[vi] * T.float16(2) + T.float16(1)

    return [
        dict(name="elementwise_fp16_2p31", func=add_scaled, sizes={}),
        dict(name="rmsnorm_rows_fp16_2p31", func=make_rmsnorm(cols, "float16"), sizes={"rows": rows}),
        # C has 46400 x 46400 > 2**31 elements; K is small so the product is cheap
        dict(name="matmul_bias_gelu_fp16_2p31", func=make_matmul_bias_gelu(46400, 46400, 32), sizes={}),
    ]


def generate(out_dir: str = os.path.join(ROOT, "generated", "large")) -> None:
    sys.path.insert(0, ROOT)
    from triton_codegen import compile

    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for case in cases():
        kernel = compile(case["func"], verify=False)
        kernel.save(os.path.join(out_dir, case["name"] + ".py"))
        wide = sorted({b for k in kernel.program.kernels for b in k.int64_buffers})
        params = [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "written": p.written,
                   "shape": [d if isinstance(d, int) else case["sizes"][d] for d in p.shape]} for p in kernel.program.params]
        entries.append({"name": case["name"], "module": case["name"] + ".py", "params": params, "int64": wide})
        print(f"{case['name']}: 64-bit offsets for {', '.join(wide) or 'nothing'}")
    with open(os.path.join(out_dir, "cases.json"), "w") as handle:
        json.dump(entries, handle, indent=1)


def _reference(name: str, args, lo: int, hi: int):
    """Expected output rows [lo, hi) in float64 (rows of the first dimension)."""
    import torch
    import torch.nn.functional as F

    if name.startswith("elementwise"):
        return args[0][lo:hi].double() * 2 + 1
    if name.startswith("rmsnorm"):
        x = args[0][lo:hi].double()
        return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * args[1].double()
    a, b, bias = args[0][lo:hi].double(), args[1].double(), args[2].double()
    return F.gelu(a @ b + bias)


def run(folder: str = os.path.join(ROOT, "generated", "large")) -> int:
    import torch

    with open(os.path.join(folder, "cases.json")) as handle:
        entries = json.load(handle)
    failures = 0
    for entry in entries:
        spec = importlib.util.spec_from_file_location(entry["name"], os.path.join(folder, entry["module"]))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        args = []
        for param in entry["params"]:
            dtype = getattr(torch, param["dtype"])
            tensor = torch.empty(param["shape"], dtype=dtype, device="cuda")
            tensor.normal_() if not param["written"] else tensor.fill_(float("nan"))
            args.append(tensor)
        module.run(*args)
        torch.cuda.synchronize()
        out = args[-1]
        rows, step, worst = out.shape[0], max(1, out.shape[0] // 64), 0.0
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            expected = _reference(entry["name"], args, lo, hi)
            got = out[lo:hi].double()
            if torch.isnan(got).any():
                worst = float("nan")
                break
            worst = max(worst, ((got - expected).norm() / expected.norm().clamp_min(1e-30)).item())
        ok = worst == worst and worst < 2e-2
        failures += not ok
        elements = max(p["shape"] and int(torch.tensor(p["shape"]).prod()) for p in entry["params"])
        print(f"{entry['name']:<32} {'ok' if ok else 'WRONG':<6} largest buffer {elements} elements "
              f"(2**31 = {2**31}); 64-bit offsets for {', '.join(entry['int64'])}; worst rel. error {worst:.2e}")
        del args
        torch.cuda.empty_cache()
    return 1 if failures else 0


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["generate"]
    sys.exit(generate(*rest) if command == "generate" else run(*rest))
