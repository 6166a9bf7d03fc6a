"""torch.compile(fullgraph=True) over models that call generated kernels as PyTorch ops, with
torch + triton only (no TVM): the modules come from benchmarks/torch_compile_generate.py.

    python benchmarks/torch_compile_generate.py                                      # here (TVM)
    python benchmarks/torch_compile_gpu.py generated/torch_compile/gpu [--json OUT]   # on the GPU
    python benchmarks/torch_compile_gpu.py generated/torch_compile/cpu                # CPU: interpreter

(generated/ is git-ignored: carry it to the GPU machine with the checkout.)

Per case: register the module's op (`as_torch_op`), build a small nn.Module around it, check eager
against a torch reference, count graphs and graph breaks (torch._dynamo.explain), compile with
fullgraph=True, check compiled against eager, and on a GPU look for the generated kernels in
inductor's output code (the triton_op is traced into, not called opaquely) and time eager vs
compiled. Each case runs on its own: one failing prints why and the others still run.
On the CPU the op is a custom_op running in Triton's interpreter and the default backend is
aot_eager (inductor there compiles the torch around the op, not the op).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
import traceback

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when triton is imported and kernels are decorated

import torch._inductor.config  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
NAMESPACE = "tir_triton_demo"


class TemperedSoftmax(nn.Module):
    """softmax(x / 2) along rows: a torch multiply, then the op."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x * 0.5)

    @staticmethod
    def reference(x):
        return torch.softmax((x * 0.5).float(), dim=1).to(x.dtype)


class FeedForward(nn.Module):
    """gelu(x @ W + b) with W and b held by the module (buffers: inference, no autograd)."""

    def __init__(self, op, weight, bias):
        super().__init__()
        self.op = op
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)

    def forward(self, x):
        return self.op(x, self.weight, self.bias)

    def reference(self, x):
        return F.gelu(x.float() @ self.weight.float() + self.bias).to(x.dtype)


class Attention(nn.Module):
    """softmax(Q·Kᵀ/√d) from the op (two kernels), then · V in torch."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, q, k, v):
        return self.op(q, k) @ v

    @staticmethod
    def reference(q, k, v):
        return torch.softmax((q.float() @ k.float().T) / math.sqrt(q.shape[1]), dim=1) @ v


def _random(spec, device, scale=1.0):
    return (torch.randn(spec["shape"], device=device) * scale).to(DTYPES[spec["dtype"]])


def build(name: str, op, case: dict, device):
    """(model, inputs, reference function, tolerance) for a case of torch_compile_generate.py."""
    specs = {spec["name"]: spec for spec in case["inputs"]}
    if name.startswith("softmax"):
        return TemperedSoftmax(op), (_random(specs["A"], device),), TemperedSoftmax.reference, 1e-2
    if name.startswith("matmul_bias_gelu"):
        depth = specs["A"]["shape"][1]
        model = FeedForward(op, _random(specs["B"], device, depth ** -0.5), _random(specs["bias"], device, 0.1))
        return model, (_random(specs["A"], device),), model.reference, 2e-2
    if name.startswith("attention_scores"):
        q, k = _random(specs["Q"], device), _random(specs["K"], device)
        v = torch.randn(k.shape[0], q.shape[1], device=device)
        return Attention(op), (q, k, v), Attention.reference, 1e-3
    raise KeyError(f"no model for case {name}")


def load_module(folder: str, case: dict, name: str):
    spec = importlib.util.spec_from_file_location(f"tir_triton_demo_{name}", os.path.join(folder, case["module"]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def max_error(got, want) -> float:
    return float((got.float() - want.float()).abs().max())


def kernels_in_inductor_code(compiled, inputs, kernels: list[str]) -> tuple[object, str]:
    """Compile and run, reading inductor's output code: how many of the op's kernels it launches."""
    from torch._inductor.utils import run_and_get_code

    result, codes = run_and_get_code(compiled, *inputs)
    code = "\n".join(codes)
    return result, f"{sum(kernel in code for kernel in kernels)}/{len(kernels)}"


def time_ms(fn) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def run_case(folder: str, name: str, case: dict, backend: str) -> dict:
    row = {"case": name, "kernels": len(case["kernels"]), "status": "FAIL"}
    device = torch.device("cuda" if GPU else "cpu")
    step = "register the op"
    try:
        module = load_module(folder, case, name)
        op = module.as_torch_op(f"{NAMESPACE}::{name}")
        model, inputs, reference, tolerance = build(name, op, case, device)
        with torch.no_grad():
            step = "eager"
            eager = model(*inputs)
            row["eager_vs_torch"] = max_error(eager, reference(*inputs))
            torch.testing.assert_close(eager.float(), reference(*inputs).float(), atol=tolerance, rtol=tolerance)
            step = "explain"
            torch._dynamo.reset()
            explained = torch._dynamo.explain(model)(*inputs)
            row["graphs"], row["breaks"] = explained.graph_count, explained.graph_break_count
            if (explained.graph_count, explained.graph_break_count) != (1, 0):
                raise AssertionError(f"{explained.graph_count} graphs, {explained.graph_break_count} breaks: "
                                     f"{[str(b.reason) for b in explained.break_reasons]}")
            step = f"torch.compile(fullgraph=True, backend={backend})"
            torch._dynamo.reset()
            compiled = torch.compile(model, fullgraph=True, backend=backend)
            started = time.perf_counter()
            if backend == "inductor" and GPU:
                result, row["kernels_in_inductor"] = kernels_in_inductor_code(compiled, inputs, case["kernels"])
            else:
                result, row["kernels_in_inductor"] = compiled(*inputs), "-"
            row["compile_s"] = time.perf_counter() - started
            step = "compiled vs eager"
            row["compiled_vs_eager"] = max_error(result, eager)
            torch.testing.assert_close(result.float(), eager.float(), atol=1e-3, rtol=1e-3)
            if GPU:
                step = "timing"
                row["torch_ms"] = time_ms(lambda: reference(*inputs))
                row["eager_ms"] = time_ms(lambda: model(*inputs))
                row["compiled_ms"] = time_ms(lambda: compiled(*inputs))
        row["status"] = "ok"
    except Exception as err:  # one case failing must not hide the others
        row["error"] = f"{step}: {type(err).__name__}: {err}"
        row["traceback"] = traceback.format_exc(limit=-6)
    return row


COLUMNS = [("case", "{}"), ("kernels", "{}"), ("graphs", "{}"), ("breaks", "{}"), ("kernels_in_inductor", "{}"),
           ("eager_vs_torch", "{:.1e}"), ("compiled_vs_eager", "{:.1e}"), ("compile_s", "{:.1f}"),
           ("torch_ms", "{:.3f}"), ("eager_ms", "{:.3f}"), ("compiled_ms", "{:.3f}"), ("status", "{}")]


def print_table(rows: list[dict]) -> None:
    cells = [[fmt.format(row[key]) if key in row else "-" for key, fmt in COLUMNS] for row in rows]
    widths = [max(len(key), *(len(line[i]) for line in cells)) for i, (key, _fmt) in enumerate(COLUMNS)]
    print(" | ".join(key.ljust(width) for (key, _fmt), width in zip(COLUMNS, widths)))
    print("-+-".join("-" * width for width in widths))
    for line in cells:
        print(" | ".join(cell.ljust(width) for cell, width in zip(line, widths)))
    for row in rows:
        if "error" in row:
            print(f"\n{row['case']} failed at {row['error']}\n{row['traceback']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="generated/torch_compile/gpu (or cpu), from torch_compile_generate.py")
    parser.add_argument("--backend", default="inductor" if GPU else "aot_eager")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    torch._inductor.config.fx_graph_cache = False  # a cache hit would skip the output code searched for kernels
    with open(os.path.join(args.folder, "cases.json")) as handle:
        cases = json.load(handle)
    device = torch.cuda.get_device_name() if GPU else "CPU (Triton interpreter)"
    print(f"torch {torch.__version__}, device {device}, backend {args.backend}\n")
    rows = [run_case(args.folder, name, case, args.backend) for name, case in cases.items()]
    print_table(rows)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"torch": torch.__version__, "device": device, "backend": args.backend,
                       "rows": [{k: v for k, v in row.items() if k != "traceback"} for row in rows]}, handle, indent=1)
    return 0 if all(row["status"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
