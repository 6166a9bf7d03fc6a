"""The cost of running the numerics reference in a forked child (tir_passes/checks/sandbox.py), CPU only.

    PYTHONPATH=. python benchmarks/reference_isolation.py

Builds a 64 x 64 elementwise PrimFunc with TVM's llvm target and prints, per call: a bare fork and
exit of this loaded process, two data sets run in process, the same two through `run_sets` (one
forked child), and the `tvm.compile` every stage's numerics check already pays.
"""

import os
import resource
import time

import torch
from tvm.script import tirx as T

from tir_passes.checks.numerics import build_llvm, make_inputs, run_built, run_sets, specialize_shapes


@T.prim_func(s_tir=True)
def scale(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.sblock("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2)


def per_call_ms(action, repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        action()
    return 1000 * (time.perf_counter() - started) / repeats


def bare_fork() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def main() -> None:
    torch.ones(3) @ torch.ones(3)   # torch's thread pool exists, as in a test run
    concrete = specialize_shapes(scale)
    entry = build_llvm(concrete)
    datasets = [make_inputs(concrete)] * 2
    print(f"resident:           {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"bare fork + exit:   {per_call_ms(bare_fork, 50):.2f} ms")
    inline = per_call_ms(lambda: [run_built(entry, concrete, d, {}) for d in datasets], 50)
    print(f"two sets inline:    {inline:.2f} ms")
    print(f"two sets isolated:  {per_call_ms(lambda: run_sets(entry, concrete, datasets, {}), 50):.2f} ms")
    print(f"tvm.compile (llvm): {per_call_ms(lambda: build_llvm(concrete), 5):.1f} ms")


if __name__ == "__main__":
    main()
