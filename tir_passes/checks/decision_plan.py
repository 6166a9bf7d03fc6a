"""The decisions a compiled program ships, without their sizes: what the shape-reduced copy of a
program must decide as the full-size program does, or its numerics check a different kernel.

A `DecisionPlan` is read from a pipeline's last stage (the typed annotations the passes write,
never their prose): per kernel (a top-level statement), its blocks in order (fusion, inlining and
recomputation change them), which blocks stream online (OnlineSoftmax's marks), which run on
tl.dot, which are scans, and which serial loops have a tile window. Tile sizes, warps and grids
are left out: they follow the sizes, and the kernel check runs them at the copy's sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.contracts.online_contract import RESCALE_KEY, SHIFT_KEY
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.contracts.tile_contract import dot_mark, loop_tile, scan_mark


@dataclass(frozen=True)
class KernelPlan:
    blocks: tuple[str, ...]
    online: tuple[str, ...]       # "block: shift" / "block: rescale"
    dots: tuple[str, ...]
    scans: tuple[str, ...]
    windows: int                  # serial loops bounded by a tile window


@dataclass(frozen=True)
class DecisionPlan:
    kernels: tuple[KernelPlan, ...]

    def differences(self, other: "DecisionPlan") -> list[str]:
        """What `other` (the reduced copy's plan) decides differently, one phrase each."""
        if len(self.kernels) != len(other.kernels):
            return [f"{len(self.kernels)} kernel(s) at full size, {len(other.kernels)} in the copy"]
        found = []
        for index, (full, copy) in enumerate(zip(self.kernels, other.kernels)):
            for field, what in (("blocks", "blocks"), ("online", "online streaming"), ("dots", "tl.dot blocks"),
                                ("scans", "scans"), ("windows", "tile windows")):
                if getattr(full, field) != getattr(copy, field):
                    found.append(f"kernel {index}: {what} {_shown(getattr(full, field))} at full size, "
                                 f"{_shown(getattr(copy, field))} in the copy")
        return found


def _shown(value) -> str:
    return str(value) if isinstance(value, int) else "(" + ", ".join(value) + ")"


def decision_plan(func: tirx.PrimFunc) -> DecisionPlan:
    return DecisionPlan(tuple(_kernel_plan(stmt) for stmt in top_level_statements(func)))


def _kernel_plan(stmt) -> KernelPlan:
    blocks, online, dots, scans, windows = [], [], [], [], []

    def block(node) -> None:
        blocks.append(node.name_hint)
        for key, kind in ((SHIFT_KEY, "shift"), (RESCALE_KEY, "rescale")):
            if key in node.annotations:
                online.append(f"{node.name_hint}: {kind}")
        if dot_mark(node) is not None:
            dots.append(node.name_hint)
        if scan_mark(node) is not None:
            scans.append(node.name_hint)

    def loop(node) -> None:
        tile = loop_tile(node)
        if tile is not None and tile.window is not None:
            windows.append(node.loop_var.name)

    tvm_ffi.structural_walk(stmt, [(s_tir.SBlock, block), (tirx.For, loop)], order="pre")
    return KernelPlan(tuple(blocks), tuple(online), tuple(dots), tuple(scans), len(windows))
