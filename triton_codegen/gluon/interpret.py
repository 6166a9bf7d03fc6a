"""Run a generated Gluon module on the CPU, in Triton's interpreter, with its layouts erased.

Gluon has no interpreter: its kernels need a GPU. But a layout says only *where* a value lives
(which thread, which shared-memory address), never *what* it is, so a Gluon kernel with every
layout dropped is a Triton kernel computing the same values: `gl.arange(0, n, layout=L)` is
`tl.arange(0, n)`, a shared tile is a tensor held until it is loaded, `warpgroup_mma` and
`gl.dot_fma` are `tl.dot`. Running that in the interpreter checks what the lowering decided
(indices, masks, the order of stages, the accumulator) against TVM's llvm build on the CPU; the
layouts themselves are checked by compiling for sm_90 (aot.py) and, for correctness, on a GPU.

The module's source is loaded with its three Gluon imports replaced by this file's stand-ins;
nothing else of it changes.
"""

from __future__ import annotations

import os
import tempfile
import types

import triton
import triton.language as tl

from tir_passes.errors import LaunchError
from tir_passes.infra.dtypes import DTYPES
from triton_codegen import loader

_IMPORTS = {
    "from triton.experimental import gluon": "from triton_codegen.gluon.interpret import gluon",
    "from triton.experimental.gluon import language as gl": "from triton_codegen.gluon.interpret import gl\nimport triton.language as tl  # noqa: F401 - the interpreter patches it",  # noqa: E501
    "from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma": "from triton_codegen.gluon.interpret import fence_async_shared, warpgroup_mma",  # noqa: E501
}


class _Layout:
    """Any Gluon layout: accepted and ignored."""

    def __init__(self, *args, **kwargs):
        self.args = args

    @staticmethod
    def with_identity_for(*args, **kwargs):
        return _Layout(*args)


class _SharedTile:
    """A shared-memory tile: the value last stored, seen through a permutation of its axes."""

    def __init__(self, holder: dict | None = None, order: tuple[int, ...] | None = None):
        self.holder = holder if holder is not None else {}
        self.order = order

    def store(self, value):
        if self.order is not None:
            inverse = [self.order.index(axis) for axis in range(len(self.order))]
            value = tl.permute(value, inverse)
        self.holder["value"] = value

    def load(self, layout=None):
        value = self.holder["value"]
        return tl.permute(value, list(self.order)) if self.order is not None else value

    def permute(self, order):
        return _SharedTile(self.holder, tuple(order))


def _allocate_shared_memory(dtype, shape, layout, value=None):
    tile = _SharedTile()
    if value is not None:
        tile.store(value)
    return tile


def _dot(a, b, acc):
    return tl.dot(a, b, acc, input_precision="ieee")


gluon = types.SimpleNamespace(jit=triton.jit)
gl = types.SimpleNamespace(
    constexpr=tl.constexpr,
    program_id=lambda axis: tl.program_id(axis),
    arange=lambda start, end, layout=None: tl.arange(start, end),
    zeros=lambda shape, dtype, layout=None: tl.zeros(shape, dtype),
    full=lambda shape, value, dtype, layout=None: tl.full(shape, value, dtype),
    load=lambda pointer, mask=None, other=None: tl.load(pointer, mask=mask, other=other),
    store=lambda pointer, value, mask=None: tl.store(pointer, value, mask=mask),
    where=lambda cond, a, b: tl.where(cond, a, b),
    minimum=lambda a, b: tl.minimum(a, b),
    maximum=lambda a, b: tl.maximum(a, b),
    exp=lambda x: tl.exp(x),
    log=lambda x: tl.log(x),
    sqrt=lambda x: tl.sqrt(x),
    rsqrt=lambda x: tl.rsqrt(x),
    abs=lambda x: tl.abs(x),
    floor=lambda x: tl.floor(x),
    ceil=lambda x: tl.ceil(x),
    sin=lambda x: tl.sin(x),
    cos=lambda x: tl.cos(x),
    exp2=lambda x: tl.exp2(x),
    log2=lambda x: tl.log2(x),
    erf=lambda x: tl.erf(x),
    allocate_shared_memory=_allocate_shared_memory,
    dot_fma=_dot,
    **{
        name: _Layout
        for name in (
            "BlockedLayout",
            "SliceLayout",
            "DistributedLinearLayout",
            "DotOperandLayout",
            "NVMMADistributedLayout",
            "PaddedSharedLayout",
            "SwizzledSharedLayout",
            "NVMMASharedLayout",
        )
    },
    **{dtype.language: getattr(tl, dtype.language) for dtype in DTYPES.values()},
)


def fence_async_shared():
    """Orders shared-memory writes before the tensor cores read them: nothing to do here."""


def warpgroup_mma(a, b, acc):
    return _dot(a.load(), b.load(), acc)


def erased_source(source: str) -> str:
    for gluon_import, stand_in in _IMPORTS.items():
        source = source.replace(gluon_import, stand_in)
    return source


def erased_module(source: str, name: str):
    """The module with layouts erased, imported in interpreter mode."""
    path = loader.module_path(
        erased_source(source), f"{name}_erased", os.path.join(tempfile.gettempdir(), "tir-triton-gluon-erased")
    )
    return loader.import_module(path, interpret=True)


def run_erased(source: str, name: str, *args, **kwargs) -> None:
    """`run(...)` of the module, layouts erased, on CPU tensors in Triton's interpreter."""
    module = erased_module(source, name)
    try:
        tensors, _ = module.check_arguments(module.PARAMS, args, kwargs)
    except module.LaunchError as err:
        raise LaunchError(str(err)) from None
    with loader.triton_mode(True):
        for _, launch in module.LAUNCHERS:
            launch(tensors)
