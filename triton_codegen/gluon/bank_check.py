"""The model's count next to Gluon's own (`gl.bank_conflicts`) for every register/shared layout
pair a generated kernel moves data through: one row per staged access.

The model (tir_passes/analyses/bank_conflicts.py) counts the accesses TVM's CUDA lowering of the schedule
makes, under the decided layout, as the Gluon backend issues them (each thread's consecutive
elements as one vector); Gluon counts the ld/st.shared it will emit for the layout pair. A
tensor-core operand read by warpgroup_mma has no register layout: Gluon has nothing to count
there, and the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from .aot import bank_conflicts
from .emit import _statements
from .ir import Compute, Contract, GluonProgram, SharedLoad
from .layouts import layout_source, shared_layout_source


@dataclass(frozen=True)
class LayoutPair:
    kernel: str
    block: str
    buffer: str
    kind: str                       # store or load
    register: str                   # the register layout (Gluon source)
    shared: str                     # the shared layout (Gluon source)
    dtype: str
    shape: tuple[int, ...]
    num_warps: int


def layout_pairs(program: GluonProgram) -> list[LayoutPair]:
    pairs = []
    for kernel in program.kernels:
        tiles = {t.name: t for t in kernel.shared}
        accumulators = dict(kernel.accumulators)
        for statement in _statements(kernel.body):
            if isinstance(statement, Contract) and statement.instruction == "fma":
                parent = layout_source(accumulators[statement.accumulator].layout)
                for index, buffer in enumerate((statement.a, statement.b)):
                    tile = tiles[buffer]
                    pairs.append(LayoutPair(kernel.name, "contraction", buffer, "load",
                                            f"gl.DotOperandLayout({index}, {parent}, 0)",
                                            shared_layout_source(tile.decision), tile.dtype, tile.shape,
                                            kernel.num_warps))
            if not isinstance(statement, Compute):
                continue
            register = layout_source(statement.box.layout)
            accesses = [("store", statement.buffer)] if statement.shared else []
            accesses += [("load", load.buffer) for load in statement.loads if isinstance(load, SharedLoad)]
            for kind, buffer in accesses:
                tile = tiles[buffer]
                pairs.append(LayoutPair(kernel.name, statement.box.block, buffer, kind, register,
                                        shared_layout_source(tile.decision), tile.dtype, statement.box.extents,
                                        kernel.num_warps))
    return pairs


def tensor_core_reads(program: GluonProgram) -> list[tuple[str, str, str]]:
    """(kernel, operand, accumulator) for each shared tile warpgroup_mma reads."""
    return [(k.name, operand, s.accumulator) for k in program.kernels for s in _statements(k.body)
            if isinstance(s, Contract) and s.instruction == "wgmma" for operand in (s.a, s.b)]


def gluon_counts(program: GluonProgram) -> list[tuple[LayoutPair, int]]:
    """Each layout pair with gl.bank_conflicts' count (evaluated on the CPU, in a worker)."""
    return gluon_counts_of([program])[0]


def gluon_counts_of(programs: list[GluonProgram]) -> list[list[tuple[LayoutPair, int]]]:
    """`gluon_counts` of each program, in one worker."""
    pairs = [layout_pairs(program) for program in programs]
    flat = [p for program_pairs in pairs for p in program_pairs]
    counts = iter(bank_conflicts([{"dtype": p.dtype, "shape": list(p.shape), "register": p.register,
                                   "shared": p.shared, "num_warps": p.num_warps} for p in flat]) if flat else [])
    return [[(pair, next(counts)) for pair in program_pairs] for program_pairs in pairs]
