"""The command line as a user meets it: tables, diffs, and one-paragraph errors."""

import json
import os
import subprocess
import sys

from tir_passes import default_pipeline, pass_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def cli(*args, env=None):
    merged = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "triton_codegen.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=merged, timeout=300)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GOOD = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def double(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
"""


def assert_clean_error(done, *fragments):
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr


def test_passes_writes_dumps_diffs_and_a_table(tmp_path):
    dumps = tmp_path / "d"
    done = cli("passes", os.path.join(EXAMPLES, "transpose.py"), "--dump-dir", str(dumps), "--verify")
    assert done.returncode == 0, done.stderr
    names = pass_names(default_pipeline())
    last = f"{len(names):02d}_{names[-1]}"
    assert f"{len(names):02d}    {names[-1]}" in done.stdout and "numerics=ok" in done.stdout and "contract=ok" in done.stdout
    assert sorted(p.name for p in dumps.iterdir() if p.suffix == ".py") == [
        f"{index:02d}_{name}.py" for index, name in enumerate(["input"] + names)]
    shown = cli("diff", str(dumps))
    assert shown.returncode == 0 and f"+++ {last}.py" in shown.stdout
    pair = cli("diff", str(dumps), "0", "Tiling")
    assert "--- 00_input.py" in pair.stdout


def test_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "broken.py", GOOD.replace("for i in range(16):", "for i in range(16)"))
    assert_clean_error(cli("passes", path, "--dump-dir", str(tmp_path / "d")), "broken.py:6", "syntax error")


def test_undefined_buffer_names_file_and_line(tmp_path):
    path = write(tmp_path, "undefined.py", GOOD.replace("A[vi] * T.float32(2)", "Q[vi] * T.float32(2)"))
    assert_clean_error(cli("passes", path, "--dump-dir", str(tmp_path / "d")), "undefined.py:9", "Undefined variable: Q")


def test_file_without_primfunc(tmp_path):
    path = write(tmp_path, "empty.py", "x = 1\n")
    assert_clean_error(cli("passes", path, "--dump-dir", str(tmp_path / "d")), "no @T.prim_func")


def test_missing_function_lists_the_ones_that_exist():
    done = cli("passes", os.path.join(EXAMPLES, "matmul.py") + ":matmul_int8", "--dump-dir", "unused")
    assert_clean_error(done, "no PrimFunc named 'matmul_int8'", "matmul_fp16, matmul_fp32")


def test_several_functions_without_a_choice():
    done = cli("passes", os.path.join(EXAMPLES, "matmul.py"), "--dump-dir", "unused")
    assert_clean_error(done, "several PrimFuncs", ":NAME")


def test_unwritable_dump_folder(tmp_path):
    blocker = write(tmp_path, "file", "not a folder")
    done = cli("passes", os.path.join(EXAMPLES, "transpose.py"), "--dump-dir", os.path.join(blocker, "dumps"))
    assert_clean_error(done, "cannot be written")


def test_debug_shows_the_traceback(tmp_path):
    path = write(tmp_path, "empty.py", "x = 1\n")
    done = cli("--debug", "passes", path, "--dump-dir", str(tmp_path / "d"))
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_dumps_and_kernels_are_identical_across_hash_seeds(tmp_path):
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}"
        done = cli("compile", os.path.join(EXAMPLES, "softmax.py"), "-o", str(out / "k"), "--dump-dir", str(out / "d"),
                   env={"PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        files = sorted(p for p in out.rglob("*") if p.is_file())
        outputs.append({str(p.relative_to(out)): p.read_bytes() for p in files})
    assert outputs[0].keys() == outputs[1].keys() and len(outputs[0]) > 5
    assert outputs[0] == outputs[1]


def test_module_and_manifest_are_identical_from_any_folder(tmp_path):
    """The same PrimFunc built from two folders, from two working directories and under two hash
    seeds gives byte-identical modules and manifests (no absolute paths, ids or set orders)."""
    built = []
    for index, seed in enumerate(("3", "4")):
        folder = tmp_path / f"project{index}" / ("nested/" * index or ".")
        folder.mkdir(parents=True)
        source = folder / "softmax.py"
        source.write_text(open(os.path.join(EXAMPLES, "softmax.py")).read())
        (folder / "_check.py").write_text(open(os.path.join(EXAMPLES, "_check.py")).read())
        out = tmp_path / f"out{index}"
        done = subprocess.run([sys.executable, "-m", "triton_codegen.cli", "compile", str(source), "-o", str(out),
                               "--no-verify"], capture_output=True, text=True, cwd=str(folder), timeout=300,
                              env={**os.environ, "PYTHONPATH": ROOT, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        built.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert sorted(built[0]) == ["manifest.json", "softmax.py"] and built[0] == built[1]


def test_compile_writes_module_and_manifest_and_checks(tmp_path):
    done = cli("compile", os.path.join(EXAMPLES, "rmsnorm.py"), "-o", str(tmp_path), "--check")
    assert done.returncode == 0, done.stderr
    assert "matches TVM" in done.stdout
    assert (tmp_path / "rmsnorm.py").exists() and (tmp_path / "manifest.json").exists()


def test_bank_conflict_report(tmp_path):
    done = cli("bank-conflicts", os.path.join(EXAMPLES, "shared_memory.py") + ":transpose_shared", "--fix")
    assert done.returncode == 0, done.stderr
    assert "32 wavefront(s), ideal 1, 31 conflict(s)" in done.stdout
    assert done.stdout.count("0 conflict(s)") >= 3


def test_grad_writes_the_forward_and_its_backward(tmp_path):
    out = tmp_path / "out"
    done = cli("grad", os.path.join(EXAMPLES, "rmsnorm.py"), "--wrt", "X,weight", "-o", str(out), "--no-verify")
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == ["manifest.json", "rmsnorm.py", "rmsnorm_backward.py", "rmsnorm_backward_tir.py"]
    assert sorted(json.loads((out / "manifest.json").read_text())["modules"]) == ["rmsnorm.py", "rmsnorm_backward.py"]
    assert "BACKWARD = {'module': 'rmsnorm_backward.py'" in (out / "rmsnorm.py").read_text()
    assert '"autodiff.values"' in (out / "rmsnorm_backward_tir.py").read_text()
    assert "d_X = drmsnorm/dX, d_weight = drmsnorm/dweight" in done.stdout


def test_grad_with_saved_values_writes_the_training_forward_too(tmp_path):
    out = tmp_path / "out"
    done = cli("grad", os.path.join(EXAMPLES, "layernorm.py"), "--wrt", "X,gamma,beta", "--save", "auto",
               "-o", str(out), "--no-verify")
    assert done.returncode == 0, done.stderr
    assert "layernorm_training.py" in os.listdir(out)
    module = (out / "layernorm.py").read_text()
    assert "'saved': ('mean', 'var')" in module and "'training': 'layernorm_training.py'" in module
    assert "saving mean, var" in done.stdout


def test_grad_refuses_a_save_of_what_the_backward_does_not_read():
    done = cli("grad", os.path.join(EXAMPLES, "layernorm.py"), "--wrt", "X", "--save", "Y", "-o", "unused")
    assert_clean_error(done, "save names 'Y', which is not an intermediate the backward reads")


def test_grad_refuses_what_it_cannot_differentiate_in_one_paragraph():
    # topi's arg-max: its value is differentiable (an intermediate here), its one output an integer index
    done = cli("grad", os.path.join(EXAMPLES, "argmax.py"), "--wrt", "A", "-o", "unused")
    assert_clean_error(done, "PrimFunc argmax: no float output depends on A")
