"""A fast CLI: `--help`, `list-passes` and `diff` import neither TVM nor torch (a command pays only
for what it uses; triton_codegen/cli.py imports inside each command). Checked by what is in
sys.modules in a fresh interpreter, and `--help` timed there with a generous bound (the goal is
under 1 s warm; a loaded CI machine gets slack, an import of TVM alone takes 4 to 25 s)."""

import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = """
import contextlib, io, sys
from triton_codegen.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(",".join(sorted(m for m in ("tvm", "torch", "triton") if m in sys.modules)))
"""


def _heavy_imports(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return [name for name in done.stdout.strip().split(",") if name]


@pytest.mark.parametrize("args", [["--help"], ["list-passes"], ["compile", "--help"], ["tune", "--help"]],
                         ids=lambda args: " ".join(args))
def test_light_commands_import_no_tvm_or_torch(args):
    assert _heavy_imports(*args) == []


def test_diff_of_a_dump_folder_imports_no_tvm(tmp_path):
    for index, name in ((0, "input"), (1, "Pass")):
        (tmp_path / f"{index:02d}_{name}.py").write_text(f"# tir-triton stage {index:02d}: {name}\nx = {index}\n")
    assert _heavy_imports("diff", str(tmp_path)) == []


def test_help_is_fast():
    subprocess.run([sys.executable, "-m", "triton_codegen.cli", "--help"], capture_output=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)  # warm the file cache
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "triton_codegen.cli", "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
    assert done.returncode == 0 and "list-passes" in done.stdout
    assert time.perf_counter() - started < 3.0


def test_list_passes_is_the_default_pipeline():
    from tir_passes.pass_order import default_pass_names
    from tir_passes.pipeline import KNOWN_PASSES, default_pipeline, pass_names

    assert pass_names(default_pipeline()) == default_pass_names() == list(KNOWN_PASSES)
