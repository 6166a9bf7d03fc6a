"""NaN through max and min as torch computes it (catalogue #29, issue 9): an elementwise max/min
with a NaN operand is NaN, a max/min reduction over a NaN is NaN, a running max turns NaN from the
NaN on. TVM's llvm build selects `a > b ? a : b`, which keeps a NaN only in the second place; the
numerics reference rewrites float min/max to propagate NaN before building (numerics.propagate_nan)."""

import numpy as np
import pytest
import torch
from tvm.script import tirx as T

from triton_codegen import compile


@T.prim_func(s_tir=True)
def pairwise(A: T.Buffer((37, 29), "float32"), B: T.Buffer((37, 29), "float32"),
             Hi: T.Buffer((37, 29), "float32"), Lo: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("pair"):
            vi, vj = T.axis.remap("SS", [i, j])
            Hi[vi, vj] = T.max(A[vi, vj], B[vi, vj])
            Lo[vi, vj] = T.min(A[vi, vj], B[vi, vj])


@T.prim_func(s_tir=True)
def row_max_min(A: T.Buffer((37, 300), "float32"), Hi: T.Buffer((37,), "float32"), Lo: T.Buffer((37,), "float32")):
    for i, k in T.grid(37, 300):
        with T.sblock("hi"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Hi[vi] = T.min_value("float32")
            Hi[vi] = T.max(Hi[vi], A[vi, vk])
    for i, k in T.grid(37, 300):
        with T.sblock("lo"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Lo[vi] = T.max_value("float32")
            Lo[vi] = T.min(Lo[vi], A[vi, vk])


@T.prim_func(s_tir=True)
def running_max(X: T.Buffer((7, 50), "float32"), Y: T.Buffer((7, 50), "float32")):
    for i, j in T.grid(7, 50):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], T.max(Y[vi, vj - 1], X[vi, vj]))


def _with_nans(shape, positions, seed=0):
    data = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    for position in positions:
        data[position] = float("nan")
    return data


def test_elementwise_max_and_min_propagate_nan():
    a = _with_nans((37, 29), [(0, 0), (3, 7), (36, 28)])
    b = _with_nans((37, 29), [(0, 1), (3, 7), (20, 5)], seed=1)
    hi, lo = torch.empty(37, 29), torch.empty(37, 29)
    compile(pairwise)(a, b, hi, lo, interpret=True)
    torch.testing.assert_close(hi, torch.maximum(a, b), equal_nan=True)
    torch.testing.assert_close(lo, torch.minimum(a, b), equal_nan=True)


@pytest.mark.parametrize("column", [0, 150, 255, 256, 299])  # first, middle, tile edges, last
def test_reductions_propagate_nan_wherever_it_is(column):
    a = _with_nans((37, 300), [(5, column), (6, 0), (6, 299)])
    hi, lo = torch.empty(37), torch.empty(37)
    compile(row_max_min)(a, hi, lo, interpret=True)
    torch.testing.assert_close(hi, torch.amax(a, dim=1), equal_nan=True)
    torch.testing.assert_close(lo, torch.amin(a, dim=1), equal_nan=True)


def test_running_max_is_nan_from_the_nan_on():
    x = _with_nans((7, 50), [(2, 10), (4, 0)])
    y = torch.empty(7, 50)
    compile(running_max)(x, y, interpret=True)
    torch.testing.assert_close(y, torch.cummax(x, dim=1).values, equal_nan=True)
