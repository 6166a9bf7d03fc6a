"""The hardware model on a compiled kernel, with no GPU: each kernel compiled ahead of time for the
GPU's architecture, specialized as a launch on contiguous tensors would be, so that occupancy
comes from the registers, spills and shared memory Triton reports; then the model's time.

`tir-triton model FILE.py` prints it for the default config and the best few of the tuner's space.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.infra.names import stride_name
from tir_passes.contracts.gpu_specs import gpu_spec

from .aot import compile_ahead_of_time
from .hardware_model import Prediction, Resources, evaluate, predict, runnable, summarize
from .search_space import kernel_space


@dataclass(frozen=True)
class ModelRow:
    kernel: str
    config: dict
    prediction: Prediction
    runs: str | None   # why the config cannot run well, or None


def launch_values(kernel, summary: dict, sizes: dict[str, int]) -> dict[str, int]:
    """The integer arguments a launch on contiguous tensors passes: strides and shape sizes."""
    values = {scalar.name: sizes[scalar.name] for scalar in kernel.scalars if scalar.name in sizes}
    for buffer in kernel.buffers:
        shape = [evaluate(entry, sizes) for entry in summary["buffers"][buffer.name]["shape"]]
        stride = 1
        for axis in reversed(range(buffer.ndim)):
            values[stride_name(buffer.name, axis)] = stride
            stride *= shape[axis]
    return values


def model_rows(compiled, gpu: str = "H200", sizes: dict[str, int] | None = None, top: int = 3) -> list[ModelRow]:
    """Per kernel: the default config and the `top` best of its space, each compiled ahead of time."""
    spec, sizes = gpu_spec(gpu), sizes or {}
    summary = summarize(compiled.program)
    rows = []
    for kernel in compiled.program.kernels:
        default = dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages)
        if kernel.group_m:
            default["GROUP_M"] = kernel.group_m
        space = kernel_space(kernel.name, summary[kernel.name], default, spec, sizes)
        values = launch_values(kernel, summary[kernel.name], sizes)
        for config in space.configs[:top + 1]:
            built = compile_ahead_of_time(compiled.module_file(), kernel, config, spec.compute_capability, values)
            resources = Resources(built.registers or 0, built.spilled_bytes or 0, built.shared_bytes or 0,
                                  built.registers is not None)
            prediction = predict(summary[kernel.name], config, spec, sizes, resources)
            rows.append(ModelRow(kernel.name, config, prediction, runnable(spec, resources, config["num_warps"])))
    return rows


def format_rows(rows: list[ModelRow]) -> str:
    lines = ["kernel  config  registers  spills  shared  programs/SM (limiter)  bound  predicted ms"]
    for row in rows:
        p, r = row.prediction, row.prediction.resources
        settings = " ".join(f"{k}={v}" for k, v in row.config.items())
        note = f"  ({row.runs})" if row.runs else ""
        lines.append(f"{row.kernel}  {settings}  {r.registers}  {r.spilled_bytes}  {r.shared_bytes}  "
                     f"{p.occupancy.programs_per_sm} ({p.occupancy.limiter})  {p.bound}  {p.ms:.4f}{note}")
    return "\n".join(lines) + "\n"
