"""The config space around the tiling pass's choice: block sizes, num_warps, num_stages.

Every config keeps what the kernel's masks assume: an axis whose tail mask was dropped (its
extent is a multiple of the default block size) only gets block sizes that divide the extent;
axes of a tl.dot keep tl.dot's minimum (the backend's limit Tiling recorded: TileKernel.dot_min_block); tiles
never exceed the extent's next power of two.
A deterministic kernel's pins (tile_contract.Pin: reduction tiles, tl.dot tiles, num_warps) stay as
they are in every config, and its floors (tile_contract.Floor: a tl.dot's BLOCK_M and num_warps where
its only sums are tl.dots) are never gone under: only the other settings vary (docs/determinism.md).
"""

from __future__ import annotations

from lowering.tile_ir import Const, Dot, Loop, TileKernel
from tir_passes.contracts.tile_contract import WARPS

from .search_space import block_size_allowed

MAX_CONFIGS = 8


def _dot_axes(body) -> set[str]:
    axes: set[str] = set()

    def visit(node):
        if isinstance(node, Loop):
            for child in node.body:
                visit(child)
            return
        value = getattr(node, "value", None)
        if isinstance(value, Dot):
            axes.update((value.m, value.n, value.k))

    for stmt in body:
        visit(stmt)
    return axes


def _allowed(kernel: TileKernel, block: str, size: int, dot_axes: set[str]) -> bool:
    floor = floors(kernel).get(block, 1)
    return all(block_size_allowed(size, default=dim.default, extent=_static_extent(dim), even=dim.even,
                                  minimum=max(dim.min_block, kernel.dot_min_block if dim.name in dot_axes else 1,
                                              floor))
               for dim in kernel.dims if dim.block == block)


def floors(kernel: TileKernel) -> dict[str, int]:
    """The settings a deterministic kernel keeps at or above a minimum: {BLOCK_* or num_warps: minimum}."""
    return {name: minimum for name, minimum, _ in kernel.floors}


def _static_extent(dim) -> int | None:
    return dim.extent.value if isinstance(dim.extent, Const) else None


def pinned_settings(kernel) -> set[str]:
    """The settings (BLOCK_* names, num_warps) a deterministic kernel keeps in every config."""
    return {name for name, _, _ in kernel.pins}


def config_space(kernel: TileKernel) -> list[dict[str, int]]:
    base = dict(kernel.block_sizes)
    base.update(num_warps=kernel.num_warps, num_stages=kernel.num_stages)
    dot_axes = _dot_axes(kernel.body)
    pinned = pinned_settings(kernel)
    configs = [base]
    for block, size in kernel.block_sizes.items():
        for candidate in (size * 2, size // 2):
            if block not in pinned and candidate >= 1 and _allowed(kernel, block, candidate, dot_axes):
                configs.append({**base, block: candidate})
    for warps in (4, 8, 16):
        if warps != kernel.num_warps and WARPS not in pinned and warps >= floors(kernel).get(WARPS, 1):
            configs.append({**base, "num_warps": warps})
    if dot_axes:
        configs.append({**base, "num_stages": 4 if kernel.num_stages != 4 else 3})
    unique: list[dict[str, int]] = []
    for config in configs:
        if config not in unique:
            unique.append(config)
    return unique[:MAX_CONFIGS]
