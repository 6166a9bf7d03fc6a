"""Tuning results on disk: one JSON file per key, in `$TIR_TRITON_CACHE` or ~/.cache/tir-triton/tuning.

The key is what makes a timing reusable: the PrimFunc's structural hash (the module header has
it), the GPU's name, the arguments' shapes, dtypes and scalar values, and Triton's version. A
file is `<module>-<sha256 of the key, 16 hex digits>.json` and holds the key in clear, the choice
and how it was reached (TuneResult.to_json()), so results made on many machines merge by copying
files into one folder (docs/tuning.md sketches a Ray campaign on that). Writes are atomic: tuners
on several GPUs may share the folder.

Imports only the standard library: it runs on a GPU machine without TVM.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from .environment import tuning_cache_dir

FORMAT = 1


def cache_dir() -> str:
    return tuning_cache_dir()


def source_hash(module) -> str:
    """The PrimFunc's structural hash from a generated module's header."""
    match = re.search(r"structural hash: (0x[0-9a-f]+)", module.__doc__ or "")
    return match.group(1) if match else "unknown"


def cache_key(module, gpu_name: str, shapes: list, triton_version: str) -> dict:
    return {"format": FORMAT, "source_hash": source_hash(module), "gpu": gpu_name, "shapes": shapes,
            "triton": triton_version}


def argument_shapes(params, args) -> list:
    """[name, dtype, shape] of each tensor argument and [name, "scalar", value] of each scalar."""
    rows = []
    for (name, kind, dtype, _shape, _written, _narrow), value in zip(params, args):
        rows.append([name, "scalar", value] if kind == "scalar" else [name, dtype, list(value.shape)])
    return rows


def cache_path(module_name: str, key: dict) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{module_name}-{digest}.json")


def load(module_name: str, key: dict) -> dict | None:
    """The stored result for this key, or None (missing, unreadable, or another key's file)."""
    path = cache_path(module_name, key)
    try:
        with open(path) as handle:
            entry = json.load(handle)
    except (OSError, ValueError):
        return None
    return entry.get("result") if entry.get("key") == key else None


def store(module_name: str, key: dict, result: dict) -> str:
    path = cache_path(module_name, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as handle:
        json.dump({"key": key, "result": result}, handle, indent=1, sort_keys=True, default=str)
        handle.write("\n")
    os.replace(temporary, path)
    return path
