"""The hardware model on a compiled kernel, with no GPU: each kernel compiled ahead of time for the
GPU's architecture, specialized as a launch on contiguous tensors would be, so that occupancy
comes from the registers, spills and shared memory Triton reports; then the model's time.

`tir-triton model FILE.py` prints it for the default config and the best few of the tuner's space;
for a module tir-triton wrote (`saved_model_rows`), from its TILE_SUMMARY alone, with no TVM.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.errors import FrontendError
from tir_passes.infra.names import stride_name
from tir_passes.contracts.gpu_specs import gpu_spec

from .aot import SavedKernel, compile_ahead_of_time
from .loader import import_module
from .hardware_model import Prediction, Resources, evaluate, predict, runnable, summarize
from .search_space import kernel_space


@dataclass(frozen=True)
class ModelRow:
    kernel: str
    config: dict
    prediction: Prediction
    runs: str | None   # why the config cannot run well, or None
    default: bool = False   # the kernel's own config (what run() launches untuned)


def launch_values(kernel, summary: dict, sizes: dict[str, int]) -> dict[str, int]:
    """The integer arguments a launch on contiguous tensors passes: strides and shape sizes."""
    values = {scalar.param: sizes[scalar.name] for scalar in kernel.scalars if scalar.name in sizes}
    for buffer in kernel.buffers:
        shape = [evaluate(entry, sizes) for entry in summary["buffers"][buffer.name]["shape"]]
        stride = 1
        for axis in reversed(range(buffer.ndim)):
            values[stride_name(buffer.name, axis)] = stride
            stride *= shape[axis]
    return values


def model_rows(compiled, gpu: str = "H200", sizes: dict[str, int] | None = None, top: int = 3) -> list[ModelRow]:
    """Per kernel: the default config and the `top` best of its space, each compiled ahead of time."""
    summary = summarize(compiled.program)
    kernels = []
    for kernel in compiled.program.kernels:
        default = dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages)
        kernels.append((kernel, summary[kernel.name], default))
    return _rows(compiled.module_file(), kernels, gpu, sizes or {}, top)


def saved_model_rows(path: str, gpu: str = "H200", sizes: dict[str, int] | None = None,
                     top: int = 3) -> list[ModelRow]:
    """model_rows of a module tir-triton wrote: each kernel's arguments and tiles from its
    TILE_SUMMARY, its default the config the module launches (CONFIGS[CHOSEN]). Imports no TVM."""
    module = import_module(path, interpret=False)
    kernels = []
    for name, _launch in module.LAUNCHERS:
        summary = module.TILE_SUMMARY[name]
        kernels.append((SavedKernel.of(name, summary), summary, dict(module.CONFIGS[name][module.CHOSEN[name]])))
    return _rows(path, kernels, gpu, sizes or {}, top)


def shape_names(entry) -> set[str]:
    """The size variables a shape entry names: `rows`, or those inside an (op, a, b)."""
    if isinstance(entry, str):
        return {entry}
    if isinstance(entry, (tuple, list)) and len(entry) == 3:
        return shape_names(entry[1]) | shape_names(entry[2])
    return set()


def check_sizes(kernels, sizes: dict[str, int]) -> None:
    """Every size variable the kernels' buffers name has a value, and `sizes` names only the
    program's sizes and scalars (a typo would predict at the wrong size, or fail deep inside)."""
    needed = sorted({name for _, summary, _ in kernels for buffer in summary["buffers"].values()
                     for entry in buffer["shape"] for name in shape_names(entry)})
    known = set(needed) | {scalar.name for kernel, _, _ in kernels for scalar in kernel.scalars}
    theirs = f"its sizes: {', '.join(needed)}" if needed else "its sizes are all static"
    unknown = sorted(name for name in sizes if name not in known)
    if unknown:
        raise FrontendError(f"--sizes names {', '.join(unknown)}, which this program does not have ({theirs})")
    missing = [name for name in needed if name not in sizes]
    if missing:
        raise FrontendError(f"the model needs a value for each symbolic size ({theirs}): pass --sizes "
                            + ",".join(f"{name}=N" for name in missing))


def _rows(module_file: str, kernels, gpu: str, sizes: dict[str, int], top: int) -> list[ModelRow]:
    check_sizes(kernels, sizes)
    spec = gpu_spec(gpu)
    rows = []
    for kernel, summary, default in kernels:
        if kernel.group_m:
            default.setdefault("GROUP_M", kernel.group_m)
        space = kernel_space(kernel.name, summary, default, spec, sizes)
        values = launch_values(kernel, summary, sizes)
        for config in space.configs[:top + 1]:
            built = compile_ahead_of_time(module_file, kernel, config, spec.compute_capability, values)
            resources = Resources(built.registers or 0, built.spilled_bytes or 0, built.shared_bytes or 0,
                                  built.registers is not None)
            prediction = predict(summary, config, spec, sizes, resources)
            rows.append(ModelRow(kernel.name, config, prediction, runnable(spec, resources, config["num_warps"]),
                                 config == default))
    return rows


HEADER = ("kernel", "config", "", "registers", "spills", "shared", "programs/SM (limiter)", "bound", "predicted ms")


def format_rows(rows: list[ModelRow], gpu: str | None = None, sizes: dict[str, int] | None = None) -> str:
    """An aligned table, the default config marked `*`, under a line naming the GPU and the sizes."""
    table = [HEADER] + [_cells(row) for row in rows]
    widths = [max(len(line[column]) for line in table) for column in range(len(HEADER))]
    numeric = {3, 4, 5, 8}
    lines = []
    if gpu is not None:
        spec = gpu_spec(gpu)
        at = ", ".join(f"{name}={value}" for name, value in sorted((sizes or {}).items())) or "the program's own sizes"
        lines.append(f"{spec.name} (sm_{spec.compute_capability}), predicted at {at}; * = the default config")
    for line in table:
        cells = [cell.rjust(width) if column in numeric else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells).rstrip())
    notes = [f"{row.kernel} {_settings(row)}: {row.runs}" for row in rows if row.runs]
    return "\n".join(lines + [f"note: {note}" for note in notes]) + "\n"


def _settings(row: ModelRow) -> str:
    return " ".join(f"{k}={v}" for k, v in row.config.items())


def _cells(row: ModelRow) -> tuple[str, ...]:
    p, r = row.prediction, row.prediction.resources
    return (row.kernel, _settings(row), "*" if row.default else "", str(r.registers), str(r.spilled_bytes),
            str(r.shared_bytes), f"{p.occupancy.programs_per_sm} ({p.occupancy.limiter})", p.bound, f"{p.ms:.4f}")
