"""triton_codegen: TileProgram -> standalone Triton modules, and the public `compile` API."""

from .check import CheckReport, check_against_tvm
from .compile import TritonKernel, compile

__all__ = ["CheckReport", "TritonKernel", "check_against_tvm", "compile"]
