"""The tuner's search space of one kernel, derived from its tile summary and the hardware model.

Legal configs first, by the same rules as the module's own config list (configs.py): block
sizes are powers of two; an axis whose tail mask was dropped only gets sizes that divide its
extent; tl.dot axes keep tl.dot's minimum and whole-extent tiles their size (the summary's `min`);
no tile exceeds the extent's next power of two. Within that, a window around the tiling pass's
choice: block sizes from a quarter to four times the default, warps 4 and 8 for tl.dot kernels
(2 to 16 otherwise), pipeline stages only where the kernel has a loop (2 to 5 with a tl.dot,
1 to 3 without), GROUP_M 4, 8 or 16 where programs are grouped, PROGRAMS_PER_SM 0, 1 or 2 where
the kernel is a persistent tile loop (0: a program a tile).

A deterministic kernel's summary lists what it pins (`pinned`: BLOCK_* and num_warps, with their
values, tile_contract.Pin): those keep their value in every config, so tuning never changes an
element's reduction order (docs/determinism.md); and what it floors (`at_least`: a tl.dot's BLOCK_M
and num_warps, tile_contract.Floor): no config goes under (the MMA instruction family).

Then the model prunes: configs it says cannot run (shared memory over the limit, registers
spilling, no program resident) go, the rest are ranked by predicted time, and the space keeps
those within SLOWER_THAN_BEST of the best prediction, at most `max_space` of them. The default
config is always in the space, first: it is what the module runs today.

Imports nothing that needs TVM: it runs where the tuner runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tir_passes.contracts.gpu_specs import GpuSpec

from .hardware_model import (Prediction, UnknownValue, estimate_resources, evaluate, predict, programs_per_sm,
                             runnable)

MAX_SPACE = 64
SLOWER_THAN_BEST = 3.0
BLOCK_WINDOW = 4          # block sizes from default / 4 to default × 4
DOT_WARPS = (4, 8)
OTHER_WARPS = (2, 4, 8, 16)
DOT_STAGES = (2, 3, 4, 5)
LOOP_STAGES = (1, 2, 3)
GROUPS = (4, 8, 16)
PROGRAMS_PER_SM = (0, 1, 2)   # a persistent kernel's grid: a program a tile, or 1 or 2 an SM walking the tiles


def block_size_allowed(size: int, *, default: int, extent: int | None, even: bool, minimum: int) -> bool:
    """May a tile axis take this block size, keeping what the kernel's masks and tl.dot assume?"""
    if size < max(1, minimum):
        return False
    if extent is not None:
        if size > max(default, 1 << max(0, (extent - 1).bit_length())):
            return False
        if even and extent % size:
            return False
    return True


@dataclass(frozen=True)
class KernelSpace:
    """One kernel's candidates, default first, then by predicted time (None: no model)."""

    name: str
    configs: tuple[dict, ...]
    predictions: tuple[Prediction | None, ...]
    legal: int          # configs the rules allow in the window
    runnable: int       # of those, the ones the model says can run

    @property
    def default(self) -> dict:
        return self.configs[0]


def kernel_space(name: str, kernel: dict | None, default: dict, spec: GpuSpec | None, sizes: dict[str, int],
                 max_space: int = MAX_SPACE, fallback: tuple[dict, ...] = ()) -> KernelSpace:
    """The space of one kernel. Without a summary or a GPU spec (a module from before the model,
    an unknown GPU), the module's own config list (`fallback`) is the space, unranked."""
    if kernel is None or spec is None:
        configs = _unique((default,) + tuple(fallback))[:max_space]
        return KernelSpace(name, configs, (None,) * len(configs), len(configs), len(configs))
    legal = legal_configs(kernel, default, sizes)
    explicit = _explicit(kernel, default)
    scored = []
    for config in legal:
        resources = estimate_resources(kernel, config)
        if runnable(spec, resources, config["num_warps"]) is None:
            scored.append((predict(kernel, config, spec, sizes, resources), config))
    scored.sort(key=lambda item: (item[0].seconds, _distance(item[1], explicit), _order_key(item[1])))
    best = scored[0][0].seconds if scored else 0.0
    kept = [(p, c) for p, c in scored if p.seconds <= SLOWER_THAN_BEST * best and c != explicit][:max_space - 1]
    configs = (default,) + tuple(c for _, c in kept)
    predictions = (predict(kernel, default, spec, sizes),) + tuple(p for p, _ in kept)
    return KernelSpace(name, configs, predictions, len(legal), len(scored))


def config_problem(kernel: dict | None, default: dict, config: dict, sizes: dict[str, int],
                   listed: tuple[dict, ...] = ()) -> str:
    """Why `config` (a cached choice) is not one this kernel may run, or "": the same settings as
    its default, block sizes that are powers of two the rules allow (whole tiles keep their size,
    masks dropped for divisible extents stay right), warps a power of two. Without a summary, only
    the module's own configs (`listed`) are."""
    launch = {"GROUP_M", "PROGRAMS_PER_SM"}   # settings a config may leave to the module's default
    if set(config) - launch != set(default) - launch:
        return f"its settings {sorted(config)} are not the kernel's {sorted(default)}"
    programs = config.get("PROGRAMS_PER_SM", 0)
    if "PROGRAMS_PER_SM" in config and (kernel is None or "persistent" not in kernel):
        return "PROGRAMS_PER_SM is a setting of persistent kernels only, and this one is not"
    if isinstance(programs, bool) or not isinstance(programs, int) or programs < 0:
        return f"PROGRAMS_PER_SM={programs!r} is not a non-negative integer"
    if kernel is None:
        return "" if config in listed else "it is not one of the module's configs (the module has no tile summary)"
    for block in _blocks(kernel):
        size = config[block]
        if size < 1 or size & (size - 1):
            return f"{block}={size} is not a power of two"
        for dim in (d for d in kernel["dims"] if d["block"] == block):
            if not block_size_allowed(size, default=dim["default"], extent=_extent(dim, sizes), even=dim["even"],
                                      minimum=dim["min"]):
                return (f"{block}={size} breaks what the kernel assumes of that axis (extent "
                        f"{_extent(dim, sizes)}, at least {dim['min']}, divides it: {dim['even']})")
    from .runtime_support import config_assumption_problem   # what a module's launch checks too

    problem = config_assumption_problem(kernel, config, kernel.get("pinned"))
    if problem:
        return problem
    lowered = sorted(k for k, v in kernel.get("at_least", {}).items() if config.get(k, v) < v)
    if lowered:   # a deterministic GEMM's floors: the MMA instruction family
        return f"it lowers {', '.join(lowered)} under the deterministic kernel's floor (docs/determinism.md)"
    if config.get("GROUP_M", 1) < 1:
        return "GROUP_M must be positive"
    return ""


def legal_configs(kernel: dict, default: dict, sizes: dict[str, int]) -> list[dict]:
    """Every config in the window the rules allow, in a fixed order."""
    pinned = kernel.get("pinned", {})
    axes = [(block, (pinned[block],) if block in pinned else _block_choices(kernel, block, default[block], sizes))
            for block in _blocks(kernel)]
    has_dot = bool(kernel["dots"])
    warps = ((pinned["num_warps"],) if "num_warps" in pinned else
             tuple(w for w in _with(DOT_WARPS if has_dot else OTHER_WARPS, default["num_warps"])
                   if w >= kernel.get("at_least", {}).get("num_warps", 1)))
    stages = _with(DOT_STAGES if has_dot else LOOP_STAGES, default["num_stages"]) if kernel["loops"] else \
        (default["num_stages"],)
    groups = _with(GROUPS, default.get("GROUP_M", kernel["group_m"])) if kernel["group_m"] else (None,)
    persistent = _with(PROGRAMS_PER_SM, programs_per_sm(kernel, default)) if "persistent" in kernel else (None,)
    configs = []
    for blocks in itertools.product(*(choices for _, choices in axes)):
        for warp, stage, group, programs in itertools.product(warps, stages, groups, persistent):
            config = dict(zip((block for block, _ in axes), blocks))
            config.update(num_warps=warp, num_stages=stage)
            if group is not None:
                config["GROUP_M"] = group
            if programs is not None:
                config["PROGRAMS_PER_SM"] = programs
            configs.append(config)
    return configs


def keeps_pins(kernel: dict | None, config: dict) -> bool:
    """A config keeps every setting the kernel's summary pins, and none under its floor (deterministic modules)."""
    pinned, floors = (kernel or {}).get("pinned", {}), (kernel or {}).get("at_least", {})
    return all(config.get(name) == value for name, value in pinned.items()) and \
        all(config.get(name, minimum) >= minimum for name, minimum in floors.items())


def _blocks(kernel: dict) -> list[str]:
    blocks: list[str] = []
    for dim in kernel["dims"]:
        if dim["block"] not in blocks:
            blocks.append(dim["block"])
    return blocks


def _block_choices(kernel: dict, block: str, default: int, sizes: dict[str, int]) -> tuple[int, ...]:
    dims = [d for d in kernel["dims"] if d["block"] == block]
    sizes_in_window = [1 << p for p in range(16) if default / BLOCK_WINDOW <= 1 << p <= default * BLOCK_WINDOW]
    allowed = [size for size in sizes_in_window
               if all(block_size_allowed(size, default=d["default"], extent=_extent(d, sizes), even=d["even"],
                                         minimum=d["min"]) for d in dims)]
    return tuple(allowed) if default in allowed else tuple(sorted(allowed + [default]))


def _extent(dim: dict, sizes: dict[str, int]) -> int | None:
    try:
        return evaluate(dim["extent"], sizes)
    except UnknownValue:
        return None


def _with(values: tuple[int, ...], default: int) -> tuple[int, ...]:
    return values if default in values else tuple(sorted(values + (default,)))


def _explicit(kernel: dict, default: dict) -> dict:
    """The default with GROUP_M and PROGRAMS_PER_SM spelled out (a module's own configs leave them
    to the launcher)."""
    explicit = {**default, "GROUP_M": default.get("GROUP_M", kernel["group_m"])} if kernel["group_m"] else dict(default)
    if "persistent" in kernel:
        explicit["PROGRAMS_PER_SM"] = programs_per_sm(kernel, default)
    return explicit


def _distance(config: dict, default: dict) -> int:
    """How many settings differ from the default: ties in predicted time go to the nearer config."""
    return sum(config.get(key) != default.get(key) for key in config)


def _order_key(config: dict) -> tuple:
    return tuple(sorted(config.items()))


def _unique(configs: tuple[dict, ...]) -> tuple[dict, ...]:
    unique: list[dict] = []
    for config in configs:
        if config not in unique:
            unique.append(config)
    return tuple(unique)
