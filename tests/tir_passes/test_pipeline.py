"""The pipeline driver: dumps that parse back, diffs, no-op marks, pass selection."""

import os

import pytest
import tvm

from tir_passes import FrontendError, default_pipeline, pass_names, run_pipeline
from tir_passes.infra import dump
from tir_passes.infra.frontend import as_module
from tir_passes.passes.remove_unit_loops import RemoveUnitLoops

from softmax import softmax


def test_every_dump_parses_back_to_its_stage(tmp_path):
    result = run_pipeline(as_module(softmax), dump_dir=str(tmp_path), checks=("well_formed",))
    stages = dump.list_stages(str(tmp_path))
    assert [name for _, name, _ in stages] == ["input"] + pass_names(default_pipeline())
    for (index, name, path), record in zip(stages[1:], result.stages):
        reparsed = tvm.script.from_source(dump.read_stage_script(path))
        assert record.name == name and record.index == index
        assert isinstance(reparsed, tvm.IRModule) and "main" in [g.name_hint for g in reparsed.get_global_vars()]
    final = tvm.script.from_source(dump.read_stage_script(stages[-1][2]))
    tvm.ir.assert_structural_equal(final, result.module)


def test_no_op_pass_is_marked_and_has_an_empty_diff(tmp_path):
    result = run_pipeline(as_module(softmax), dump_dir=str(tmp_path))
    hoist = result.stages[0]
    assert hoist.name == "HoistAllocations" and not hoist.changed and hoist.diff == ""
    with open(hoist.dump_path) as handle:
        assert "no-op" in handle.readline()
    names = pass_names(default_pipeline())
    last = result.stages[-1]
    assert last.changed and last.diff.startswith(f"--- {len(names) - 1:02d}_{names[-2]}")
    assert os.path.exists(os.path.join(str(tmp_path), f"{len(names):02d}_{names[-1]}.diff"))


def test_disable_and_stop_after_select_passes():
    names = pass_names(default_pipeline())
    result = run_pipeline(as_module(softmax), disable=["RemoveUnitLoops"], stop_after="Tiling")
    assert [s.name for s in result.stages] == [n for n in names[:names.index("Tiling") + 1] if n != "RemoveUnitLoops"]
    result = run_pipeline(as_module(softmax), stop_after="RemoveUnitLoops")
    assert [s.name for s in result.stages] == names[:names.index("RemoveUnitLoops") + 1]


def test_unknown_pass_name_lists_the_passes():
    with pytest.raises(FrontendError, match="no pass named 'Tilling'.*Tiling"):
        run_pipeline(as_module(softmax), stop_after="Tilling")


def test_user_supplied_pass_list():
    result = run_pipeline(as_module(softmax), [RemoveUnitLoops()])
    assert [s.name for s in result.stages] == ["RemoveUnitLoops"]


def test_stages_record_time_and_checks():
    result = run_pipeline(as_module(softmax), checks=("well_formed", "round_trip"))
    for stage in result.stages:
        assert stage.seconds >= 0 and stage.checks == {"well_formed": "ok", "round_trip": "ok"}
