"""Split-K (SplitReduction) measured: linear layers with few output tiles, split and not.

    python benchmarks/split_k_gpu.py generate DIR           # here (TVM): DIR/<shape>_{split,nosplit}.py
    python3 benchmarks/split_k_gpu.py run DIR OUT.json       # on the GPU (torch + triton only)

"nosplit" is the same program compiled with SplitReduction disabled. Each module's output is checked
against float64, then its `run()` is timed (`do_bench` median, L2 flushed) and, to see the GPU time
without Python's launch overhead, a CUDA graph of one `run()` is replayed; cuBLAS (`F.linear`) beside.
"""

import glob
import importlib.util
import json
import os
import sys

SHAPES = {"long": (16, 128, 32768), "long2": (64, 256, 65536), "decode": (16, 4096, 4096)}


def generate(out: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    from linear import make_linear
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    for name, shape in SHAPES.items():
        for tag, disable in (("split", ()), ("nosplit", ("SplitReduction",))):
            kernel = compile(make_linear(*shape), verify=False, disable=disable)
            kernel.save(os.path.join(out, f"{name}_{tag}.py"))
            print(name, tag, len(kernel.program.kernels), "kernel(s)")


def run(folder: str, out: str) -> None:
    import torch
    from triton.testing import do_bench

    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        shapes = [p[3] for p in module.PARAMS]
        generator = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(*shapes[0], generator=generator, device="cuda").half()
        w = torch.randn(*shapes[1], generator=generator, device="cuda").half()
        y = torch.full(shapes[2], float("nan"), device="cuda", dtype=torch.float16)
        module.run(x, w, y)
        torch.cuda.synchronize()
        reference = x.double() @ w.double().T
        error = ((y.double() - reference).norm() / reference.norm()).item()
        us = 1e3 * do_bench(lambda: module.run(x, w, y), warmup=10, rep=60, return_mode="median")
        cublas = 1e3 * do_bench(lambda: torch.nn.functional.linear(x, w), warmup=10, rep=60, return_mode="median")
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                module.run(x, w, y)
            graph_us = 1e3 * do_bench(graph.replay, warmup=10, rep=60, return_mode="median")
        except Exception as err:  # noqa: BLE001 - reported, the rest goes on
            graph_us = str(err)[:100]
        rows.append(dict(module=os.path.basename(path), kernels=len(module.LAUNCHERS), error=error, us=us,
                         graph_us=graph_us, cublas_us=cublas, bytes=(x.numel() + w.numel() + y.numel()) * 2))
        print(json.dumps(rows[-1]), flush=True)
    with open(out, "w") as handle:
        json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3])
