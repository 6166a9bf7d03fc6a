"""compile(verify=True) ends with the kernel itself against TVM's build of the input: edits of the
emitted source that no stage check can see are caught there, and large programs are checked on a
shape-reduced copy in seconds."""

import dataclasses
import importlib
import re

import pytest
import torch
from tvm.script import tirx as T

from tir_passes import VerificationError
from triton_codegen import compile
from triton_codegen.check import CANARY_ELEMENTS, canaries

triton_backend = importlib.import_module("triton_codegen.triton_backend")


@T.prim_func(s_tir=True)
def shifted_sum(A: T.Buffer((67, 45), "float32"), B: T.Buffer((67, 45), "float32")):
    for i, j in T.grid(67, 45):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)


def _compile_with_edited_source(monkeypatch, edit):
    original = triton_backend.BACKEND.emit

    def edited(program):
        source = original(program)
        changed = edit(source)
        assert changed != source, "the edit did not apply"
        return changed

    monkeypatch.setattr(triton_backend, "BACKEND", dataclasses.replace(triton_backend.BACKEND, emit=edited))
    return compile(shifted_sum)


SOURCE_MUTANTS = {
    # the tail mask lets one more row/column through: the store writes past the tensor
    "mask < becomes <=": lambda s: re.sub(r"mask_(\w+) = \((\w+) < (\d+)\)", r"mask_\1 = (\2 <= \3)", s),
    # a load without its mask reads the margins (canaries) into the output
    "load mask dropped": lambda s: s.replace(", mask=mask_i[:, None] & mask_j[None, :], other=0.0)", ")", 1),
    # an off-by-one store: every element one place further
    "store offset off by one": lambda s: s.replace("tl.store(B_ptr + (", "tl.store(B_ptr + 1 + (", 1),
}


@pytest.mark.parametrize("name", sorted(SOURCE_MUTANTS))
def test_edited_kernel_source_is_caught_by_the_kernel_check(name, monkeypatch):
    with pytest.raises(VerificationError) as caught:
        _compile_with_edited_source(monkeypatch, SOURCE_MUTANTS[name])
    assert caught.value.check == "kernel" and "differs from TVM's build" in str(caught.value)


def test_canaries_differ_between_neighbours_for_every_dtype():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.bool):
        values = canaries(dtype)
        assert len(values) == CANARY_ELEMENTS and bool((values[1:] != values[:-1]).all()), dtype


def test_compile_reports_the_kernel_check():
    kernel = compile(shifted_sum)
    assert kernel.check_report.ok and "at full size" in str(kernel.check_report)


def test_large_program_is_checked_on_a_reduced_copy_and_says_so(tmp_path):
    """16384 x 8192: every check runs; the numerics and the kernel check run on the same program
    with its sizes reduced consistently, and the report and the dump say at which sizes."""
    from softmax import make_softmax

    kernel = compile(make_softmax(16384, 8192, "float16"), dump_dir=str(tmp_path))
    sizes = "reduced sizes 8192->64 (A.shape[1], Out.shape[1]), 16384->128 (A.shape[0], Out.shape[0])"
    assert all(stage.checks.get("numerics") == "ok" for stage in kernel.pipeline.stages)
    assert sizes in str(kernel.check_report) and sizes in (tmp_path / "verification.txt").read_text()
    assert "16384" in kernel.source  # the module itself is the full-size one


@T.prim_func(s_tir=True)
def strided_rows(A: T.Buffer((600, 512), "float32"), B: T.Buffer((300, 512), "float32")):
    # B's rows are A's even rows: halving the sizes independently would read past A
    for i, j in T.grid(300, 512):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi * 2, vj]


def test_sizes_that_must_stay_related_are_checked_at_full_size():
    kernel = compile(strided_rows)
    assert kernel.pipeline.numerics.reduced is False
    assert "full size (the reduced copy is not in bounds" in str(kernel.check_report)
