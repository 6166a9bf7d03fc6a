"""Tune a saved module on the GPU: random inputs of its declared shapes, then its own tune()."""

from __future__ import annotations

import torch

from tir_passes.errors import FrontendError

from .loader import import_module
from .runtime_support import shape_text, shape_value


def random_arguments(params, sizes: dict[str, int], device: str) -> list:
    args = []
    for name, kind, dtype, shape, _written, _narrow in params:
        if kind == "scalar":
            if name not in sizes:
                raise FrontendError(f"scalar parameter {name}: give its value with --sizes {name}=N")
            args.append(sizes[name])
            continue
        dims = [_dimension(name, dim, sizes) for dim in shape]
        torch_dtype = getattr(torch, dtype)
        tensor = torch.randn(dims, device=device).to(torch_dtype) if torch_dtype.is_floating_point else \
            torch.randint(-8, 8, dims, device=device).to(torch_dtype)
        args.append(tensor)
    return args


def _dimension(param: str, entry, sizes: dict[str, int]) -> int:
    try:
        return shape_value(entry, sizes)
    except KeyError as missing:
        raise FrontendError(f"parameter {param}: give the size {missing.args[0]} with --sizes {missing.args[0]}=N") from None
    except ZeroDivisionError:
        raise FrontendError(f"parameter {param}: its dimension {shape_text(entry)} divides by zero with these --sizes") from None


def tune_module(path: str, sizes: dict[str, int]) -> dict:
    if not torch.cuda.is_available():
        raise FrontendError("tune needs a CUDA GPU (timings in the interpreter mean nothing)")
    module = import_module(path, interpret=False)
    report = module.tune(*random_arguments(module.PARAMS, sizes, "cuda"))
    return {name: [{"config": c, "ms": t} for c, t in rows] for name, rows in report.items()}
