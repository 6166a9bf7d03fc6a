"""Up-front checks that a PrimFunc only uses what the Triton path can express, so the error
names the construct and its TVMScript line before any pass runs."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.errors import UnsupportedConstructError
from tir_passes.pass_util import source_line

from .exprs import SUPPORTED_DTYPES
from .param_shapes import check_param_shapes


def _buffers_in(stmt) -> list:
    found = [stmt.buffer]
    tvm_ffi.structural_walk(stmt.value, (tvm.ir.TensorLoad, lambda load: found.append(load.source)))
    return found


def check_supported(func: tirx.PrimFunc, name: str) -> None:
    """Raise UnsupportedConstructError for buffers of dtypes Triton cannot hold here, and for parameter
    shapes the launcher cannot check."""
    stores: list = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, stores.append))
    for store in stores:
        for buf in _buffers_in(store):
            dtype = str(buf.dtype)
            if dtype not in SUPPORTED_DTYPES:
                where = source_line(store) or f"PrimFunc {name}"
                raise UnsupportedConstructError(
                    f"{where}: buffer {buf.name} has dtype {dtype}, which tir-triton does not compile to Triton "
                    f"(supported: {', '.join(sorted(SUPPORTED_DTYPES))})")
    for param in func.params:
        if tirx.is_buffer_var(param) and str(param.dtype) not in SUPPORTED_DTYPES:
            raise UnsupportedConstructError(f"PrimFunc {name}, parameter {param.name}: dtype {param.dtype} is not supported")
    check_param_shapes(func, name)
