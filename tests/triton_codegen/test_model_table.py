"""The readable model table (aligned, GPU named, default marked), the report's GPU card only for a
measurement at the program's own sizes, and reduced sizes that name the dims they stand for."""

import pytest
from tvm.script import tirx as T

from tir_passes import FrontendError

from tir_passes.checks.shape_reduction import reduced_copy
from tir_passes.contracts.gpu_specs import gpu_spec
from triton_codegen import compile
from triton_codegen.cli import main
from triton_codegen.model_report import format_rows, model_rows
from triton_codegen.report.page import find_benchmark, model_prediction, parameter_bytes
from triton_codegen.report.roofline import BenchmarkResult, Ceilings, ResultsFile


@T.prim_func(s_tir=True)
def scale(A: T.Buffer((1024, 512), "float32"), B: T.Buffer((1024, 512), "float32")):
    for i, j in T.grid(1024, 512):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def test_the_model_table_is_aligned_names_the_gpu_and_marks_the_default():
    rows = model_rows(compile(scale, verify=False), "H200", {}, top=1)
    text = format_rows(rows, "H200", {})
    lines = text.splitlines()
    assert lines[0] == "H200 (sm_90), predicted at the program's own sizes; * = the default config"
    header, body = lines[1], [line for line in lines[2:] if not line.startswith("note:")]
    assert header.split()[:2] == ["kernel", "config"] and header.rstrip().endswith("predicted ms")
    assert sum(" * " in line for line in body) == sum(row.default for row in rows) == 1
    # every row's predicted time ends in the header's last column
    assert {len(line.rstrip()) for line in body} == {len(header.rstrip())}
    assert "predicted at rows=4096" in format_rows(rows, "H200", {"rows": 4096})


def _results(bytes_: int) -> ResultsFile:
    return ResultsFile("run.json", (BenchmarkResult("scale", 0.01, bytes_, 0),))


def test_the_gpu_card_is_only_for_a_measurement_at_the_programs_sizes():
    ceilings = Ceilings.of(gpu_spec("H200"))
    own = parameter_bytes(scale)
    assert own == 2 * 1024 * 512 * 4
    assert find_benchmark("scale", ceilings, _results(own), None, own).at_program_sizes
    elsewhere = find_benchmark("scale", ceilings, _results(8 * own), None, own)
    assert not elsewhere.at_program_sizes and elsewhere.placement is not None
    assert "Not this program's sizes" in elsewhere.note


def test_reduced_sizes_name_the_dims_they_stand_for():
    text = reduced_copy(scale).describe()
    assert text.startswith("reduced sizes 512->") and "(A.shape[1], B.shape[1])" in text
    assert "(A.shape[0], B.shape[0])" in text


def test_the_report_has_the_models_prediction_without_a_gpu():
    card = model_prediction(compile(scale, verify=False), "H200")
    assert card.ms is not None and card.ms > 0 and card.sub.startswith("hardware model, default config (")
    from rmsnorm import rmsnorm  # symbolic rows: the model needs a size it does not have

    symbolic = model_prediction(compile(rmsnorm, verify=False), "H200")
    assert symbolic.ms is None and "--sizes rows=N" in symbolic.sub


def test_a_missing_or_unknown_size_is_named_before_anything_is_compiled_for_the_gpu():
    from rmsnorm import rmsnorm

    symbolic = compile(rmsnorm, verify=False)
    with pytest.raises(FrontendError, match=r"a value for each symbolic size \(its sizes: rows\): pass --sizes rows=N"):
        model_rows(symbolic, "H200", {})
    with pytest.raises(FrontendError, match=r"--sizes names row, which this program does not have \(its sizes: rows\)"):
        model_rows(symbolic, "H200", {"row": 4096})
    with pytest.raises(FrontendError, match=r"--sizes names rows, .*\(its sizes are all static\)"):
        model_rows(compile(scale, verify=False), "H200", {"rows": 4096})


def test_sizes_that_are_not_name_value_pairs_are_an_error_of_the_command(capsys):
    for given in ("rows", "rows=many", "rows=4096,=8"):
        assert main(["model", "no_such_file.py", "--sizes", given]) == 2
        assert f"--sizes takes NAME=N pairs separated by commas (rows=4096,cols=8), not {given!r}" in capsys.readouterr().err
