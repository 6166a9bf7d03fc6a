"""Catalogue section E: pipeline robustness (docs/bad-input.md has the table)."""

import os
import subprocess
import sys

import pytest
import tvm

from catalogue_programs import scale
from tir_passes import CHECKS, PassError, VerificationError, run_pipeline
from tir_passes.infra.frontend import as_module
from tir_passes.infra.pass_util import s_tir_pass
from tir_passes.passes.tiling import Tiling
from triton_codegen import compile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _expects_untiled(func):
    """A pass whose precondition is an untiled nest, run after Tiling (a user-reordered list)."""
    if "tile.decisions" in func.body.block.annotations:
        raise ValueError("precondition violated: expects an untiled nest, got one with tile.decisions")
    return func


def test_50_pass_given_ir_it_does_not_expect_is_named_with_a_reproducer(tmp_path):
    with pytest.raises(PassError) as caught:
        run_pipeline(as_module(scale), [Tiling(), s_tir_pass("NeedsUntiled", _expects_untiled)],
                     dump_dir=str(tmp_path), checks=CHECKS)
    err = caught.value
    assert err.pass_name == "NeedsUntiled"
    assert "ValueError: precondition violated: expects an untiled nest" in str(err)
    assert sorted(os.listdir(err.artifacts)) == ["before.py", "input.py", "reproduce.py"]
    assert "tile.decisions" in (tmp_path / "failure_02_NeedsUntiled" / "before.py").read_text()


@tvm.transform.module_pass(opt_level=0, name="MutateInPlace")
def mutate_in_place(mod, ctx):
    mod["main"] = mod["main"].with_attr("my.touched", True)
    return mod


def test_51_pass_that_mutates_its_input_is_caught_by_the_purity_hash():
    with pytest.raises(VerificationError) as caught:
        run_pipeline(as_module(scale), [mutate_in_place], checks=CHECKS)
    assert (caught.value.pass_name, caught.value.check) == ("MutateInPlace", "purity")


COMPILE_AND_PRINT = """
import sys
sys.path.insert(0, {catalogue!r})
from catalogue_programs import scale
from triton_codegen import compile
sys.stdout.write(compile(scale, verify=False, dump_dir={dumps!r}).source)
"""


def test_52_dumps_and_kernels_do_not_depend_on_the_hash_seed(tmp_path):
    source = compile(scale, verify=False, dump_dir=str(tmp_path / "here")).source
    script = COMPILE_AND_PRINT.format(catalogue=os.path.dirname(__file__), dumps=str(tmp_path / "there"))
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "PYTHONHASHSEED": seed})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == source
    here, there = sorted(os.listdir(tmp_path / "here")), sorted(os.listdir(tmp_path / "there"))
    assert here == there and len(here) > 5
    for name in here:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes(), name
