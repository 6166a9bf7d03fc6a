"""run()'s host time per call of generated modules, the launches replayed against the full path, on
the CPU with every kernel a stub (nothing launched, nothing interpreted): what launch_replay.py saves
a repeated call, modules with scratch buffers included (docs/verification.md, "The launches are
remembered").

    python benchmarks/replay_host.py MODULE.py [MODULE.py ...] [NAME=SIZE ...]   # prints JSON

Any generated modules; NAME=SIZE gives a symbolic size of their parameters (a module whose shapes
name a size not given is refused with the size's name).

Per module: "replayed", a positional call whose key an earlier call recorded; "full path", the same
call by keyword (keyword calls are never replayed: the argument checks, _prepare's scratch
allocations and every launcher's Python work); µs a call over 2000 calls after 100 warm-up ones, on
this machine's CPU (compare the two numbers of one run, not numbers across machines).
"""

import json
import os
import sys

from probe_common import host_us, load_module, stub_kernels

CALLS = 2000


def _arguments(module, sizes: dict[str, int]):
    """A value per parameter: zeros of its shape (derived entries through the module's shape_value), a
    number for a scalar (1, or 1.0 for a float dtype)."""
    import torch

    def shape(entries):
        try:
            return [module.shape_value(entry, sizes) for entry in entries]
        except KeyError as missing:
            sys.exit(f"{module.__file__}: its shapes name the size {missing}: give it as NAME=SIZE")

    return [(1.0 if "float" in dtype else 1) if kind == "scalar" else torch.zeros(shape(dims), dtype=getattr(torch, dtype))
            for _, kind, dtype, dims, _, _ in module.PARAMS]


def host_times(path: str, calls: int = CALLS, sizes: dict[str, int] | None = None) -> dict:
    module = load_module(path, "replay_host_" + os.path.basename(path)[:-3])
    stub_kernels(module)
    args = _arguments(module, sizes or {})
    by_name = {param[0]: value for param, value in zip(module.PARAMS, args)}
    module.run(*args)   # recorded: the next positional calls replay it
    recorded = [value for value in module._REPLAYS.values() if value is not module._NOT_REPLAYABLE]
    return {"module": os.path.basename(path), "kernels": len(module.LAUNCHERS), "replayable": bool(recorded),
            "scratch": sum(1 for name in module._prepare(args, {})[0] if name not in by_name),
            "replayed_us": host_us(lambda: module.run(*args), calls),
            "full_path_us": host_us(lambda: module.run(**by_name), calls)}


if __name__ == "__main__":
    paths = [word for word in sys.argv[1:] if "=" not in word]
    given = dict(word.split("=", 1) for word in sys.argv[1:] if "=" in word)
    if not paths:
        sys.exit(__doc__)
    print(json.dumps([host_times(path, sizes={name: int(size) for name, size in given.items()}) for path in paths],
                     indent=1))
