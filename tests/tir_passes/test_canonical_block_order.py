"""CanonicalBlockOrder (tir_passes/passes/canonical_block_order.py): independent nests in the data
flow's order, whatever order they were written in; dependent nests stay in order."""

import tvm
import tvm_ffi
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.passes.canonical_block_order import CanonicalBlockOrder


def test_independent_nests_follow_the_outputs_in_the_signature():
    """Y1 is written first but is the later parameter: Y0's nest comes first."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y0: T.Buffer((8,), "float32"), Y1: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("one"):
                    vi = T.axis.remap("S", [i])
                    Y1[vi] = A[vi] + T.float32(1)
            for i in range(8):
                with T.sblock("zero"):
                    vi = T.axis.remap("S", [i])
                    Y0[vi] = A[vi] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y0: T.Buffer((8,), "float32"), Y1: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("zero"):
                    vi = T.axis.remap("S", [i])
                    Y0[vi] = A[vi] * T.float32(2)
            for i in range(8):
                with T.sblock("one"):
                    vi = T.axis.remap("S", [i])
                    Y1[vi] = A[vi] + T.float32(1)

    assert_rewrites(CanonicalBlockOrder(), Before, Expected)


def test_a_producer_is_placed_with_the_output_it_feeds():
    """T feeds Y0 (the first output): T's nest, then Y0's, then the unrelated Y1's, which was written
    between them."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y0: T.Buffer((8,), "float32"), Y1: T.Buffer((8,), "float32")):
            tmp = T.sblock_alloc_buffer((8,), "float32")
            for i in range(8):
                with T.sblock("tmp"):
                    vi = T.axis.remap("S", [i])
                    tmp[vi] = T.exp(A[vi])
            for i in range(8):
                with T.sblock("one"):
                    vi = T.axis.remap("S", [i])
                    Y1[vi] = A[vi] + T.float32(1)
            for i in range(8):
                with T.sblock("zero"):
                    vi = T.axis.remap("S", [i])
                    Y0[vi] = tmp[vi] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((8,), "float32"), Y0: T.Buffer((8,), "float32"), Y1: T.Buffer((8,), "float32")):
            tmp = T.sblock_alloc_buffer((8,), "float32")
            for i in range(8):
                with T.sblock("tmp"):
                    vi = T.axis.remap("S", [i])
                    tmp[vi] = T.exp(A[vi])
            for i in range(8):
                with T.sblock("zero"):
                    vi = T.axis.remap("S", [i])
                    Y0[vi] = tmp[vi] * T.float32(2)
            for i in range(8):
                with T.sblock("one"):
                    vi = T.axis.remap("S", [i])
                    Y1[vi] = A[vi] + T.float32(1)

    assert_rewrites(CanonicalBlockOrder(), Before, Expected)


def test_dependent_nests_are_left_in_order():
    """Y1's nest reads Y0, which the later nest overwrites (a write after a read): the later
    parameter's nest stays first."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(Y0: T.Buffer((8,), "float32"), Y1: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("one"):
                    vi = T.axis.remap("S", [i])
                    Y1[vi] = Y0[vi] + T.float32(1)
            for i in range(8):
                with T.sblock("zero"):
                    vi = T.axis.remap("S", [i])
                    Y0[vi] = T.float32(2)

    assert_rewrites(CanonicalBlockOrder(), Before, Before)


def _two_producers(exp_first: bool, names: tuple[str, str]):
    """Two intermediates computed from the same input, read by one output: they differ only in
    what they compute, so the order comes from the structural hash, never from the names."""
    first, second = names

    @T.prim_func(s_tir=True)
    def exp_then_scale(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
        p = T.sblock_alloc_buffer((8,), "float32")
        q = T.sblock_alloc_buffer((8,), "float32")
        for i in range(8):
            with T.sblock(first):
                vi = T.axis.remap("S", [i])
                p[vi] = T.exp(A[vi])
        for i in range(8):
            with T.sblock(second):
                vi = T.axis.remap("S", [i])
                q[vi] = A[vi] * T.float32(3)
        for i in range(8):
            with T.sblock("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = p[vi] + q[vi]

    @T.prim_func(s_tir=True)
    def scale_then_exp(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
        p = T.sblock_alloc_buffer((8,), "float32")
        q = T.sblock_alloc_buffer((8,), "float32")
        for i in range(8):
            with T.sblock(second):
                vi = T.axis.remap("S", [i])
                q[vi] = A[vi] * T.float32(3)
        for i in range(8):
            with T.sblock(first):
                vi = T.axis.remap("S", [i])
                p[vi] = T.exp(A[vi])
        for i in range(8):
            with T.sblock("Y"):
                vi = T.axis.remap("S", [i])
                Y[vi] = p[vi] + q[vi]

    return exp_then_scale if exp_first else scale_then_exp


def _order(func) -> list[int]:
    after = CanonicalBlockOrder()(tvm.IRModule({"main": func}))["main"]
    return [tvm_ffi.structural_hash(stmt, map_free_vars=True) for stmt in top_level_statements(after)]


def test_the_order_does_not_depend_on_the_written_order_or_the_names():
    orders = [_order(_two_producers(exp_first, names))
              for exp_first in (True, False) for names in (("a", "b"), ("zz", "aa"))]
    assert all(order == orders[0] for order in orders), orders
    assert len(set(orders[0])) == 3
