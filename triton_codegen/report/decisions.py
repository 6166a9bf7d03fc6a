"""Each pass's decisions, read back from the annotations it left in the final IR.

  LoopFusion              the fusion record (fusion_record.py): one FusionStep per fusion taken or
                          refused, with the global-memory bytes it saves
  BufferLayout            the layout record (layout_record.py): one LayoutDecision per intermediate,
                          permuted or kept
  BankConflictFreeTiling  block "bank.decision": the shared layout record (shared_layout.py), read
                          through its reader: the padding of a shared staging tile, and why
  Tiling                  the typed contract (loop "tile", "tile.kernel", block "tile.dot" and
                          "tile.scan"), read through tile_contract's readers, and the root
                          "tile.decisions" reasons (TileNotes: the kernel each is about, typed)

Assumes: the module is the pipeline's final one. Every pass keeps the annotations of the passes
before it (Tiling runs last for that reason, docs/pipeline.md), so one module holds them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import tirx

from tir_passes.analyses.nest import loops_under, realizes_under
from tir_passes.contracts.fusion_record import FusionStep, fusion_steps
from tir_passes.contracts.layout_record import LayoutDecision, layout_decisions
from tir_passes.contracts.shared_layout import SharedLayoutDecision, decision_of
from tir_passes.infra.pass_util import top_level_statements
from tir_passes.contracts.tile_contract import (GRID, SERIAL, TILE, DotMark, KernelTile, LoopTile, NotDot, ScanMark,
                                                TileNote, dot_mark, kernel_tile, loop_tile, not_dot_mark, scan_mark)
from tir_passes.contracts.tile_root import tile_notes


@dataclass(frozen=True)
class TiledLoop:
    name: str
    iterations: str   # the loop's extent in the IR
    tile: LoopTile


@dataclass(frozen=True)
class KernelDecision:
    """What Tiling decided for one kernel (one statement under the root block)."""

    index: int
    blocks: tuple[str, ...]
    kernel: KernelTile | None
    loops: tuple[TiledLoop, ...]           # outermost first
    dots: tuple[tuple[str, DotMark], ...]  # (block, mark)
    scans: tuple[tuple[str, ScanMark], ...]
    reasons: tuple[str, ...]               # its "tile.decisions" lines
    not_dots: tuple[tuple[str, NotDot], ...] = ()   # contractions that are not tl.dots, and why

    def loops_with_role(self, role: str) -> tuple[TiledLoop, ...]:
        return tuple(loop for loop in self.loops if loop.tile.role == role)

    @property
    def program_ids(self) -> tuple[TiledLoop, ...]:
        return self.loops_with_role(GRID)

    @property
    def serial(self) -> tuple[TiledLoop, ...]:
        return self.loops_with_role(SERIAL)

    @property
    def tile_axes(self) -> tuple[TiledLoop, ...]:
        return self.loops_with_role(TILE)

    @property
    def dependences(self) -> tuple[TiledLoop, ...]:
        """Loops that carry a dependence (which is why they are serial)."""
        return tuple(loop for loop in self.loops if loop.tile.carries)


@dataclass(frozen=True)
class Decisions:
    fusion: tuple[FusionStep, ...]
    layout: tuple[LayoutDecision, ...]
    bank: tuple[tuple[str, SharedLayoutDecision], ...]   # (block, decision)
    kernels: tuple[KernelDecision, ...]

    @property
    def fusion_bytes_saved(self) -> int:
        return sum(d.bytes_saved or 0 for d in self.fusion if d.taken)


def read_decisions(mod: tvm.IRModule) -> Decisions:
    func = mod["main"]
    statements = top_level_statements(func)
    reasons = tile_notes(func)
    kernels = tuple(kernel for index, stmt in enumerate(statements)
                    if (kernel := _kernel_decision(index, stmt, reasons)) is not None)
    return Decisions(fusion_steps(func), layout_decisions(func), _bank_decisions(statements), kernels)


def _bank_decisions(statements) -> tuple[tuple[str, SharedLayoutDecision], ...]:
    return tuple((realize.block.name_hint, decision) for stmt in statements for realize in realizes_under(stmt)
                 if (decision := decision_of(realize.block)) is not None)


def _kernel_decision(index: int, stmt, reasons: tuple[TileNote, ...]) -> KernelDecision | None:
    """The statement's decisions, or None when Tiling left it alone (a CUDA-style schedule)."""
    loops = tuple(TiledLoop(loop.loop_var.name, str(loop.extent), tile)
                  for loop in loops_under(stmt) if (tile := loop_tile(loop)) is not None)
    realizes = realizes_under(stmt)
    kernel = next((k for node in [*loops_under(stmt), *realizes] if (k := kernel_tile(node)) is not None), None)
    if not loops and kernel is None:
        return None
    blocks = [r.block for r in realizes]
    return KernelDecision(
        index, tuple(b.name_hint for b in blocks), kernel, loops,
        tuple((b.name_hint, mark) for b in blocks if (mark := dot_mark(b)) is not None),
        tuple((b.name_hint, mark) for b in blocks if (mark := scan_mark(b)) is not None),
        tuple(note.text for note in reasons if note.kernel == index),
        tuple((b.name_hint, mark) for b in blocks if (mark := not_dot_mark(b)) is not None))


def extent_text(extent) -> str:
    """A tile axis's extent as the IR writes it (an int, or a symbolic expression)."""
    return str(extent.value) if isinstance(extent, tirx.IntImm) else str(extent)
