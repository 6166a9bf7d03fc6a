"""The codegen check: a generated kernel computes what TVM's llvm build of the input computes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import torch

from tir_passes.frontend import as_module
from tir_passes.numerics import ReferenceRun, buffer_params, symbolic_sizes


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


CANARY_ELEMENTS = 4096


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch copy of `array`; ml_dtypes' bfloat16 (which torch cannot read) travels as its bits."""
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.array(array, copy=True).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """`tensor` on the CPU as numpy; bfloat16 becomes ml_dtypes' bfloat16, as the reference holds it."""
    tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def _guarded(array: np.ndarray, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(view, storage): the data inside a larger allocation whose margins hold a canary value, so
    a store outside the tensor (a missing mask) shows as a changed margin, not heap corruption."""
    data = to_torch(array).to(device)
    storage = torch.empty(data.numel() + 2 * CANARY_ELEMENTS, dtype=data.dtype, device=device)
    storage.fill_(_canary(data.dtype))
    view = storage[CANARY_ELEMENTS:CANARY_ELEMENTS + data.numel()].view(data.shape)
    view.copy_(data)
    return view, storage


def _canary(dtype: torch.dtype):
    if dtype == torch.bool:
        return True
    return 77 if not dtype.is_floating_point else 1234.5


def _margin_problems(name: str, storage: torch.Tensor) -> list[str]:
    canary = _canary(storage.dtype)
    margins = torch.cat([storage[:CANARY_ELEMENTS], storage[-CANARY_ELEMENTS:]])
    if bool((margins != canary).any()):
        return [f"{name}: the kernel wrote outside the tensor (a store without its mask)"]
    return []


def check_against_tvm(kernel, func, *, seed: int = 0, sizes: dict[str, int] | None = None,
                      interpret: bool | None = True) -> CheckReport:
    """Run `kernel` and TVM's CPU build of `func` on the same seeded inputs; compare every output."""
    started = time.perf_counter()
    func = as_module(func)["main"]
    reference = ReferenceRun.of(func, seed=seed, sizes=sizes)
    device = "cpu" if interpret or not torch.cuda.is_available() else "cuda"
    results, problems = [], []
    for data in reference.datasets:
        guarded = {b.name: _guarded(data[b.name], device) for b in buffer_params(reference.concrete)}
        args = [guarded[p.name][0] if p.name in guarded else reference.scalars[p.name] for p in func.params]
        kernel(*args, interpret=interpret)
        results.append({name: to_numpy(view) for name, (view, _) in guarded.items()})
        for name, (_, storage) in guarded.items():
            problems += [p for p in _margin_problems(name, storage) if p not in problems]
    bound = {**reference.scalars, **symbolic_sizes(func, sizes)}
    return CheckReport(kernel.name, problems + reference.mismatches(results), bound, time.perf_counter() - started)
