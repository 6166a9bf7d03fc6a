"""Dumps are programs: each `NN_Pass.py` runs as Python (real imports), parses back to its stage,
and `tir-triton compile NN_Pass.py` runs only the passes after NN, giving the original's kernel
under the original function's name (docs/pipeline.md)."""

import os
import re
import runpy

import pytest

from tir_passes.infra import dump
from tir_passes.infra.frontend import as_module, load_target
from tir_passes.pipeline import default_pipeline, pass_names, passes_after, run_pipeline
from triton_codegen import compile
from triton_codegen.cli import main

from attention import attention
from rmsnorm import rmsnorm
from softmax import softmax

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kernel(source: str) -> list[str]:
    """The module without its provenance: the input's hash, the passes this run applied, and the
    TVMScript file:line each block comes from (a dump's own lines, not the user's)."""
    skipped = ("Source PrimFunc structural hash:", "Passes applied:")
    return [re.sub(r" \(\w+\.py:\d+\)", "", line) for line in source.splitlines() if not line.startswith(skipped)]


def test_a_dump_has_real_imports_and_gives_back_the_printed_script(tmp_path):
    result = run_pipeline(as_module(softmax), dump_dir=str(tmp_path))
    for record in result.stages:
        with open(record.dump_path) as handle:
            text = handle.read()
        assert "\nfrom tvm.script import tirx as T\n" in text and "# from " not in text
        program = text.split("\n", 1)[1]
        assert dump.read_stage_script(record.dump_path) == dump.as_printed(program)
        assert dump.as_program(dump.as_printed(program)) == program
    # what the printer wrote, exactly (the diffs and the round-trip check read this)
    assert dump.read_stage_script(dump.list_stages(str(tmp_path))[0][2]) == as_module(softmax).script()
    fusion = next(index for index, record in enumerate(result.stages) if record.name == "LoopFusion")
    assert dump.stage_of(result.stages[fusion].dump_path) == (fusion + 1, "LoopFusion")
    assert dump.stage_of(os.path.join(ROOT, "examples", "softmax.py")) is None


# rmsnorm: symbolic rows, which the printer writes as a string in the first signature that uses them
@pytest.mark.parametrize("func", [softmax, rmsnorm], ids=["softmax", "rmsnorm"])
def test_a_dump_runs_as_python(tmp_path, func):
    run_pipeline(as_module(func), dump_dir=str(tmp_path))
    name = str(func.attrs["global_symbol"])
    for path in [path for _, _, path in dump.list_stages(str(tmp_path))]:
        namespace = runpy.run_path(path)  # as `python NN_LoopFusion.py`
        assert str(namespace["Module"]["main"].attrs["global_symbol"]) == name, path


# attention: the stages whose decision records (online statistics, fusion, the tile contract) the
# later passes and the lowering read back from the dump's text
@pytest.mark.parametrize("func, stages", [(softmax, None), (attention, ("OnlineSoftmax", "LoopFusion", "Tiling")),
                                          (rmsnorm, ("input", "LoopFusion"))], ids=["softmax", "attention", "rmsnorm"])
def test_every_dump_compiles_to_the_original_kernel(tmp_path, func, stages):
    original = compile(func, dump_dir=str(tmp_path), verify=False)
    dumps = dump.list_stages(str(tmp_path))
    assert [name for _, name, _ in dumps] == ["input"] + pass_names(default_pipeline())
    for index, name, path in [stage for stage in dumps if stages is None or stage[1] in stages]:
        mod, loaded_name = load_target(path)
        assert loaded_name == original.name
        again = compile(mod, verify=False, passes=passes_after(default_pipeline(), dump.stage_of(path)[1]))
        assert again.name == original.name
        assert _kernel(again.source) == _kernel(original.source), f"stage {index:02d}_{name}"


def test_cli_compile_of_a_dump_writes_the_functions_module(tmp_path, capsys):
    result = run_pipeline(as_module(softmax), dump_dir=str(tmp_path / "dumps"))
    stage = next(record.dump_path for record in result.stages if record.name == "RemoveUnitLoops")
    assert main(["compile", stage, "-o", str(tmp_path / "out")]) == 0
    assert sorted(os.listdir(tmp_path / "out")) == ["manifest.json", "softmax.py"]
    with open(tmp_path / "out" / "softmax.py") as handle:
        # only the passes after RemoveUnitLoops ran on it
        assert "Passes applied: NormalizeLoopStarts, BankConflictFreeTiling, Tiling\n" in handle.read()
    assert "softmax.py" in capsys.readouterr().out


def test_a_dump_of_a_pass_not_in_the_pipeline_is_named():
    from tir_passes import FrontendError

    with pytest.raises(FrontendError, match="dump is of pass NoSuchPass, which is not in the pipeline"):
        passes_after(default_pipeline(), "NoSuchPass")
