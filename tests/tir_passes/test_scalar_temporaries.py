"""ScalarTemporaries: an arg-max whose body keeps its comparison in a local buffer (the block's own
`T.sblock_alloc_buffer`, or a top-level `T.alloc_buffer` only that block touches) is the arg-max
written with a let, and compiles like it; a buffer whose value crosses iterations stays a buffer.
`T.alloc_buffer` inside a block, which TVM's parser refuses, gets an error at its line."""

import textwrap

import pytest
import tvm
from tvm.script import tirx as T

from tir_passes import FrontendError
from tir_passes.infra.frontend import load_target
from tir_passes.passes.hoist_allocations import hoist_allocations
from tir_passes.passes.scalar_temporaries import scalar_temporaries
from triton_codegen import compile


@T.prim_func(s_tir=True)
def argmax_let(A: T.Buffer((7, 33), "float32"), idx: T.Buffer((7,), "int32"), val: T.Buffer((7,), "float32")):
    for i, j in T.grid(7, 33):
        with T.sblock("am"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float32")
            better = T.bind(val[vi] < A[vi, vj])
            idx[vi] = T.Select(better, vj, idx[vi])
            val[vi] = T.Select(better, A[vi, vj], val[vi])


@T.prim_func(s_tir=True)
def argmax_block_local(A: T.Buffer((7, 33), "float32"), idx: T.Buffer((7,), "int32"),
                       val: T.Buffer((7,), "float32")):
    for i, j in T.grid(7, 33):
        with T.sblock("am"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float32")
            better = T.sblock_alloc_buffer((1,), "bool", scope="local")
            better[0] = val[vi] < A[vi, vj]
            idx[vi] = T.Select(better[0], vj, idx[vi])
            val[vi] = T.Select(better[0], A[vi, vj], val[vi])


@T.prim_func(s_tir=True)
def argmin_top_level(A: T.Buffer((7, 33), "float32"), idx: T.Buffer((7,), "int32"),
                     val: T.Buffer((7,), "float32")):
    worse = T.alloc_buffer((2,), "bool", scope="local")
    for i, j in T.grid(7, 33):
        with T.sblock("am"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                idx[vi] = -1
                val[vi] = T.max_value("float32")
            worse[1] = A[vi, vj] < val[vi]
            idx[vi] = T.Select(worse[1], vj, idx[vi])
            val[vi] = T.Select(worse[1], A[vi, vj], val[vi])


@T.prim_func(s_tir=True)
def carried(A: T.Buffer((7, 33), "float32"), S: T.Buffer((7,), "float32")):
    acc = T.alloc_buffer((1,), "float32")
    for i, j in T.grid(7, 33):
        with T.sblock("sum"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                S[vi] = T.float32(0)
            acc[0] = acc[0] + A[vi, vj]  # read before it is stored: the value crosses iterations
            S[vi] = S[vi] + A[vi, vj]


def _canonical(func):
    return scalar_temporaries(hoist_allocations(func))


def test_a_local_buffer_is_the_let():
    tvm.ir.assert_structural_equal(_canonical(argmax_block_local).body, _canonical(argmax_let).body, map_free_vars=True)
    script = _canonical(argmin_top_level).script()
    assert "worse_1: T.let[T.bool] = A[vi, vj] < val[vi]" in script and "alloc_buffer" not in script


def test_a_value_that_crosses_iterations_stays_a_buffer():
    assert "acc[0] = acc[0] + A[vi, vj]" in _canonical(carried).script()


@pytest.mark.interpreter
@pytest.mark.parametrize("func", [argmax_block_local, argmin_top_level], ids=["block_local", "top_level"])
def test_an_arg_max_with_a_local_buffer_compiles(func):
    kernel = compile(func, verify=True)
    assert kernel.check_report.ok, str(kernel.check_report)


def test_alloc_buffer_inside_a_block_names_its_line(tmp_path):
    source = textwrap.dedent('''
        from tvm.script import tirx as T


        @T.prim_func(s_tir=True)
        def f(A: T.Buffer((7, 33), "float32"), val: T.Buffer((7,), "float32")):
            for i, j in T.grid(7, 33):
                with T.sblock("am"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        val[vi] = T.min_value("float32")
                    better = T.alloc_buffer((1,), "bool", scope="local")
                    better[0] = val[vi] < A[vi, vj]
                    val[vi] = T.Select(better[0], A[vi, vj], val[vi])
        ''').lstrip()
    path = tmp_path / "user.py"
    path.write_text(source)
    with pytest.raises(FrontendError) as caught:
        load_target(str(path))
    line = next(n for n, text in enumerate(source.splitlines(), start=1) if "T.alloc_buffer" in text)
    assert f"user.py:{line}: `better = T.alloc_buffer(...)` inside a T.sblock" in str(caught.value)
    assert "T.sblock_alloc_buffer" in str(caught.value)
