"""triton_codegen: TileProgram -> standalone Triton modules, and the public `compile` API."""

import os
import sys


def _default_to_interpreter() -> None:
    """Without a GPU, kernels run in Triton's interpreter, which must be chosen before Triton is
    imported (ahead-of-time compiles then happen in a worker process, see aot.py)."""
    if "TRITON_INTERPRET" in os.environ or "triton" in sys.modules:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


_default_to_interpreter()

from .check import CheckReport, check_against_tvm  # noqa: E402
from .compile import TritonKernel, compile  # noqa: E402

__all__ = ["CheckReport", "TritonKernel", "check_against_tvm", "compile"]
