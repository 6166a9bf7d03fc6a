"""The module cache and launch-time sizes cannot lie: a module file is written atomically and read
back before it is imported (a half-written or foreign file at its path is replaced), a PrimFunc's
name becomes a file name only through loader.file_stem, a size bound from a tensor's dimension is
range-checked against its dtype in the kernels, and np.bool_ is a bool."""

import os

import numpy as np
import pytest
import torch
from tvm.script import tirx as T

from softmax import make_softmax
from tir_passes.errors import LaunchError
from triton_codegen import compile, loader


@T.prim_func(s_tir=True)
def total(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    C = T.match_buffer(c, (1,), "float32")
    for i in range(n):
        with T.sblock("sum"):
            vi = T.axis.reduce(n, i)
            with T.init():
                C[0] = T.float32(0)
            C[0] = C[0] + A[vi]


@T.prim_func(s_tir=True)
def gated(A: T.Buffer((7,), "float32"), C: T.Buffer((7,), "float32"), flag: T.bool):
    for i in range(7):
        with T.sblock("gate"):
            vi = T.axis.spatial(7, i)
            C[vi] = T.if_then_else(flag, A[vi], T.float32(0))


def test_a_foreign_or_half_written_module_file_is_replaced(tmp_path):
    kernel = compile(make_softmax(4, 8), verify=False)
    path = loader.module_path(kernel.source, kernel.name, str(tmp_path))
    for planted in ("def run(*args):\n    raise SystemExit('not the kernel')\n", kernel.source[:200]):
        with open(path, "w") as handle:
            handle.write(planted)
        assert loader.module_path(kernel.source, kernel.name, str(tmp_path)) == path
        assert open(path).read() == kernel.source
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]   # no temporary file left


def test_two_saved_modules_of_one_file_name_import_as_two(tmp_path):
    """`first/softmax.py` and `second/softmax.py` hold kernels for different shapes; the second
    import must not hand back the first module (CI ran a 32-column module on 13 columns)."""
    rows = []
    for folder, columns in (("first", 8), ("second", 13)):
        kernel = compile(make_softmax(4, columns), verify=False)
        saved = kernel.save(str(tmp_path / folder) + os.sep)
        module = loader.import_module(saved, interpret=True)
        a, out = torch.randn(4, columns), torch.empty(4, columns)
        module.run(a, out)
        assert torch.allclose(out, a.softmax(-1), atol=1e-6)
        rows.append(module)
    assert rows[0] is not rows[1] and os.path.basename(rows[0].__file__) == os.path.basename(rows[1].__file__)


@pytest.mark.parametrize("symbol, stem", [("../..$TMPDIR/x", "_TMPDIR_x"), ("sub/dir", "sub_dir")])
def test_a_name_becomes_a_file_name_only_through_the_sanitizer(tmp_path, symbol, stem):
    kernel = compile(make_softmax(4, 8).with_attr("global_symbol", symbol), verify=False)
    saved = kernel.save(str(tmp_path) + os.sep)
    assert os.path.dirname(saved) == str(tmp_path) and os.path.basename(saved) == f"{stem}.py"
    a, out = torch.randn(4, 8), torch.empty(4, 8)
    kernel(a, out)
    assert torch.allclose(out, a.softmax(-1), atol=1e-6)
    assert loader.file_stem("..") == "kernel" and loader.file_stem("a.b/c") == "a_b_c"


def test_a_dimension_beyond_its_size_dtype_is_refused_at_launch():
    kernel = compile(total, verify=False)
    assert "SIZE_DTYPES = {'n': 'int32'}" in kernel.source
    with pytest.raises(LaunchError, match=r"shape variable n \(int32\) is 4294967303, outside the range of int32"):
        kernel(torch.zeros(1).expand(2**32 + 7), torch.empty(1))
    a, c = torch.randn(37), torch.empty(1)
    kernel(a, c)
    assert torch.allclose(c, a.sum(), atol=1e-5)


def test_numpy_bool_is_a_bool():
    kernel = compile(gated, verify=False)
    a, c = torch.randn(7), torch.empty(7)
    kernel(a, c, np.bool_(True))
    assert torch.equal(c, a)
    kernel(a, c, np.bool_(False))
    assert torch.equal(c, torch.zeros(7))
