"""An input TVM's printer does not round trip (TE-built, int64 shapes): no pass is blamed for it,
and later stages are compared relative to it, so a pass that adds a non-printable attribute is
still caught."""

import pytest
import tvm_ffi
from tvm import te, tirx

from helpers import compile_and_check
from tir_passes import CHECKS, VerificationError, run_pipeline
from tir_passes.infra.frontend import as_module
from tir_passes.checks.input_checks import input_round_trip
from tir_passes.infra.pass_util import s_tir_pass
from tir_passes.passes.tiling import Tiling


def int64_scale():
    """te.create_prim_func over int64 shapes: its blocks' domains start at an int64 0, which
    prints as `0` and parses back as an int32."""
    X = te.placeholder((tirx.IntImm("int64", 37), tirx.IntImm("int64", 29)), "float32", name="X")
    Y = te.compute(X.shape, lambda i, j: X[i, j] * 2 + 1, name="Y")
    return te.create_prim_func([X, Y]).with_attr("global_symbol", "int64_scale")


def test_the_input_itself_does_not_round_trip():
    assert "iter_vars[0].dom.min.ty.dtype" in input_round_trip(as_module(int64_scale()))


def test_te_program_compiles_with_stages_compared_relative_to_the_input():
    """Was "verification 'round_trip' failed after pass HoistAllocations", a pass that changed nothing."""
    with pytest.warns(UserWarning, match="TVM's printer, not a pass: the input itself does not survive print"):
        kernel = compile_and_check(int64_scale())
    assert {stage.checks["round_trip"] for stage in kernel.pipeline.stages} == {"relative"}
    assert kernel.pipeline.notes and "TVM's printer" in kernel.pipeline.notes[0]


def _int_annotation(func):
    def rewrite(loop):
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                        {**dict(loop.annotations), "my.factor": tirx.const(4, "int32")})

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))


def test_a_pass_adding_what_does_not_round_trip_is_still_caught():
    with pytest.warns(UserWarning, match="TVM's printer"), pytest.raises(VerificationError) as caught:
        run_pipeline(as_module(int64_scale()), [Tiling(), s_tir_pass("IntImmAnnotation", _int_annotation)],
                     checks=CHECKS)
    assert (caught.value.pass_name, caught.value.check) == ("IntImmAnnotation", "round_trip")
    assert "relative to it" in caught.value.details
