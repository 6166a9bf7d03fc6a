"""The numerics reference cannot take the process down: TVM's llvm build of the input runs in a
forked child (tir_passes/checks/sandbox.py); a crash or a hang there is the input's undefined
behaviour on that data (UndefinedBehaviourError), a crash of a later stage is the pass's. Data
respect the program (tir_passes/checks/data_ranges.py): assumed ranges, computed indices and
divisors."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import reference_programs as programs
from tir_passes.checks.data_ranges import ValueRange, value_ranges
from tir_passes.checks.sandbox import ChildError, Crash, run_isolated
from tir_passes.checks.numerics import ReferenceRun, make_inputs, specialize_shapes
from triton_codegen import compile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the crashing programs run in a subprocess, so a regression cannot take the test process down
CRASHES = r"""
import json
import reference_programs as programs
from tir_passes.checks import verify
from tir_passes.errors import UndefinedBehaviourError
from tir_passes.checks.numerics import ReferenceRun
import tvm

found = {}
for name in ("computed_divisor", "wild_gather"):
    try:
        ReferenceRun.of(getattr(programs, name))
        found[name] = "ran"
    except UndefinedBehaviourError as err:
        found[name] = str(err)
# a later stage that crashes where the input runs is the pass's failure, reported as a problem
reference = ReferenceRun.of(programs.tame_gather)
found["stage"] = verify.check_numerics(reference, tvm.IRModule({"main": programs.wild_gather}))
print(json.dumps(found))
"""


def _run_crash_cases() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests", "numerics")]))
    done = subprocess.run([sys.executable, "-c", CRASHES], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_crashing_reference_is_the_inputs_undefined_behaviour_and_a_crashing_stage_the_passs():
    found = _run_crash_cases()
    assert "SIGFPE" in found["computed_divisor"] and "undefined behaviour" in found["computed_divisor"]
    assert "SIGSEGV" in found["wild_gather"] and "random data" in found["wild_gather"]
    [problem] = found["stage"]
    assert "the stage crashed with SIGSEGV" in problem and "on which the input runs" in problem


def test_the_sandbox_reports_signals_hangs_and_errors():
    assert run_isolated(lambda: {"x": np.arange(3)})["x"].tolist() == [0, 1, 2]
    crash = run_isolated(lambda: os.kill(os.getpid(), signal.SIGFPE))
    assert isinstance(crash, Crash) and crash.signal == "SIGFPE" and "division" in crash.describe()
    started = time.monotonic()
    hang = run_isolated(lambda: time.sleep(60), seconds=0.5)
    assert isinstance(hang, Crash) and hang.signal == "timeout" and time.monotonic() - started < 10
    with pytest.raises(ChildError, match="ZeroDivisionError"):
        run_isolated(lambda: 1 // 0)


def test_assumed_and_computed_index_ranges_are_solved():
    assert value_ranges(programs.flat_gather)["ids"] == ValueRange(0, 53, indexes=True)
    assert value_ranges(programs.shifted_gather)["ids"] == ValueRange(0, 52, indexes=True)
    assert value_ranges(programs.divide_assumed)["Bd"] == ValueRange(1, None, nonzero=True)
    assert value_ranges(programs.divide_loaded)["Bd"] == ValueRange(nonzero=True)
    concrete = specialize_shapes(programs.shifted_gather)
    ids = make_inputs(concrete)["ids"]
    assert ids.min() >= 0 and ids.max() < 52 and len(set(ids.tolist())) > 10   # the whole range is drawn


def test_divisors_are_never_zero_in_either_data_set():
    for program in (programs.divide_assumed, programs.divide_loaded):
        reference = ReferenceRun.of(program)
        for data in reference.datasets:
            assert (data["Bd"] != 0).all()
    assumed = ReferenceRun.of(programs.divide_assumed)
    assert all((data["Bd"] > 0).all() for data in assumed.datasets)   # the assumption holds in both


@pytest.mark.interpreter
@pytest.mark.parametrize("program", ["divide_assumed", "divide_loaded", "flat_gather", "shifted_gather"])
def test_programs_with_divisors_and_computed_indices_compile_verified(program):
    kernel = compile(getattr(programs, program))
    assert kernel.check_report.ok and not kernel.check_report.skipped, str(kernel.check_report)
