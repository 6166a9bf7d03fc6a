"""The tuner's timer on a GPU: the module's whole run() with one config per kernel.

Each new config is launched once before it is timed, so compiling is never timed; the launch
returns Triton's compiled kernel, whose registers, spills and shared memory are kept (the hardware
model's inputs) and which is refused without timing when it spills registers. Timings are the
median of `triton.testing.do_bench` (L2 flushed between repetitions). `warm_up()` keeps the GPU
busy first: clocks idle at a few hundred MHz until then (docs/benchmarks.md saw it skew the
first timings of a run).

Imports torch and triton only when used, nothing that needs TVM.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

from .hardware_model import Resources
from .tuner import Assignment, assignment_key


@contextmanager
def assigned(module, assignment: Assignment):
    """Make run() use these configs (appended to CONFIGS for the while when new); restores after."""
    saved = dict(module.CHOSEN)
    added = []
    try:
        for name, config in assignment.items():
            configs = module.CONFIGS[name]
            if config not in configs:
                configs.append(config)
                added.append(name)
            module.CHOSEN[name] = configs.index(config)
        yield
    finally:
        module.CHOSEN.update(saved)
        for name in added:
            module.CONFIGS[name].pop()


class RunTimer:
    def __init__(self, module, args, *, warmup_ms: float = 10, rep_ms: float = 40):
        self.module = module
        self.args = tuple(args)
        self.warmup_ms = warmup_ms
        self.rep_ms = rep_ms
        self.resources: dict[str, Resources] = {}   # assignment_key({kernel: config}) -> what Triton reports
        self.refused: dict[str, str] = {}           # assignment key -> why it was not timed

    def __call__(self, assignment: Assignment) -> float:
        from triton.testing import do_bench

        key = assignment_key(assignment)
        try:
            reason = self.compile(assignment)
        except Exception as err:  # noqa: BLE001 - a config the GPU refuses (too much shared memory)
            reason = f"{type(err).__name__}: {str(err).strip()[:300]}"
        if reason:
            self.refused[key] = reason
            return math.inf
        with assigned(self.module, assignment):
            return float(do_bench(lambda: self.module.run(*self.args), warmup=self.warmup_ms, rep=self.rep_ms,
                                  return_mode="median"))

    def compile(self, assignment: Assignment) -> str | None:
        """Launch every kernel whose config is new once; why the assignment must not be timed, or None."""
        import torch

        t, s = self.module._prepare(self.args, {})
        for name, launch in self.module.LAUNCHERS:
            kernel_key = assignment_key({name: assignment[name]})
            if kernel_key not in self.resources:
                self.resources[kernel_key] = launched_resources(launch(t, s, assignment[name]))
            if self.resources[kernel_key].spilled_bytes:
                return f"{name} spills {self.resources[kernel_key].spilled_bytes} B of registers per thread"
        torch.cuda.synchronize()
        return None

    def kernel_resources(self, name: str, config: dict) -> Resources | None:
        return self.resources.get(assignment_key({name: config}))

    def warm_up(self, seconds: float = 0.5) -> None:
        """Run the module until the GPU's clocks are up."""
        import torch

        ends = time.perf_counter() + seconds
        while time.perf_counter() < ends:
            for _ in range(10):
                self.module.run(*self.args)
            torch.cuda.synchronize()


def launched_resources(compiled) -> Resources:
    """What Triton reports for a launched kernel (a zero-register placeholder when it reports nothing)."""
    registers = getattr(compiled, "n_regs", None)
    if registers is None:
        return Resources(0, 0, 0, False)
    shared = getattr(getattr(compiled, "metadata", None), "shared", 0) or 0
    return Resources(int(registers), int(getattr(compiled, "n_spills", 0) or 0), int(shared), True)
