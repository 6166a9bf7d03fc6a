"""Tune a saved module on the GPU: random inputs of its declared shapes, then its own tune()."""

from __future__ import annotations

import torch

from tir_passes.errors import FrontendError

from .loader import import_module


def random_arguments(params, sizes: dict[str, int], device: str) -> list:
    args = []
    for name, kind, dtype, shape, _written, _narrow in params:
        if kind == "scalar":
            if name not in sizes:
                raise FrontendError(f"scalar parameter {name}: give its value with --sizes {name}=N")
            args.append(sizes[name])
            continue
        dims = []
        for dim in shape:
            value = dim if isinstance(dim, int) else sizes.get(dim) if dim.isidentifier() else eval(dim, {"__builtins__": {}}, dict(sizes))
            if value is None:
                raise FrontendError(f"parameter {name}: give the size {dim} with --sizes {dim}=N")
            dims.append(value)
        torch_dtype = getattr(torch, dtype)
        tensor = torch.randn(dims, device=device).to(torch_dtype) if torch_dtype.is_floating_point else \
            torch.randint(-8, 8, dims, device=device).to(torch_dtype)
        args.append(tensor)
    return args


def tune_module(path: str, sizes: dict[str, int]) -> dict:
    if not torch.cuda.is_available():
        raise FrontendError("tune needs a CUDA GPU (timings in the interpreter mean nothing)")
    module = import_module(path, interpret=False)
    report = module.tune(*random_arguments(module.PARAMS, sizes, "cuda"))
    return {name: [{"config": c, "ms": t} for c, t in rows] for name, rows in report.items()}
