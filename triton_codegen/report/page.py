"""Build the report page: compile with every check, gather what the page shows, render it.

`build_report` compiles the target as `compile(verify=True)` does, with the stage dumps in a
temporary folder (they are what the diffs compare), and `render_report` turns a compiled kernel,
its stage scripts and an optional benchmark placement into one self-contained HTML page
(templates/page.html.j2, inline CSS, the plot as a data URI: nothing is fetched when it opens).
Everything on the page is in a fixed order; only the timings (class "time") change between runs.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass

import jinja2
import tvm
from markupsafe import Markup

from tir_passes.checks.shape_reduction import buffer_elements
from tir_passes.infra import dump
from tir_passes.errors import FrontendError
from tir_passes.infra.frontend import load_target, split_target
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.pipeline import CHECKS

from ..driver import TritonKernel, compile
from ..emit_module import VERSION
from ..environment import default_to_interpreter
from .code import (CODE_CLASS, SideBySide, highlight_css, highlighted_lines, python_lexer, side_by_side,
                   tile_program_lexer)
from .decisions import Decisions, KernelDecision, extent_text, read_decisions
from .roofline import Ceilings, Placement, ResultsFile, find_result, load_results, roofline_png


@dataclass(frozen=True)
class StageView:
    index: int
    name: str
    changed: bool
    pass_ms: float
    verify_ms: float
    checks: tuple[tuple[str, str], ...]   # (check, "ok" | "FAILED"), in CHECKS order
    diff: SideBySide                      # against the previous stage
    decisions: tuple[tuple[str, str], ...] = ()   # (root attr, value) of a pass that changed nothing else


@dataclass(frozen=True)
class KernelView:
    decision: KernelDecision
    triton_name: str | None   # the generated @triton.jit function that runs it


@dataclass(frozen=True)
class Benchmark:
    """What the performance section shows: a placement and its plot, or why there is none."""

    placement: Placement | None
    note: str
    plot_uri: str = ""
    at_program_sizes: bool = False   # measured at this program's own sizes: the summary may show its time


@dataclass(frozen=True)
class Report:
    html: str
    kernel: TritonKernel
    benchmark: Benchmark


def build_report(target: str, *, gpu: str = "H200", results: str | None = None,
                 result_name: str | None = None) -> Report:
    """Compile `FILE.py[:FUNC]` with every check and render its report."""
    default_to_interpreter()  # without a GPU the kernel check runs in the interpreter, as compile()'s does
    if result_name is not None and results is None:
        raise FrontendError("--result names an entry of a results file: pass the file with --results FILE.json")
    spec = gpu_spec(gpu)
    mod, _ = load_target(target)
    # before compiling, so that a bad results file or entry fails at once
    benchmark = find_benchmark(str(mod["main"].attrs["global_symbol"]), Ceilings.of(spec),
                               load_results(results) if results is not None else None, result_name,
                               parameter_bytes(mod["main"]))
    with tempfile.TemporaryDirectory(prefix="tir-triton-report-") as dumps:
        kernel = compile(mod, dump_dir=dumps, verify=True, gpu=gpu)
        # compared without the printer's root-block re-wrapping, as the diffs are
        scripts = {index: dump.diffable(dump.read_stage_script(path)) for index, _, path in dump.list_stages(dumps)}
    path, func = split_target(target)
    source = os.path.basename(path) + (f":{func}" if func else "")
    return Report(render_report(kernel, scripts, source=source, gpu=spec.name, benchmark=benchmark,
                                model=model_prediction(kernel, gpu)), kernel, benchmark)


@dataclass(frozen=True)
class ModelCard:
    """The hardware model's time for the default configs at the program's own sizes (no GPU run)."""

    ms: float | None
    sub: str


def model_prediction(kernel: TritonKernel, gpu: str) -> ModelCard:
    """The sum over kernels of the model's time for each default config (model_report.model_rows,
    each kernel compiled ahead of time for the GPU); none for symbolic sizes, which it would need."""
    from ..model_report import model_rows

    symbolic = sorted({d for p in kernel.program.params for d in p.shape if isinstance(d, str)})
    if symbolic:
        return ModelCard(None, f"symbolic sizes ({', '.join(symbolic)}): tir-triton model FILE --sizes "
                               f"{symbolic[0]}=N predicts at N")
    rows = [row for row in model_rows(kernel, gpu, {}, top=0) if row.default]
    bounds = ", ".join(dict.fromkeys(row.prediction.bound for row in rows))
    # the card's label says "predicted"; a measurement, when there is one at these sizes, is its own card
    return ModelCard(sum(row.prediction.ms for row in rows), f"hardware model, default config ({bounds}-bound)")


def write_report(report: Report, out: str) -> str:
    try:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(report.html)
    except OSError as err:
        raise FrontendError(f"cannot write the report {out}: {err.strerror or err}") from None
    return out


def find_benchmark(name: str, ceilings: Ceilings, results: ResultsFile | None, result_name: str | None,
                   program_bytes: int | None = None) -> Benchmark:
    """The entry to place under the roofline. Its time reaches the summary's GPU card only when it was
    measured at this program's sizes: the bytes its parameters hold are the entry's (a program with
    symbolic sizes has no sizes of its own to compare, and shows the entry as measured)."""
    if results is None:
        return Benchmark(None, "No GPU benchmark result given: pass --results FILE.json (what benchmarks/run_gpu.py "
                               f"writes) to place this kernel under the {ceilings.gpu}'s roofline.")
    result = find_result(results.entries, name, result_name)
    if result is None:
        return Benchmark(None, f"No entry of {results.name} is named after '{name}' (entries: "
                               f"{', '.join(r.name for r in results.entries)}): pick one with --result NAME.")
    placement = Placement(result, ceilings)
    uri = "data:image/png;base64," + base64.b64encode(roofline_png(placement)).decode("ascii")
    own = program_bytes is None or program_bytes == result.bytes
    note = f"Entry {result.name} of {results.name}, measured at that case's own size."
    if not own:
        note += (f" Not this program's sizes ({result.bytes} bytes moved there, {program_bytes} in this program's "
                 f"parameters): the summary shows no {ceilings.gpu} time for it.")
    return Benchmark(placement, note, uri, own)


def parameter_bytes(func) -> int | None:
    """The bytes the buffer parameters hold, or None when a size is symbolic."""
    counts = buffer_elements(func)
    if counts is None:
        return None
    return sum(count * tvm.runtime.DataType(str(param.dtype)).bits // 8 for param, count in counts)


def stage_views(kernel: TritonKernel, scripts: dict[int, str]) -> list[StageView]:
    lexer = python_lexer()
    return [StageView(stage.index, stage.name, stage.changed, stage.seconds * 1e3, stage.verify_seconds * 1e3,
                      tuple((check, stage.checks[check]) for check in CHECKS if check in stage.checks),
                      side_by_side(scripts[stage.index - 1], scripts[stage.index], lexer),
                      () if stage.changed else stage.decisions)
            for stage in kernel.pipeline.stages]


def kernel_views(kernel: TritonKernel, decisions: Decisions) -> list[KernelView]:
    by_blocks = {frozenset(k.source_blocks): k.name for k in kernel.program.kernels}
    return [KernelView(d, by_blocks.get(frozenset(d.blocks))) for d in decisions.kernels]


def render_report(kernel: TritonKernel, scripts: dict[int, str], *, source: str, gpu: str,
                  benchmark: Benchmark, model: ModelCard | None = None) -> str:
    decisions = read_decisions(kernel.tir)
    stages = stage_views(kernel, scripts)
    return _environment().get_template("page.html.j2").render(
        name=kernel.name, source=source, gpu=gpu, version=VERSION, kernel=kernel, stages=stages,
        verified=all(status == "ok" for stage in stages for _, status in stage.checks),
        numerics=kernel.pipeline.numerics.describe(),
        check=kernel.check_report, decisions=decisions, kernels=kernel_views(kernel, decisions),
        input_lines=highlighted_lines(scripts[0], python_lexer()),
        tile_lines=highlighted_lines(kernel.tile_ir, tile_program_lexer()),
        triton_lines=highlighted_lines(kernel.source, python_lexer()),
        advice=kernel.advice, benchmark=benchmark, model=model, code_class=CODE_CLASS,
        highlight_css=Markup(highlight_css()))


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.PackageLoader("triton_codegen.report", "templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined,
                                     trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["thousands"] = lambda number: f"{number:,}"
    environment.filters["extent"] = extent_text
    return environment
