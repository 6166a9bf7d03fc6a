"""Small questions about TIR expressions the rewriting passes ask (FactorOutOfSums): which loads of a
buffer an expression makes, the factors of a product, the variables it computes with."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.analyses.nest import vars_of


def is_float(expr) -> bool:
    return "float" in str(expr.ty.dtype)


def loads_of(expr, buffer) -> list[tvm.ir.TensorLoad]:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad,
                                   lambda load: found.append(load) if load.source.same_as(buffer) else None))
    return found


def writes_buffer(stmt, buffer) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, lambda s: found.append(s) if s.buffer.same_as(buffer) else None))
    return bool(found)


def reads_buffer(stmt, buffer) -> bool:
    return bool(loads_of(stmt, buffer))


def factors_of(expr) -> list:
    if isinstance(expr, tirx.Mul):
        return factors_of(expr.a) + factors_of(expr.b)
    return [expr]


def product_of(factors: list):
    result = factors[0]
    for factor in factors[1:]:
        result = tirx.Mul(result, factor)
    return result


def used_vars(expr) -> list:
    """The variables `expr` computes with: its loads' indices' and its own (not a buffer's data or shape)."""
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.extend(v for i in load.indices
                                                                              for v in used_vars(i))))
    bare = tvm_ffi.structural_map(expr, (tvm.ir.TensorLoad, lambda load: tirx.const(0, load.ty.dtype)))
    return found + vars_of(bare)


def sources_of(expr) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(load.source)))
    return found


def is_one(expr) -> bool:
    return isinstance(expr, tirx.FloatImm) and expr.value == 1.0
