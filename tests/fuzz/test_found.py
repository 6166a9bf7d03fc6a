"""Every program the fuzzer found failing, shrunk, in tests/fuzz/found/: each must compile with
verification, match TVM's llvm build in the interpreter and compile for sm_90 and sm_80
(`compile_and_check`).

A file whose bug is still open says so in a module-level `XFAIL = "reason"` and gives the
fuzzer's view of the failure as `SIGNATURE`, a regular expression over `outcome: detail`
(runner.outcome_of). Such a file is an xfail as long as it fails that way; it fails the test when
it fails differently (the bug changed: update the file) or passes (the bug is fixed: delete the
XFAIL and SIGNATURE lines, and the file is a regression test from then on). While the file
is open, the CI fuzz run lists failures matching SIGNATURE as known instead of failing on them.
`SIZES` binds the file's symbolic sizes for the kernel check.
"""

from __future__ import annotations

import os
import re

import pytest
from helpers import compile_and_check
from tvm.script import tirx as T

from triton_codegen import compile
from triton_codegen.aot import AotCompileError, compile_ahead_of_time
from triton_codegen.configs import config_space

from .known import FOUND, module_constant
from .runner import load_program, outcome_of, restart_aot_worker


def found_files() -> list:
    return [pytest.param(os.path.join(FOUND, name), id=name[:-3]) for name in sorted(os.listdir(FOUND))
            if name.endswith(".py")]


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("path", found_files())
def test_found_program(path):
    func, sizes = load_program(path), module_constant(path, "SIZES") or None
    reason = module_constant(path, "XFAIL")
    if reason is None:
        compile_and_check(func, sizes=sizes)
        return
    kind, detail = outcome_of(func, sizes or {})
    if kind == "ok":
        compile_and_check(func, sizes=sizes)
        pytest.fail(f"{os.path.basename(path)} passes now: delete its XFAIL and SIGNATURE lines")
    signature = module_constant(path, "SIGNATURE")
    assert re.search(signature, f"{kind}: {detail}", re.DOTALL), \
        f"{os.path.basename(path)} fails differently from its SIGNATURE now:\n{kind}: {detail[:3000]}"
    pytest.xfail(reason)


@T.prim_func(s_tir=True)
def double(A: T.Buffer((5,), "float32"), B: T.Buffer((5,), "float32")):
    for i in range(5):
        with T.sblock("B"):
            v = T.axis.remap("S", [i])
            B[v] = A[v] * T.float32(2)


@pytest.mark.aot
@pytest.mark.xfail(strict=True, reason="the compile worker's replies share stdout with MLIR's diagnostics")
def test_aot_worker_survives_a_kernel_mlir_rejects(tmp_path):
    """Found by the fuzzer (constant_condition_mask.py's kernel, then every later compile failed).

    A kernel that fails MLIR's verifier makes the ahead-of-time worker print the module's IR on
    its stdout, which is also its reply channel: compile_ahead_of_time raises a raw
    JSONDecodeError instead of AotCompileError, and the next, valid kernel gets the stale output
    as its reply. Here the kernel is broken on purpose with the int mask the constant-condition
    bug emits."""
    kernel = compile(double, verify=False)
    tile_kernel = kernel.program.kernels[0]
    config = config_space(tile_kernel)[0]
    broken = tmp_path / "broken.py"
    broken.write_text(kernel.source.replace("mask=mask_i, other", "mask=(~(0 == 0)), other", 1))
    assert broken.read_text() != kernel.source
    try:
        with pytest.raises(AotCompileError, match="tt.load"):
            compile_ahead_of_time(str(broken), tile_kernel, config, 90)
        compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90)
    finally:
        restart_aot_worker()
