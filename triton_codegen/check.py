"""The codegen check: a generated kernel computes what TVM's llvm build of the input computes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from tir_passes.frontend import as_module
from tir_passes.numerics import ReferenceRun, buffer_params


@dataclass
class CheckReport:
    name: str
    problems: list[str]
    sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        head = f"{self.name}: {'matches' if self.ok else 'DIFFERS FROM'} TVM's llvm build"
        head += f" (symbolic sizes {sizes})" if sizes else ""
        return head + f" in {self.seconds:.1f}s" + "".join(f"\n  {p}" for p in self.problems)


def _to_torch(array: np.ndarray, dtype: str) -> torch.Tensor:
    return torch.from_numpy(np.array(array, copy=True))


def check_against_tvm(kernel, func, *, seed: int = 0, sizes: dict[str, int] | None = None,
                      interpret: bool | None = True) -> CheckReport:
    """Run `kernel` and TVM's CPU build of `func` on the same seeded inputs; compare every output."""
    started = time.perf_counter()
    func = as_module(func)["main"]
    reference = ReferenceRun.of(func, seed=seed, sizes=sizes)
    device = "cpu" if interpret or not torch.cuda.is_available() else "cuda"
    results = []
    for data in reference.datasets:
        tensors = {b.name: _to_torch(data[b.name], str(b.dtype)).to(device) for b in buffer_params(reference.concrete)}
        args = [tensors[p.name] if p.name in tensors else reference.scalars[p.name] for p in func.params]
        kernel(*args, interpret=interpret)
        results.append({name: tensor.cpu().numpy() for name, tensor in tensors.items()})
    bound = {k: v for k, v in reference.scalars.items()}
    from tir_passes.numerics import shape_vars, _bound_size  # noqa: PLC0415 - only for the report
    for var in shape_vars(func):
        bound.setdefault(var.name, _bound_size(func, reference.concrete, var))
    return CheckReport(kernel.name, reference.mismatches(results), bound, time.perf_counter() - started)
