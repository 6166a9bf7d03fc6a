"""A kernel's GPU benchmark result, and where it stands under the GPU's roofline.

Results are the JSON lists benchmarks/run_gpu.py writes (benchmarks/results/*.json): entries with
`name`, `default_ms` (and `tuned_ms`), `bytes` (floor bytes: each input read once, each output
written once) and `flops`. Entries without those fields (other kinds of result) are skipped.
The roofline's ceilings are the GPU's measured copy bandwidth (the datasheet bandwidth where none
was measured) and its dense fp16 tensor-core peak, from tir_passes/contracts/gpu_specs.py.

The plot is matplotlib's, drawn on a bare `Figure` (Agg, no pyplot state, no display) and saved
as PNG without metadata: the same result gives the same bytes.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from dataclasses import dataclass

from tir_passes.errors import FrontendError
from tir_passes.contracts.gpu_specs import GpuSpec

_FIELDS = ("name", "default_ms", "bytes", "flops")


@dataclass(frozen=True)
class BenchmarkResult:
    name: str
    default_ms: float
    bytes: int
    flops: int
    tuned_ms: float | None = None


@dataclass(frozen=True)
class Ceilings:
    gpu: str
    bandwidth_tbs: float
    bandwidth_source: str          # "measured copy" or "datasheet"
    tensor_tflops: float | None    # None: no fp16 tensor-core peak known for this GPU

    @classmethod
    def of(cls, spec: GpuSpec) -> "Ceilings":
        measured = spec.copy_bandwidth_gbs is not None
        bandwidth = spec.copy_bandwidth_gbs if measured else spec.memory_bandwidth_gbs
        return cls(spec.name, bandwidth / 1000, "measured copy" if measured else "datasheet", spec.fp16_tensor_tflops)

    def bound_ms(self, bytes_: int, flops: int) -> float:
        """The least time the roofline allows for moving `bytes_` and computing `flops`."""
        memory = bytes_ / (self.bandwidth_tbs * 1e12)
        compute = flops / (self.tensor_tflops * 1e12) if self.tensor_tflops else 0.0
        return max(memory, compute) * 1e3


@dataclass(frozen=True)
class Placement:
    """A result's numbers against the ceilings."""

    result: BenchmarkResult
    ceilings: Ceilings

    @property
    def achieved_tbs(self) -> float:
        return self.result.bytes / (self.result.default_ms * 1e-3) / 1e12

    @property
    def achieved_tflops(self) -> float:
        return self.result.flops / (self.result.default_ms * 1e-3) / 1e12

    @property
    def intensity(self) -> float:
        """FLOP per byte of floor traffic."""
        return self.result.flops / self.result.bytes

    @property
    def bound_ms(self) -> float:
        return self.ceilings.bound_ms(self.result.bytes, self.result.flops)

    @property
    def fraction_of_bound(self) -> float:
        """The roofline's time over the measured time: 1.0 is on the roofline."""
        return self.bound_ms / self.result.default_ms


@dataclass(frozen=True)
class ResultsFile:
    name: str   # the file's name, for the page
    entries: tuple[BenchmarkResult, ...]


def load_results(path: str) -> ResultsFile:
    try:
        with open(path) as handle:
            entries = json.load(handle)
    except OSError as err:
        raise FrontendError(f"cannot read benchmark results {path}: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise FrontendError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(entries, list):
        raise FrontendError(f"{path}: expected a JSON list of benchmark entries (as benchmarks/run_gpu.py writes)")
    results = [_result(entry) for entry in entries if isinstance(entry, dict) and all(f in entry for f in _FIELDS)]
    if not results:
        raise FrontendError(f"{path}: no entry has all of {', '.join(_FIELDS)} (as benchmarks/run_gpu.py writes)")
    return ResultsFile(os.path.basename(path), tuple(results))


def _result(entry: dict) -> BenchmarkResult:
    tuned = entry.get("tuned_ms")
    return BenchmarkResult(str(entry["name"]), float(entry["default_ms"]), int(entry["bytes"]), int(entry["flops"]),
                           float(tuned) if tuned is not None else None)


def find_result(
    results: tuple[BenchmarkResult, ...], func_name: str, wanted: str | None = None
) -> BenchmarkResult | None:
    """The entry named `wanted`; else the one named after the PrimFunc: its name, or its name
    followed by the case's dtype or size (`softmax_fp16_16384x8192` for `softmax`)."""
    names = ", ".join(r.name for r in results)
    if wanted is not None:
        chosen = [r for r in results if r.name == wanted]
        if not chosen:
            raise FrontendError(f"no benchmark result named '{wanted}' (results: {names})")
        return chosen[0]
    case = re.compile(re.escape(func_name) + r"(_((b?f|fp|u?int|i)\d+|\d)\w*)?")
    matching = [r for r in results if r.name == func_name] or [r for r in results if case.fullmatch(r.name)]
    if len(matching) > 1:
        raise FrontendError(
            f"several benchmark results match '{func_name}' ({', '.join(r.name for r in matching)}): "
            "pick one with --result NAME"
        )
    return matching[0] if matching else None


def roofline_png(placement: Placement) -> bytes:
    """Two panels: the kernel's point under the roofline (for a kernel that counts no FLOPs, under
    the bandwidth ceiling alone), and the measured time against the roofline's least time."""
    from matplotlib.figure import Figure  # here: importing matplotlib takes a second, and few pages plot

    figure = Figure(figsize=(11, 3.8), dpi=100, layout="constrained")
    roof, times = figure.subplots(1, 2, width_ratios=(3, 2))
    if placement.result.flops:
        _draw_roofline(roof, placement)
    else:
        _draw_bandwidth(roof, placement)
    _draw_times(times, placement)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _draw_roofline(axes, placement: Placement) -> None:
    ceilings, peak = placement.ceilings, placement.ceilings.tensor_tflops
    bandwidth = ceilings.bandwidth_tbs  # TB/s times FLOP/B is TFLOP/s
    ridge = peak / bandwidth if peak else placement.intensity
    low = min(ridge / 2**12, placement.intensity / 4)
    high = max(ridge * 2**6, placement.intensity * 4)
    corners = [low, ridge, high] if peak else [low, high]
    axes.loglog(corners, [min(bandwidth * x, peak or math.inf) for x in corners], color="#1f3b73", linewidth=2)
    middle = math.sqrt(low * ridge)
    axes.annotate(
        f"{bandwidth:.2f} TB/s ({ceilings.bandwidth_source})",
        (middle, bandwidth * middle),
        textcoords="offset points",
        xytext=(-6, 6),
        ha="right",
        fontsize=8,
        color="#1f3b73",
    )
    if peak:
        axes.annotate(
            f"fp16 tensor cores {peak:.0f} TFLOP/s",
            (ridge, peak),
            textcoords="offset points",
            xytext=(0, 5),
            fontsize=8,
            color="#1f3b73",
        )
    axes.loglog([placement.intensity], [placement.achieved_tflops], "o", color="#c0392b", markersize=8)
    axes.annotate(
        f"{placement.result.name}\n{placement.achieved_tflops:.0f} TFLOP/s",
        (placement.intensity, placement.achieved_tflops),
        textcoords="offset points",
        xytext=(8, -24),
        fontsize=8,
        color="#c0392b",
    )
    axes.set_xlabel("arithmetic intensity (FLOP per byte of floor traffic)")
    axes.set_ylabel("TFLOP/s")
    axes.set_title(f"roofline, {ceilings.gpu}", fontsize=10)
    axes.grid(True, which="major", linewidth=0.4, alpha=0.5)


def _draw_bandwidth(axes, placement: Placement) -> None:
    ceilings = placement.ceilings
    axes.axhline(ceilings.bandwidth_tbs, color="#1f3b73", linewidth=2)
    axes.annotate(
        f"{ceilings.bandwidth_tbs:.2f} TB/s ({ceilings.bandwidth_source})",
        (0, ceilings.bandwidth_tbs),
        xycoords=("axes fraction", "data"),
        textcoords="offset points",
        xytext=(6, 5),
        fontsize=8,
        color="#1f3b73",
    )
    axes.plot([0.5], [placement.achieved_tbs], "o", color="#c0392b", markersize=8)
    axes.annotate(
        f"{placement.result.name}\n{placement.achieved_tbs:.2f} TB/s",
        (0.5, placement.achieved_tbs),
        textcoords="offset points",
        xytext=(10, -26),
        fontsize=8,
        color="#c0392b",
    )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, max(ceilings.bandwidth_tbs, placement.achieved_tbs) * 1.25)
    axes.set_xticks([])
    axes.set_xlabel("no floating-point work counted (flops = 0): bandwidth alone bounds it")
    axes.set_ylabel("TB/s of floor traffic")
    axes.set_title(f"bandwidth roofline, {ceilings.gpu}", fontsize=10)
    axes.grid(True, axis="y", linewidth=0.4, alpha=0.5)


def _draw_times(axes, placement: Placement) -> None:
    bars = [
        ("roofline bound", placement.bound_ms, "#1f3b73"),
        ("measured (default)", placement.result.default_ms, "#c0392b"),
    ]
    if placement.result.tuned_ms is not None:
        bars.append(("measured (tuned)", placement.result.tuned_ms, "#e67e22"))
    labels, values, colours = zip(*bars)
    axes.barh(labels, values, color=colours)
    axes.invert_yaxis()
    for row, value in enumerate(values):
        axes.annotate(f"{value:.3f} ms", (value, row), textcoords="offset points", xytext=(4, -3), fontsize=8)
    axes.set_xlim(0, max(values) * 1.35)
    axes.set_xlabel("milliseconds")
    axes.set_title(f"{placement.result.name}: {placement.fraction_of_bound:.0%} of the roofline", fontsize=10)
