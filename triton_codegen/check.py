"""The kernel check: a generated kernel computes what TVM's llvm build of the input computes.

Every tensor runs inside a larger allocation whose margins hold canaries, distinct per element
(so a store that copies one canary over another shows): a store outside the tensor changes a
margin, and a read of a margin feeds a canary into an output, which then differs from TVM's. In
Triton's interpreter, every active lane of every load and store is also checked against the
margins' addresses, so a read past a tensor is reported even when its value never reaches an
output (a missing load mask, which a GPU would fault on).
`compile(verify=True)` ends with this check (`check_kernel`), on the reference its numerics
check built; `check_against_tvm` builds a reference first.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import torch

from tvm import tirx

from lowering.matmul_precision import dot_tolerance
from tir_passes.checks.interpret import NotEvaluated, evaluate
from tir_passes.infra.frontend import as_module
from tir_passes.checks.numerics import ReferenceRun, buffer_params, symbolic_sizes


@dataclass
class CheckReport:
    name: str
    problems: list[str]
    sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str = ""   # why the kernel did not run (and so nothing was compared)
    where: str = ""     # the sizes it ran at, when compile() checked a shape-reduced copy
    second_opinion: str = ""   # what the independent evaluation decided, when TVM and the kernel disagreed
    tvm_overruled: bool = False   # the kernel agrees with the independent evaluation, TVM's build does not

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        if self.skipped:
            return f"{self.name}: kernel check skipped: {self.skipped}"
        against = "an independent evaluation of the TIR (not TVM's build)" if self.tvm_overruled else "TVM's llvm build"
        head = f"{self.name}: {'matches' if self.ok else 'DIFFERS FROM'} {against}"
        head += f" (symbolic sizes {sizes})" if sizes else ""
        head += f" at {self.where}" if self.where else ""
        opinion = f"\n  second opinion: {self.second_opinion}" if self.second_opinion else ""
        return head + f" in {self.seconds:.1f}s" + opinion + "".join(f"\n  {p}" for p in self.problems)


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
    """(view, storage): the data inside a larger allocation whose margins hold canaries, so a
    store outside the tensor (a missing mask) shows as a changed margin, not heap corruption."""
    data = to_torch(array).to(device)
    storage = torch.empty(data.numel() + 2 * CANARY_ELEMENTS, dtype=data.dtype, device=device)
    margin = canaries(data.dtype, device)
    storage[:CANARY_ELEMENTS] = margin
    storage[-CANARY_ELEMENTS:] = margin
    view = storage[CANARY_ELEMENTS:CANARY_ELEMENTS + data.numel()].view(data.shape)
    view.copy_(data)
    return view, storage


def canaries(dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """CANARY_ELEMENTS values, neighbours always different, far from the random data (|x| < 6)."""
    index = torch.arange(CANARY_ELEMENTS, device=device)
    if dtype == torch.bool:
        return index % 2 == 0
    if dtype.is_floating_point:  # integers from `start`, as many as the dtype holds exactly, repeated
        start = {torch.bfloat16: 128, torch.float16: 1024}.get(dtype, CANARY_ELEMENTS)
        return (start + (index % start)).to(dtype)
    limit = torch.iinfo(dtype).max
    return (100 + index % max(2, min(limit - 100, CANARY_ELEMENTS))).to(dtype)


def _margin_problems(name: str, storage: torch.Tensor) -> list[str]:
    margin = canaries(storage.dtype, storage.device.type)
    before, after = storage[:CANARY_ELEMENTS], storage[-CANARY_ELEMENTS:]
    if not (torch.equal(before, margin) and torch.equal(after, margin)):
        return [f"{name}: the kernel wrote outside the tensor (a store without its mask)"]
    return []


def check_against_tvm(kernel, func, *, seed: int = 0, sizes: dict[str, int] | None = None,
                      interpret: bool | None = True) -> CheckReport:
    """Run `kernel` and TVM's CPU build of `func` on the same seeded inputs; compare every output."""
    started = time.perf_counter()
    func = as_module(func)["main"]
    report = check_kernel(kernel, ReferenceRun.of(func, seed=seed, sizes=sizes), interpret)
    report.sizes = {**report.sizes, **symbolic_sizes(func, sizes)}
    report.seconds = time.perf_counter() - started
    return report


@contextmanager
def _watch_margins(guarded: dict[str, tuple[torch.Tensor, torch.Tensor]], found: list[str]):
    """Report interpreted loads and stores whose active lanes address a margin."""
    from triton.runtime.interpreter import InterpreterBuilder

    margins = []
    for name, (_, storage) in guarded.items():
        start, size = storage.data_ptr(), storage.element_size()
        end = start + storage.numel() * size
        margins += [(name, start, start + CANARY_ELEMENTS * size), (name, end - CANARY_ELEMENTS * size, end)]

    def note(ptrs, mask, what: str) -> None:
        addresses = np.asarray(ptrs.data)[np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data))]
        for name, low, high in margins:
            if ((addresses >= low) & (addresses < high)).any():
                text = f"{name}: the kernel {what} outside the tensor (an access without its mask)"
                if text not in found:
                    found.append(text)

    load, store = InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store

    def watched_load(self, ptrs, mask, *args, **kwargs):  # descriptor loads pass keywords
        note(ptrs, mask, "read")
        return load(self, ptrs, mask, *args, **kwargs)

    def watched_store(self, ptrs, value, mask, *args, **kwargs):
        note(ptrs, mask, "wrote")
        return store(self, ptrs, value, mask, *args, **kwargs)

    InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store = watched_load, watched_store
    try:
        yield
    finally:
        InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store = load, store


def check_kernel(kernel, reference: ReferenceRun, interpret: bool | None = True) -> CheckReport:
    """Run `kernel` on the reference's data sets, each tensor inside canary margins; compare."""
    started = time.perf_counter()
    func = reference.func
    device = "cpu" if interpret or not torch.cuda.is_available() else "cuda"
    results, problems = [], []
    for data in reference.datasets:
        guarded = {b.name: _guarded(data[b.name], device) for b in buffer_params(reference.concrete)}
        args = [guarded[p.name][0] if p.name in guarded else reference.scalars[p.name] for p in func.params]
        with _watch_margins(guarded, problems) if device == "cpu" else nullcontext():
            kernel(*args, interpret=interpret)
        results.append({name: to_numpy(view) for name, (view, _) in guarded.items()})
        for name, (_, storage) in guarded.items():
            problems += [p for p in _margin_problems(name, storage) if p not in problems]
    program = getattr(kernel, "program", None)
    tolerance = dot_tolerance(program, reference.scalars) if program is not None else None
    mismatches = (reference.mismatches(results, tolerance.scale, tolerance.checked_as()) if tolerance is not None
                  else reference.mismatches(results))
    opinion = ""
    if mismatches and not problems:
        mismatches, opinion = second_opinion(reference, results, mismatches)
    return CheckReport(kernel.name, problems + mismatches, dict(reference.scalars), time.perf_counter() - started,
                       second_opinion=opinion, tvm_overruled=bool(opinion) and not mismatches)


def second_opinion(reference: ReferenceRun, results: list[dict[str, np.ndarray]],
                   mismatches: list[str]) -> tuple[list[str], str]:
    """(the problems that stand, what an independent evaluation of the input said): where the
    kernel agrees with the evaluation (exact integers, float64; checks/interpret.py) and TVM's build
    does not, TVM's build is the one that is wrong, and the kernel is accepted."""
    scalars = {p.name: reference.scalars[p.name] for p in reference.concrete.params
               if not tirx.is_buffer_var(p) and p.name in reference.scalars}
    try:
        evaluated = [evaluate(reference.concrete, data, scalars) for data in reference.datasets]
    except NotEvaluated as err:
        return mismatches, f"none (the independent evaluation cannot run this program: {err})"
    independent = ReferenceRun(reference.func, reference.concrete, reference.datasets, reference.scalars, evaluated,
                               reference.rounded)
    kernel_wrong = independent.mismatches(results)
    if kernel_wrong:
        tvm_wrong = independent.mismatches(reference.outputs)
        verdict = ("an independent evaluation of the TIR (exact integers, float64) agrees with TVM's build"
                   if not tvm_wrong else "an independent evaluation of the TIR disagrees with both")
        return mismatches, verdict
    return [], ("TVM's llvm build of the input is wrong here: an independent evaluation of the TIR (exact integers, "
                "float64, 16-bit reductions accumulated wide) agrees with the kernel; TVM's build differed: "
                + mismatches[0])
