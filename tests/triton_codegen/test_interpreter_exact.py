"""interpreter_exact.py: which programs Triton's interpreter reproduces bit for bit on the GPU.

The decision reads the TileProgram; its table is checked here from both sides: every tile op has
one entry, and what the table calls exact compiles for sm_90 to correctly rounded instructions
only (no `.approx`, no `div.full`, no fma), while the ops it refuses compile to the approximations
it names. The H200 run (benchmarks/interp_bits_gpu.py) checks the bits themselves.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from argmax import make_argmax
from elementwise import make_scale_shift_relu
from lowering.ops import BINARY_OPS, UNARY_OPS
from lowering.rewrites.tile_access import with_tile_accesses
from max_pool2d import make_max_pool2d
from rmsnorm import make_rmsnorm
from triton_codegen import compile
from triton_codegen.interpreter_exact import (EXACT_BINARY, EXACT_UNARY, INEXACT_BINARY, INEXACT_UNARY,
                                              interpreter_exactness)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
from interp_bits_generate import make_binary, make_unary  # noqa: E402

# what a correctly rounded elementwise program must not contain
APPROXIMATE = re.compile(r"\b(\w+\.approx\S*|div\.full\.\S+|fma\.rn\.\S+|ex2\.\S+|lg2\.\S+)")


def test_every_tile_op_has_one_entry():
    """A new op needs a decision: the table covers each op once, exact or not."""
    assert sorted(EXACT_UNARY + tuple(INEXACT_UNARY)) == sorted(UNARY_OPS)
    assert sorted(EXACT_BINARY + tuple(INEXACT_BINARY)) == sorted(BINARY_OPS)


def _decide(func, deterministic=True):
    return interpreter_exactness(compile(func, verify=False, deterministic=deterministic).program)


def test_order_free_and_correctly_rounded_programs_are_expressible():
    for func in (make_scale_shift_relu(5, 7), make_max_pool2d(1, 2, 7, 5), make_argmax(5, 7),
                 make_binary("divide", "float64"), make_binary("multiply_add", "float16")):
        decision = _decide(func)
        assert decision.exact, decision.reasons


def test_sums_approximations_bfloat16_and_contraction_are_not():
    """Each reason names the op: a sum and rsqrt (rmsnorm), fp32 division (div.full.f32), sqrt,
    bfloat16 rounding, and products without the flag (an fma may fuse them)."""
    cases = {
        "sum reduction": make_rmsnorm(7),
        "/ (float32)": make_binary("divide", "float32"),
        "sqrt (float32)": make_unary("sqrt", "float32"),
        "-> bfloat16": make_binary("multiply_add", "bfloat16"),
    }
    for expected, func in cases.items():
        decision = _decide(func)
        assert not decision.exact and any(expected in reason for reason in decision.reasons), decision.reasons
    free = _decide(make_scale_shift_relu(5, 7), deterministic=False)
    assert not free.exact and "fma" in free.reasons[0]


def _ptx(func) -> str:
    from triton_codegen.aot import compile_ahead_of_time
    from triton_codegen.configs import config_space

    kernel = compile(func, verify=False, deterministic=True)
    return "\n".join(compile_ahead_of_time(kernel.module_file(), tile_kernel, config_space(tile_kernel)[0], 90,
                                           listings=True).ptx
                     for tile_kernel in with_tile_accesses(kernel.program).kernels)


@pytest.mark.aot
def test_what_the_table_calls_exact_compiles_to_correctly_rounded_instructions():
    """The GPU side of the claim, read from sm_90 PTX: the expressible programs have no
    approximate instruction; fp32 division and sqrt, which the table refuses, do."""
    for func in (make_scale_shift_relu(5, 7), make_unary("floor", "float32"), make_binary("divide", "float64"),
                 make_binary("multiply_add", "float16"), make_max_pool2d(1, 2, 7, 5)):
        assert interpreter_exactness(compile(func, verify=False, deterministic=True).program).exact
        assert APPROXIMATE.findall(_ptx(func)) == []
    assert "div.full.f32" in _ptx(make_binary("divide", "float32"))
    assert "sqrt.approx.ftz.f32" in _ptx(make_unary("sqrt", "float32"))


def _row_max(state_first: bool, name: str):
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def row_max(A: T.Buffer((5, 37), "float32"), M: T.Buffer((5,), "float32")):
        for i, k in T.grid(5, 37):
            with T.sblock(name):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    M[vi] = T.min_value("float32")
                M[vi] = T.max(M[vi], A[vi, vk]) if state_first else T.max(A[vi, vk], M[vi])

    return row_max


def _row_sum(name: str):
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def row_sum(A: T.Buffer((5, 37), "float32"), S: T.Buffer((5,), "float32")):
        for i, k in T.grid(5, 37):
            with T.sblock(name):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = A[vi, vk] + S[vi]

    return row_sum


def test_the_decision_survives_a_rewrite_of_the_fold():
    """A row max is expressible whichever operand order and block name it is written with; a row
    sum is not, written as `x + acc`."""
    assert _decide(_row_max(True, "m")).exact and _decide(_row_max(False, "running_maximum")).exact
    decision = _decide(_row_sum("s"))
    assert not decision.exact and "sum reduction" in decision.reasons[0]
