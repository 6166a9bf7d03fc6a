"""tir_passes: S-TIR -> S-TIR passes with dumps, diffs and verification after every pass.

Layout (each layer imports only the ones above it; tests/test_layers.py enforces it):
`errors.py`; `infra/` (loading, dumps, pass helpers); `contracts/` (typed decision records);
`analyses/` (questions about the IR); `passes/` and `checks/`; `pipeline.py` (order and driver).

Names are resolved on first use, so importing a TVM-free module such as
`tir_passes.contracts.gpu_specs` (the hardware model, the tuner) does not import TVM.
"""

from importlib import import_module

_EXPORTS = {
    "FrontendError": "tir_passes.errors",
    "LaunchError": "tir_passes.errors",
    "NotDifferentiableError": "tir_passes.errors",
    "PassError": "tir_passes.errors",
    "TirTritonError": "tir_passes.errors",
    "UnsupportedConstructError": "tir_passes.errors",
    "VerificationError": "tir_passes.errors",
    "CHECKS": "tir_passes.pipeline",
    "default_pipeline": "tir_passes.pipeline",
    "pass_names": "tir_passes.pipeline",
    "run_pipeline": "tir_passes.pipeline",
    "differentiate": "tir_passes.passes.autodiff",
    "training_forward": "tir_passes.passes.autodiff",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tir_passes' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
