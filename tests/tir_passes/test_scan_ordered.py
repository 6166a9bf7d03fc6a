"""A row-wise cumulative sum written with a scan-ordered block iterator (`T.axis.scan`) compiles
and matches TVM (Tiling failed with TVM's raw ScheduleError): the frontend reads ordered
iterators as data-parallel ones, and the dependence analysis keeps the scan in order."""

from tvm import tirx
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.infra.frontend import as_module


@T.prim_func(s_tir=True)
def scan_ordered_cumsum(X: T.Buffer((7, 45), "float32"), Y: T.Buffer((7, 45), "float32")):
    for i, j in T.grid(7, 45):
        with T.sblock("Y"):
            vi = T.axis.spatial(7, i)
            vj = T.axis.scan(45, j)
            Y[vi, vj] = T.if_then_else(vj == 0, X[vi, vj], Y[vi, vj - 1] + X[vi, vj])


def test_a_scan_ordered_cumsum_compiles_and_matches():
    [iv_i, iv_j] = as_module(scan_ordered_cumsum)["main"].body.block.body.body.body.block.iter_vars
    assert iv_j.iter_type == tirx.IterVar.DataPar
    kernel = compile_and_check(scan_ordered_cumsum, aot=False)
    assert any("cumsum" in line for line in kernel.source.splitlines())
