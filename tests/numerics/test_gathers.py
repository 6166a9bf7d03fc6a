"""Gathers and scatters through indices read from memory: they compile with verification on and
match TVM; an index out of range reads zero (a store through one is dropped); `T.assume` removes
the run-time guard; a debug build asserts instead."""

import os

import numpy as np
import pytest
import torch
from tvm.script import tirx as T

from helpers import compile_and_check
from lowering.tile_ir import Load, Loop
from tir_passes.checks.numerics import ReferenceRun, index_ranges, make_inputs, specialize_shapes
from triton_codegen import compile


@T.prim_func(s_tir=True)
def embedding(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("embed"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = table[ids[vi], vj]


@T.prim_func(s_tir=True)
def embedding_assumed(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"),
                      Out: T.Buffer((37, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("embed"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.assume(0 <= ids[vi] and ids[vi] < 53)
            Out[vi, vj] = table[ids[vi], vj]


@T.prim_func(s_tir=True)
def batched_gather(table: T.Buffer((53, 29), "float16"), ids: T.Buffer((3, 7), "int64"),
                   Out: T.Buffer((3, 7, 29), "float16")):
    for b, s, d in T.grid(3, 7, 29):
        with T.sblock("gather"):
            vb, vs, vd = T.axis.remap("SSS", [b, s, d])
            Out[vb, vs, vd] = table[ids[vb, vs], vd] * T.float16(2)


@T.prim_func(s_tir=True)
def scatter(src: T.Buffer((37, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((53, 45), "float32")):
    for i, j in T.grid(37, 45):
        with T.sblock("scatter"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[ids[vi], vj] = src[vi, vj]


def _table_loads(kernel) -> list[Load]:
    found: list[Load] = []

    def walk(node) -> None:
        if isinstance(node, Load) and node.buffer == "table":
            found.append(node)
        if isinstance(node, Loop):
            for stmt in node.body:
                walk(stmt)
            return
        for field in ("value", "offset", "x", "a", "b", "cond", "acc"):
            child = getattr(node, field, None)
            if child is not None and not isinstance(child, str):
                walk(child)

    for tile_kernel in kernel.program.kernels:
        for stmt in tile_kernel.body:
            walk(stmt)
    return found


@pytest.mark.interpreter
@pytest.mark.aot
def test_embedding_lookup_matches_tvm_and_is_guarded():
    kernel = compile_and_check(embedding)
    [load] = _table_loads(kernel)
    [check] = load.checks
    assert not check.assumed and check.cond in load.mask


@pytest.mark.interpreter
@pytest.mark.aot
def test_assumed_range_removes_the_guard():
    kernel = compile_and_check(embedding_assumed)
    [load] = _table_loads(kernel)
    [check] = load.checks
    assert check.assumed and check.cond not in load.mask


@pytest.mark.interpreter
@pytest.mark.aot
def test_batched_int64_gather_matches_tvm():
    compile_and_check(batched_gather)


@pytest.mark.interpreter
def test_out_of_range_id_reads_zero():
    kernel = compile(embedding)
    table = torch.randn(53, 45)
    ids = torch.tensor([3, -1, 52, 53, 100000, -100000] + [7] * 31, dtype=torch.int32)
    out = torch.full((37, 45), 5.0)
    kernel(table, ids, out, interpret=True)
    valid = (ids >= 0) & (ids < 53)
    torch.testing.assert_close(out[valid], table[ids[valid].long()])
    assert bool((out[~valid] == 0).all())


@pytest.mark.interpreter
def test_store_through_out_of_range_id_is_dropped():
    kernel = compile(scatter, verify=False)  # duplicate random ids would race: numerics not comparable
    src = torch.randn(37, 45)
    ids = torch.arange(37, dtype=torch.int32) + 5
    ids[[0, 10, 20]] = torch.tensor([-1, 53, 60], dtype=torch.int32)
    storage = torch.full((60, 45), 7.0)  # rows 1..53 are Out; the rows around it must stay untouched
    out = storage[1:54]
    kernel(src, ids, out, interpret=True)
    valid = (ids >= 0) & (ids < 53)
    torch.testing.assert_close(out[ids[valid].long()], src[valid])
    written = torch.zeros(53, dtype=torch.bool)
    written[ids[valid].long()] = True
    assert bool((out[~written] == 7.0).all()) and bool((storage[0] == 7.0).all()) and bool((storage[54:] == 7.0).all())


def _line_of(text: str) -> int:
    with open(__file__) as handle:
        return next(number for number, line in enumerate(handle, start=1) if text in line)


@pytest.mark.interpreter
@pytest.mark.aot
def test_debug_build_asserts_naming_the_access_and_line():
    kernel = compile_and_check(embedding, debug=True)
    # one guard; the kernel's tensor-descriptor variant (its store of Out) asserts it too, alike
    asserts = sorted({line.strip() for line in kernel.source.splitlines() if "tl.device_assert" in line})
    assert "@triton.jit(debug=True)" in kernel.source and len(asserts) == 1
    where = f"{os.path.basename(__file__)}:{_line_of('Out[vi, vj] = table[ids[vi], vj]')}"
    assert where in asserts[0] and "table[ids[vi], vj]" in asserts[0] and "[0, 53)" in asserts[0]
    # the guard is asserted, not a mask conjunct as in the release build
    release = compile(embedding, verify=False).source
    assert _table_load_line(release).count("&") == _table_load_line(kernel.source).count("&") + 1


def _table_load_line(source: str) -> str:
    return next(line for line in source.splitlines() if "= tl.load(table_ptr" in line)


def test_debug_build_also_asserts_an_assumed_range():
    assert "tl.device_assert" not in compile(embedding_assumed, verify=False).source
    assert "tl.device_assert" in compile(embedding_assumed, verify=False, debug=True).source


def test_index_data_is_drawn_inside_the_indexed_range():
    @T.prim_func(s_tir=True)
    def narrow(table: T.Buffer((53, 45), "float32"), ids: T.Buffer((37,), "int32"), Out: T.Buffer((37, 45), "float32")):
        for i, j in T.grid(37, 45):
            with T.sblock("embed"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.assume(2 <= ids[vi] and ids[vi] < 10)
                Out[vi, vj] = table[ids[vi], vj]

    assert index_ranges(embedding) == {"ids": (0, 53)}
    assert index_ranges(narrow) == {"ids": (2, 10)}
    ids = make_inputs(specialize_shapes(narrow))["ids"]
    assert ids.min() >= 2 and ids.max() < 10 and len(np.unique(ids)) > 1
    reference = ReferenceRun.of(embedding)
    assert all(np.array_equal(data["ids"], reference.inputs["ids"]) for data in reference.datasets)
