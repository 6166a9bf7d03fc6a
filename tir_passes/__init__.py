"""tir_passes: S-TIR -> S-TIR passes with dumps, diffs and verification after every pass."""

from .errors import (FrontendError, LaunchError, PassError, TirTritonError, UnsupportedConstructError,
                     VerificationError)
from .pipeline import CHECKS, default_pipeline, pass_names, run_pipeline

__all__ = [
    "CHECKS", "FrontendError", "LaunchError", "PassError", "TirTritonError", "UnsupportedConstructError",
    "VerificationError", "default_pipeline", "pass_names", "run_pipeline",
]
