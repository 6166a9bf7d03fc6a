"""Time a grid of configs of one generated module's kernel on the GPU (torch + triton only).

    python benchmarks/config_sweep.py MODULE.py OUT.json '{"BLOCK_M": [128, 256], "num_stages": [3, 4]}' ['{"rows": 16384}']

The module's single kernel runs each config (its default config with the grid's values put in)
on random inputs; symbolic dimensions take the sizes of the last argument. Each time is
`triton.testing.do_bench`'s median (L2 flushed) of the module's `run()`; a config that does not
compile or fit is reported and skipped. OUT.json: [[config, milliseconds or null], ...]. This is
how the defaults of the recomputed softmax(Q·Kᵀ) and the masked matmul's stages were examined
(docs/benchmarks.md).
"""

import importlib.util
import itertools
import json
import sys

import torch
import triton


def _load(path):
    spec = importlib.util.spec_from_file_location("swept", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep(path: str, grid: dict, dims: dict) -> list:
    module = _load(path)
    [name] = module.CONFIGS
    default = dict(module.CONFIGS[name][0])
    args = [torch.randn(*[dims.get(d, d) for d in shape], device="cuda").to(getattr(torch, dtype))
            for _, _, dtype, shape, _, _ in module.PARAMS]
    results = []
    for values in itertools.product(*grid.values()):
        config = {**default, **dict(zip(grid, values))}
        module.CONFIGS[name], module.CHOSEN[name] = [config], 0
        try:
            module.run(*args)
            torch.cuda.synchronize()
            milliseconds = triton.testing.do_bench(lambda: module.run(*args), warmup=10, rep=40)
        except Exception as err:  # noqa: BLE001 - a config that does not fit is a result too
            milliseconds = None
            print(config, "failed:", str(err)[:200])
        results.append((config, milliseconds))
        print(json.dumps(config), milliseconds, flush=True)
    return results


if __name__ == "__main__":
    path, out, grid = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    dims = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    json.dump(sweep(path, grid, dims), open(out, "w"), indent=1)
