"""Every environment switch tir-triton reads, in one place (the generated module's runtime, which
must stand alone, reads TRITON_INTERPRET itself).

| variable | meaning |
| --- | --- |
| `TRITON_INTERPRET` | `1`: kernels run in Triton's interpreter on the CPU (read by Triton when a kernel is decorated) |
| `TRITON_DEFAULT_FP_FUSION` | Triton's multiply-add contraction; tir-triton defaults it to `1` |
| `TIR_TRITON_CACHE` | the tuning cache's folder (default `~/.cache/tir-triton/tuning`) |
| `CUDA_VISIBLE_DEVICES` | set per worker by the multi-GPU tuner |
| `TIR_TRITON_REFERENCE_SECONDS` | the numerics check's reference run counts as a hang after it (default 120) |

The last is read by `tir_passes/checks/sandbox.py`: the passes sit below `triton_codegen` and
cannot import this module. No other module reads `os.environ` (tests/test_layers.py checks it),
except what a saved module carries standalone: `runtime_support.py`, `torch_op_support.py` and
`launch_replay.py` (copied into every module; the last reads none) and the line of generated
kernel source `emit_kernel.py` writes.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def default_to_interpreter() -> None:
    """Without a GPU, kernels run in Triton's interpreter, which must be chosen before Triton is
    imported (ahead-of-time compiles then happen in a worker process, see aot.py). Called before
    anything of ours imports triton; imports torch only when the choice is still open."""
    if "TRITON_INTERPRET" in os.environ or "triton" in sys.modules:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


def default_fp_fusion() -> None:
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def compiled_mode_environment(**extra: str) -> dict[str, str]:
    """The environment of a worker process that imports Triton in compiled mode."""
    return {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1", **extra}


def tuning_cache_dir() -> str:
    return os.environ.get("TIR_TRITON_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tir-triton", "tuning")


def gpu_worker_environment(gpu: int) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}


@contextmanager
def triton_mode(interpret: bool):
    """TRITON_INTERPRET as `interpret` says, restored afterwards (Triton reads it when a kernel is
    decorated and, in the interpreter, again at launch)."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
