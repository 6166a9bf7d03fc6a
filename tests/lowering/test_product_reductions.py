"""Product reductions (`Y = Y * x` under T.init): a register accumulator opened at 1, folded with
`tl.reduce(..., _tir_multiply)`, tail lanes filled with 1; 16-bit inputs multiply in fp32 and round
at the store. Checked against TVM's llvm build in the interpreter and compiled for sm_90/sm_80."""

import pytest
import torch
from helpers import compile_and_check
from tvm.script import tirx as T

from triton_codegen import compile


@T.prim_func(s_tir=True)
def row_product(A: T.Buffer((67, 45), "float32"), P: T.Buffer((67,), "float32")):
    for i, k in T.grid(67, 45):
        with T.sblock("product"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                P[vi] = T.float32(1)
            P[vi] = P[vi] * (T.float32(1) + T.tanh(A[vi, vk]) * T.float32(0.25))


@T.prim_func(s_tir=True)
def direct_product(A: T.Buffer((11, 1037), "float32"), P: T.Buffer((11,), "float32")):
    # the loaded term itself: a tail lane filled with 0 (a sum's fill) would zero every product
    for i, k in T.grid(11, 1037):
        with T.sblock("product"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                P[vi] = T.float32(1)
            P[vi] = P[vi] * A[vi, vk]


@T.prim_func(s_tir=True)
def long_row_product_fp16(A: T.Buffer((5, 3001), "float16"), P: T.Buffer((5,), "float16")):
    for i, k in T.grid(5, 3001):
        with T.sblock("product"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                P[vi] = T.float16(1)
            P[vi] = P[vi] * (T.float16(1) + A[vi, vk] * T.float16(0.001))


@T.prim_func(s_tir=True)
def product_over_two_axes(a: T.handle, p: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 9, 13), "float32")
    P = T.match_buffer(p, (n,), "float32")
    for i, j, k in T.grid(n, 9, 13):
        with T.sblock("product"):
            vi, vj, vk = T.axis.remap("SRR", [i, j, k])
            with T.init():
                P[vi] = T.float32(1)
            P[vi] = (T.float32(1) + T.sin(A[vi, vj, vk]) * T.float32(0.125)) * P[vi]


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("func, sizes", [(row_product, None), (long_row_product_fp16, None),
                                         (product_over_two_axes, {"n": 7})])
def test_a_product_reduction_compiles_and_matches_tvm(func, sizes):
    kernel = compile_and_check(func, sizes=sizes)
    assert "tl.reduce(" in kernel.source and "_tir_multiply" in kernel.source


@pytest.mark.interpreter
def test_a_product_is_pinned_under_deterministic():
    # a float product depends on the order of its fold, like a sum: its tiles are pinned
    kernel = compile_and_check(row_product, aot=False, deterministic=True)
    assert "reduction" in {why for _, _, why in kernel.program.kernels[0].pins}


@pytest.mark.interpreter
def test_the_tail_lanes_of_a_product_are_ones():
    # terms near 1 (random data's product of 1037 terms underflows to 0 either way): a tail lane
    # filled with a sum's 0 would zero every row
    kernel = compile(direct_product, verify=False)
    a = 1 + 0.01 * torch.randn(11, 1037, generator=torch.Generator().manual_seed(0))
    out = torch.empty(11)
    kernel(a, out, interpret=True)
    torch.testing.assert_close(out.double(), torch.prod(a.double(), dim=1), rtol=1e-4, atol=0)
