"""`tir-triton report`: the decisions it reads back from the IR, its highlighted listings and
side-by-side diffs, the benchmark placement and plot, and the page itself, rendered in a real
headless browser (Debian's chromium; .ci/run installs it, and without it that test is skipped)."""

import html
import os
import re
import shutil
import subprocess

import pytest
from tvm.script import tirx as T

from cumsum import make_cumsum
from matmul import make_matmul
from softmax import make_softmax
from tir_passes import default_pipeline, pass_names
from tir_passes.errors import FrontendError
from tir_passes.contracts.gpu_specs import gpu_spec
from triton_codegen import compile
from triton_codegen.cli import main
from triton_codegen.report.code import highlighted_lines, python_lexer, side_by_side, tile_program_lexer
from triton_codegen.report.decisions import read_decisions
from triton_codegen.report.page import build_report
from triton_codegen.report.roofline import (BenchmarkResult, Ceilings, Placement, find_result, load_results,
                                            roofline_png)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "2026-11-30-h200-contract.json")
STAGES = pass_names(default_pipeline())


# --- decisions ------------------------------------------------------------------------------------
@T.prim_func(s_tir=True)
def transposed_intermediate(A: T.Buffer((24, 16, 4), "float32"), Y: T.Buffer((24, 16), "float32"),
                            Z: T.Buffer((24, 16), "float32")):
    """X is written and read as X[vj, vi] by two nests: BufferLayout permutes it."""
    X = T.sblock_alloc_buffer((16, 24), "float32")
    for i, j, k in T.grid(24, 16, 4):
        with T.sblock("X"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                X[vj, vi] = T.float32(0)
            X[vj, vi] = X[vj, vi] + A[vi, vj, vk]
    for i, j in T.grid(24, 16):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vj, vi] * T.float32(2)
    for i, j in T.grid(24, 16):
        with T.sblock("Z"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = X[vj, vi] + T.float32(1)


@T.prim_func(s_tir=True)
def previous_row(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    for i in range(8):
        for j in range(16):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(16):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.if_then_else(vi > 0, B[vi - 1, vj], T.float32(0))


def test_fusion_decisions_with_the_bytes_each_saves():
    rows, cols = 67, 45
    decisions = read_decisions(compile(make_softmax(rows, cols), verify=False).tir)
    inline = [d for d in decisions.fusion if d.text.startswith("inline exp")]
    assert len(inline) == 1 and inline[0].taken
    assert inline[0].bytes_saved == 2 * rows * cols * 4   # exp_buf's write and read, float32
    assert decisions.fusion_bytes_saved == sum(d.bytes_saved for d in decisions.fusion)
    assert len(decisions.kernels) == 1 and set(decisions.kernels[0].kernel.registers) == {"row_max", "row_sum"}


def test_layout_decision_and_one_tiling_decision_per_kernel():
    kernel = compile(transposed_intermediate, verify=False)
    decisions = read_decisions(kernel.tir)
    assert len(decisions.layout) == 1 and decisions.layout[0].text.startswith("X: axes permuted to (1, 0)")
    assert [d.index for d in decisions.kernels] == list(range(len(kernel.program.kernels)))
    for decision in decisions.kernels:
        assert decision.reasons and decision.reasons[0].startswith(f"kernel {decision.index} (")
        assert decision.program_ids and all(t.tile.axis for t in decision.tile_axes)


def test_notes_are_grouped_by_their_typed_kernel_not_by_their_words():
    """The report reads each tile note's `kernel` field: notes whose lines name no kernel at all
    (reworded) land with the same kernels."""
    import tvm

    from tir_passes.contracts.tile_contract import DECISIONS_KEY
    from tir_passes.contracts.tile_root import tile_notes
    from tir_passes.infra.pass_util import replace_block, root_block, with_root_block

    func = compile(transposed_intermediate, verify=False).tir["main"]
    notes = tile_notes(func)
    assert {note.kernel for note in notes} == {0, 1}
    reworded = [{"kernel": note.kernel, "text": f"note {position}"} for position, note in enumerate(notes)]
    root = root_block(func)
    func = with_root_block(func, replace_block(root, annotations={**dict(root.annotations), DECISIONS_KEY: reworded}))
    decisions = read_decisions(tvm.IRModule({"main": func}))
    for decision in decisions.kernels:
        assert decision.reasons == tuple(f"note {p}" for p, note in enumerate(notes) if note.kernel == decision.index)


def test_serial_loop_names_the_dependence_and_the_spilled_value():
    [decision] = read_decisions(compile(previous_row, verify=False).tir).kernels
    assert decision.program_ids == ()
    assert [loop.tile.carries for loop in decision.dependences] == [("B",)]
    assert decision.kernel.spilled == ("B",)
    assert any("carries a dependence through B" in reason for reason in decision.reasons)


def test_dot_and_scan_marks_name_the_kernels_tile_axes():
    [matmul] = read_decisions(compile(make_matmul(67, 45, 33), verify=False).tir).kernels
    [(block, dot)] = matmul.dots
    assert block == "C" and {dot.m, dot.n, dot.k} == {t.tile.axis for t in matmul.tile_axes}
    [cumsum] = read_decisions(compile(make_cumsum(37, 29), verify=False).tir).kernels
    [(block, scan)] = cumsum.scans
    assert (block, scan.buffer, scan.combiner) == ("Y", "Y", "sum")
    assert scan.axis in {t.tile.axis for t in cumsum.tile_axes}


# --- listings and diffs ---------------------------------------------------------------------------
def _text(markup) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", str(markup)))


def test_highlighted_lines_keep_every_character_of_every_line():
    kernel = compile(make_cumsum(37, 29), verify=False)
    for text, lexer in ((kernel.source, python_lexer()), (kernel.tile_ir, tile_program_lexer())):
        lines = highlighted_lines(text, lexer)
        assert [_text(line) for line in lines] == text.splitlines()
        assert any('<span class="k">' in line for line in lines)   # keywords are highlighted


def test_side_by_side_pairs_changed_lines_and_counts_unchanged_ones():
    before = "\n".join(f"x{i} = {i}" for i in range(20)) + "\n"
    after = before.replace("x5 = 5\n", "    x5 = 5 + 1\n") + "flag = x5 < 3\n"
    diff = side_by_side(before, after, python_lexer(), context=2)
    assert (diff.added, diff.removed) == (2, 1)
    [changed] = [row for row in diff.rows if row.kind == "changed"]
    assert (changed.left_number, changed.right_number) == (6, 6)
    [added] = [row for row in diff.rows if row.kind == "added"]
    assert _text(added.right) == "flag = x5 < 3" and "&lt;" in added.right
    shown = [row for row in diff.rows if row.kind != "skipped" and row.left_number is not None]
    assert len(shown) + sum(row.skipped for row in diff.rows) == 20
    assert side_by_side(before, before, python_lexer()).rows == ()


# --- benchmark results and the roofline -----------------------------------------------------------
def test_results_match_by_primfunc_name_or_by_choice():
    entries = load_results(RESULTS).entries
    names = {r.name for r in entries}
    assert find_result(entries, "softmax").name.startswith("softmax_") and "softmax_fp16_16384x8192" in names
    assert find_result(entries, "layernorm").name == "layernorm_fp16_16384x8192"   # not layernorm_moments_...
    assert find_result(entries, "matmul_fp16").name == "matmul_fp16_4096"
    assert find_result(entries, "scale_shift_relu") is None
    assert find_result(entries, "anything", "transpose_fp32_8192x8192").name == "transpose_fp32_8192x8192"
    with pytest.raises(FrontendError, match="several benchmark results match 'attention_scores'"):
        find_result(entries, "attention_scores")
    with pytest.raises(FrontendError, match="no benchmark result named 'nope'"):
        find_result(entries, "softmax", "nope")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ('{"name": "x"}', "expected a JSON list"),
    ('[{"name": "x", "ms": 1}]', "no entry has all of name, default_ms, bytes, flops"),
])
def test_bad_results_files_are_named(tmp_path, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(FrontendError, match=message):
        load_results(str(path))


def test_placement_against_the_gpus_ceilings():
    spec = gpu_spec("H200")
    ceilings = Ceilings.of(spec)
    copy = Placement(BenchmarkResult("copy", 0.2, 10 ** 9, 0), ceilings)
    assert copy.bound_ms == pytest.approx(10 ** 9 / (spec.copy_bandwidth_gbs * 1e9) * 1e3)
    assert copy.achieved_tbs == pytest.approx(10 ** 9 / 0.2e-3 / 1e12)
    gemm = Placement(BenchmarkResult("gemm", 0.5, 10 ** 6, 2 * 4096 ** 3), ceilings)
    assert gemm.bound_ms == pytest.approx(2 * 4096 ** 3 / (spec.fp16_tensor_tflops * 1e12) * 1e3)
    assert gemm.fraction_of_bound == pytest.approx(gemm.bound_ms / 0.5)


def test_roofline_plot_is_a_deterministic_png():
    entries = load_results(RESULTS).entries
    ceilings = Ceilings.of(gpu_spec("H200"))
    for name in ("softmax", "matmul_fp16"):   # bandwidth alone, and the full roofline
        placement = Placement(find_result(entries, name), ceilings)
        first = roofline_png(placement)
        assert first.startswith(b"\x89PNG") and len(first) > 10_000
        assert roofline_png(placement) == first and b"matplotlib" not in first


# --- the page -------------------------------------------------------------------------------------
def _without_timings(page: str) -> str:
    return re.sub(r'<span class="time">[^<]*</span>', "", page)


def test_page_is_self_contained_collapses_no_ops_and_is_deterministic(tmp_path):
    target = os.path.join(ROOT, "examples", "cumsum.py")
    first, second = build_report(target).html, build_report(target).html
    assert _without_timings(first) == _without_timings(second)
    assert not re.search(r"<script|<link|@import|url\(", first)
    assert all(ref.startswith(("#", "data:")) for ref in re.findall(r'(?:src|href)="([^"]*)"', first))
    for name in STAGES:
        assert f'<td class="stage-name">{name}</td>' in first
    stages = re.findall(r'<details class="stage" id="stage-\d\d"( open)?>\s*<summary>.*?</span> (\w+)', first)
    assert {name for opened, name in stages if opened} == {"Tiling"}   # cumsum: only Tiling changes it
    assert "No GPU benchmark result given" in first


def test_report_errors_are_one_paragraph_before_compiling(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    target = os.path.join(ROOT, "examples", "softmax.py")
    assert main(["report", target, "-o", str(tmp_path / "r.html"), "--result", "softmax_fp16_16384x8192"]) == 2
    assert main(["report", target, "-o", str(tmp_path / "r.html"), "--results", str(bad)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors[0].startswith("error: --result names an entry") and "not JSON" in errors[1]
    assert not (tmp_path / "r.html").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine: .ci/run installs Debian's package with "
                    "apt-get when it can (it could not here), so the page was not rendered in a browser")
def test_report_renders_in_headless_chromium(tmp_path, capsys):
    from PIL import Image

    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    assert main(["report", os.path.join(ROOT, "examples", "softmax.py"), "-o", str(page), "--results", RESULTS]) == 0
    assert "Entry softmax_fp16_16384x8192" in capsys.readouterr().out
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1400,2000", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert done.returncode == 0 and "</html>" in dom, done.stderr[-2000:]
    assert '<span class="kernel-name">softmax</span>' in dom and "softmax_kernel0" in dom
    for name in STAGES:
        assert f'<td class="stage-name">{name}</td>' in dom
    assert re.search(r'<img class="plot" alt="roofline of softmax_fp16_16384x8192[^"]*" src="data:image/png;base64,', dom)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2000) and os.path.getsize(shot) > 50_000
    assert len(image.getcolors(maxcolors=1 << 20)) > 50   # text, tables and badges, not one blank colour
    print(f"screenshot: {shot}")


def test_page_shows_the_advice():
    page = build_report(os.path.join(ROOT, "examples", "matmul.py") + ":matmul_fp32").html
    assert "<h3>Advice</h3>" in page and "a tl.dot of fp32 operands in IEEE fp32" in page


def test_not_a_dot_is_a_tiling_decision_of_the_report():
    from swiglu import make_swiglu

    kernel = compile(make_swiglu(37, 45, 53), verify=False, disable=("ShareContractionLoops",))
    [decision] = read_decisions(kernel.tir).kernels
    [(block, why)] = decision.not_dots
    assert why.reason == "serial-reduction" and block in decision.blocks


def test_a_stage_that_only_records_a_decision_shows_the_decision():
    page = build_report(os.path.join(ROOT, "examples", "softmax.py")).html   # OnlineSoftmax: rows fit one tile
    assert re.search(r'<td class="stage-name">OnlineSoftmax</td><td>decision</td>', page)
    stage = re.search(r'<details class="stage" id="stage-\d\d">\s*<summary>.*?</span> OnlineSoftmax\n(.*?)</details>',
                      page, re.S).group(1)
    assert "unchanged; decision: online.decisions" in stage and "Identical to the previous stage" not in stage
    assert "<code>online.decisions</code>: row_max: not online" in stage
