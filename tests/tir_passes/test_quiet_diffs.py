"""Diffs show what changed: a pass that only records a decision is "unchanged; decision: ...", and
the printer's re-wrapping of the body in `with T.sblock("root")` never shows as a change."""

import tvm

from tir_passes import run_pipeline
from tir_passes.infra import dump
from tir_passes.infra.frontend import as_module
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, with_root_block
from tir_passes.passes.remove_unit_loops import RemoveUnitLoops

from softmax import softmax


def _recording(name: str, key: str, text: str):
    """A pass that writes a decision record on the root block and changes nothing else."""
    def record(func):
        root = root_block(func)
        annotations = dict(root.annotations.items())
        annotations[key] = [text]
        return with_root_block(func, replace_block(root, annotations=annotations))

    return s_tir_pass(name, record)


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_a_pass_that_only_records_a_decision_is_unchanged_with_its_decision(tmp_path):
    passes = [_recording("Decide", "test.decisions", "keep the rows whole"), RemoveUnitLoops()]
    result = run_pipeline(as_module(softmax), passes, dump_dir=str(tmp_path))
    decide = result.stages[0]
    assert not decide.changed and decide.change == "decision"
    assert decide.decisions == (("test.decisions", "keep the rows whole"),)
    assert decide.summary() == "# 01_Decide: unchanged; decision: test.decisions: keep the rows whole\n"
    # the printer re-wrapped the whole body in `with T.sblock("root")`; the diff is the one record
    assert 'with T.sblock("root"):' in dump.read_stage_script(decide.dump_path)
    assert '# with T.sblock("root"):' in as_module(softmax).script()
    assert _changed_lines(decide.diff) == ['+        T.sblock_attr({"test.decisions": ["keep the rows whole"]})']
    with open(decide.dump_path) as handle:
        assert "(unchanged; decision: test.decisions)" in handle.readline()
    assert "01    Decide                   decision" in result.table()
    # the next pass leaves the wrapped body as it is: nothing to show
    assert result.stages[1].change == "no" and result.stages[1].diff == ""


def test_diffable_drops_both_forms_of_the_root_wrapper():
    implicit = as_module(softmax)
    root = root_block(implicit["main"])
    explicit = tvm.IRModule({"main": with_root_block(implicit["main"], replace_block(root, annotations={"k": 1}))})
    wrapped = explicit.script()
    assert 'with T.sblock("root"):' in wrapped
    without_attr = [line for line in dump.diffable(wrapped).splitlines() if "T.sblock_attr" not in line]
    assert without_attr == dump.diffable(implicit.script()).splitlines()
    assert "sblock(\"root\")" not in dump.diffable(implicit.script())


def test_a_real_change_is_a_change_and_a_changed_decision_is_named(tmp_path):
    passes = [_recording("First", "test.decisions", "one"), _recording("Second", "test.decisions", "two")]
    result = run_pipeline(as_module(softmax), passes)
    assert [stage.change for stage in result.stages] == ["decision", "decision"]
    assert result.stages[1].decisions == (("test.decisions", "two"),)
    assert _changed_lines(result.stages[1].diff) == [
        '-        T.sblock_attr({"test.decisions": ["one"]})', '+        T.sblock_attr({"test.decisions": ["two"]})']
    fused = run_pipeline(as_module(softmax)).stages
    assert next(stage for stage in fused if stage.name == "LoopFusion").change == "yes"


def test_the_diff_command_says_a_decision_only_stage_is_unchanged_with_its_decision(tmp_path, capsys):
    from triton_codegen.cli import main

    passes = [_recording("Decide", "test.decisions", "keep the rows whole"), RemoveUnitLoops()]
    run_pipeline(as_module(softmax), passes, dump_dir=str(tmp_path))
    assert main(["diff", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    decided, record = "# 01_Decide.py: unchanged; decision: test.decisions\n--- 00_input.py\n", \
        '+        T.sblock_attr({"test.decisions": ["keep the rows whole"]})'
    assert decided in shown and record in shown and "# 02_RemoveUnitLoops.py: unchanged\n" in shown
    # two stages apart, the header's "unchanged" is not about this pair: only the diff
    assert main(["diff", str(tmp_path), "0", "2"]) == 0
    assert capsys.readouterr().out.startswith("--- 00_input.py\n+++ 02_RemoveUnitLoops.py\n")
