"""triton_codegen: TileProgram -> standalone Triton modules, the public `compile` API, the
backends (Triton; Gluon in `gluon/`), and the TVM-free runtime, hardware model and tuner.

Names are resolved on first use: `import triton_codegen.tuner` on a GPU machine without TVM
imports no TVM (tests/test_layers.py checks it), and `tir-triton --help` pays for no compiler.
"""

from importlib import import_module

from .environment import default_to_interpreter

_EXPORTS = {
    "CheckReport": "triton_codegen.check",
    "check_against_tvm": "triton_codegen.check",
    "TritonKernel": "triton_codegen.driver",
    "compile": "triton_codegen.driver",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'triton_codegen' has no attribute {name!r}")
    default_to_interpreter()
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
