"""The reduction kinds, once: each kind's name, the TIR node that folds it, the tile IR's binary
op that combines two partial results, and whether a float result depends on the order of the
fold. TVM-free (the node is named, not imported), so the lowering and the Triton side read the
same table; `combiner_nodes` maps TVM's node classes to kinds where TVM is loaded.

Readers: analyses/scans.py and tile_window.py (recognizing a fold), analyses/determinism.py and
the contract check (order-sensitive scans), passes/autodiff/forward.py (a block's kind),
contracts/tile_contract.py (a ScanMark's combiner), lowering/rules (combine, identities, folds)
and triton_codegen/emit_kernel.py (its scan renderings, one per kind).
"""

from __future__ import annotations

from dataclasses import dataclass

SUM, PROD, MAX, MIN = "sum", "prod", "max", "min"


@dataclass(frozen=True)
class ReductionKind:
    name: str
    node: str              # the TIR binary node (`tirx.<node>`) of `Y = Y <op> x`
    binary: str            # the tile IR's Binary op that combines two partial results
    order_sensitive: bool  # a float result depends on the order of the fold (sum, product)


KINDS = {
    SUM: ReductionKind(SUM, "Add", "+", True),
    PROD: ReductionKind(PROD, "Mul", "*", True),
    MAX: ReductionKind(MAX, "Max", "max", False),
    MIN: ReductionKind(MIN, "Min", "min", False),
}
ORDER_SENSITIVE = tuple(name for name, kind in KINDS.items() if kind.order_sensitive)


def combiner_nodes(tirx, kinds=tuple(KINDS)) -> dict:
    """{TVM node class: kind} of `kinds`, given the `tvm.tirx` module."""
    return {getattr(tirx, KINDS[name].node): name for name in kinds}
