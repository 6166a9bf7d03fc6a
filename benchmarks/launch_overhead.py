"""The host time of a generated module's run() beside its kernel, on the GPU (torch + triton only).

    python benchmarks/launch_overhead.py MODULE.py        # a module of static shapes, one kernel

Prints `run()` and the kernel launch alone as `triton.testing.do_bench` sees them, and the host
time per call of the argument checks (`_prepare`) measured with time.perf_counter over 200 calls.
When run() takes longer than the launch, the host is the limit: this is how the launcher's
68 us of argument checks per call on the H200 host were found (docs/benchmarks.md).
"""

import importlib.util
import sys
import time

import torch
import triton


def main(path: str) -> None:
    spec = importlib.util.spec_from_file_location("measured", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [torch.randn(*shape, device="cuda").to(getattr(torch, dtype)) for _, _, dtype, shape, _, _ in module.PARAMS]
    module.run(*args)
    torch.cuda.synchronize()
    checked, sizes = module._prepare(args, {})
    [(name, launch)] = module.LAUNCHERS
    config = module.CONFIGS[name][module.CHOSEN[name]]
    print(f"run():        {triton.testing.do_bench(lambda: module.run(*args)) * 1000:.1f} us")
    print(f"launch alone: {triton.testing.do_bench(lambda: launch(checked, sizes, config)) * 1000:.1f} us")
    started = time.perf_counter()
    for _ in range(200):
        module._prepare(args, {})
    print(f"checks (host): {(time.perf_counter() - started) / 200 * 1e6:.1f} us a call")


if __name__ == "__main__":
    main(sys.argv[1])
