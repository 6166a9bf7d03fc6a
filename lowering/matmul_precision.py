"""`float32_matmul_precision`: how a tl.dot with fp32 operands computes, in PyTorch's names.

    "highest"  IEEE fp32 products (CUDA cores): what TVM's llvm build computes
    "high"     TF32 tensor cores: operands rounded to 10 mantissa bits, fp32 accumulation
    "medium"   bf16 tensor cores: operands rounded to bfloat16 (8 bits), fp32 accumulation

The same meanings as `torch.set_float32_matmul_precision`; `compile()` defaults to
`torch.get_float32_matmul_precision()` at compile time, and the choice is the program's
(`TileProgram.float32_matmul_precision`, in the manifest). It applies to every contraction whose
operands are fp32; 16-bit operands are multiplied exactly whatever the setting.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tir_passes.errors import FrontendError

from .tile_ir import Const, Dot, Scalar, TileKernel, TileProgram

HIGHEST, HIGH, MEDIUM = "highest", "high", "medium"
PRECISIONS = (HIGHEST, HIGH, MEDIUM)
# the tl.dot precision (tile_ir.Dot.precision) of fp32 operands under each setting
DOT_PRECISION = {HIGHEST: "ieee", HIGH: "tf32", MEDIUM: "bf16"}
# the output dtype whose tolerance an fp32 result of such a dot is checked at: tf32 keeps fp16's
# 10 mantissa bits, bf16 its own 8 (docs/verification.md)
CHECKED_AS = {"tf32": "float16", "bf16": "bfloat16"}


def resolve_precision(precision: str | None, allow_tf32: bool | None = None) -> str:
    """The setting a compile uses: the one asked for, else `allow_tf32=True`'s "high" (its old
    spelling), else PyTorch's current one."""
    if precision is not None and precision not in PRECISIONS:
        raise FrontendError(f"float32_matmul_precision={precision!r}: choose one of {', '.join(PRECISIONS)} "
                            "(PyTorch's names: highest = IEEE fp32, high = TF32, medium = bf16 operands)")
    if allow_tf32 is not None:
        implied = HIGH if allow_tf32 else HIGHEST
        if precision is not None and precision != implied:
            raise FrontendError(f"allow_tf32={allow_tf32} contradicts float32_matmul_precision={precision!r}: "
                                f"allow_tf32 is an old spelling of float32_matmul_precision={implied!r}; give one")
        return implied
    if precision is not None:
        return precision
    import torch

    current = torch.get_float32_matmul_precision()
    return current if current in PRECISIONS else HIGHEST


def dot_precision(setting: str, operand_dtype: str) -> str:
    """The precision of one tl.dot: the setting's for fp32 operands, exact ("ieee") otherwise."""
    return DOT_PRECISION[setting] if operand_dtype == "float32" else "ieee"


@dataclass(frozen=True)
class DotTolerance:
    """How the kernel check compares the fp32 outputs of a program with reduced-precision dots:
    at `dtype`'s tolerance (the operands' mantissa), times `scale` = sqrt(K) of the longest such
    reduction (rounding errors of K products add up like a random walk, and cancel in the sum
    that TVM's IEEE build compares against)."""

    dtype: str
    scale: float

    def checked_as(self) -> dict[str, str]:
        return {"float32": self.dtype}


def _reduced_dots(node, found: list[tuple[Dot, TileKernel]], kernel=None) -> None:
    if isinstance(node, TileKernel):
        kernel = node
    if isinstance(node, Dot) and node.precision in CHECKED_AS:
        found.append((node, kernel))
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for item in dataclasses.fields(node):
            _reduced_dots(getattr(node, item.name), found, kernel)
    elif isinstance(node, (tuple, list)):
        for item in node:
            _reduced_dots(item, found, kernel)


def _extent(kernel: TileKernel, axis: str, sizes: dict[str, object]) -> int:
    dim = next(d for d in kernel.dims if d.name == axis)
    if isinstance(dim.extent, Const):
        return int(dim.extent.value)
    if isinstance(dim.extent, Scalar) and isinstance(sizes.get(dim.extent.name), int):
        return int(sizes[dim.extent.name])
    return dim.default   # an extent the check cannot see: one tile's worth


def dot_tolerance(program: TileProgram, sizes: dict[str, object] | None = None) -> DotTolerance | None:
    """None when every tl.dot computes exactly as TVM's build (IEEE fp32 or 16-bit operands)."""
    found: list[tuple[Dot, TileKernel]] = []
    _reduced_dots(program.kernels, found)
    if not found:
        return None
    coarsest = "bf16" if any(dot.precision == "bf16" for dot, _ in found) else "tf32"
    longest = max(_extent(kernel, dot.k, sizes or {}) for dot, kernel in found)
    return DotTolerance(CHECKED_AS[coarsest], math.sqrt(max(1, longest)))
