"""Scans: a block that reads its own output at the previous index along one axis.

    Y[i, j] = T.if_then_else(j == 0, X[i, j], Y[i, j - 1] + X[i, j])          # (a)
    Y[i, j] = X[i, j] + T.if_then_else(j >= 1, Y[i, j - 1], T.float32(0))    # (b)
    Y[i, j] = T.max(T.Select(j > 0, Y[i, j - 1], T.min_value("float32")), X[i, j])

is the inclusive scan `y_j = y_(j-1) (+) x_j` with `y_0 = first`: every element is the combiner
(+, *, max or min) folded over `x'_0 = first, x'_1 = rest_1, ...`. Written with a spatial
iterator, the loop over j carries a dependence (dependence.py); recognized here, Tiling keeps the
axis a tile and marks the block, and the lowering computes it with `tl.cumsum` / `tl.cumprod` /
`tl.associative_scan` along that axis, carrying the running value across tiles in registers.

One function, used by Tiling (to decide) and by the lowering (to get the parts): they cannot
disagree about what the block computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from tir_passes.analyses.nest import call_name, is_reduction_block
from tir_passes.infra.reduction_kinds import combiner_nodes

PROOF = sym.ProofStrength.SYMBOLIC_BOUND
_COMBINERS = combiner_nodes(tirx)


@dataclass(frozen=True)
class ScanForm:
    store: tirx.BufferStore
    iter_var: tirx.IterVar   # the block variable the scan walks
    dim: int                 # the index dimension it walks
    combiner: str            # sum, prod, max, min
    first: object            # TIR value of the first element (over the block's variables)
    rest: object             # TIR element combined in at every later position

    @property
    def buffer(self):
        return self.store.buffer


def _loads_of(expr, buf) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda l: found.append(l) if l.source.same_as(buf) else None))
    return found


def _is_previous(load, store: tirx.BufferStore, dim: int, var: tirx.Var) -> bool:
    analyzer = sym.Analyzer()
    for axis, (read, written) in enumerate(zip(load.indices, store.indices)):
        if axis == dim:
            if not analyzer.can_prove_equal(read, var - 1):
                return False
        elif not tvm_ffi.structural_equal(read, written):
            return False
    return True


def _branches(expr):
    """(condition, then, else) of a Select or T.if_then_else, else None."""
    if isinstance(expr, tirx.Select):
        return expr.condition, expr.true_value, expr.false_value
    if call_name(expr) == "if_then_else":
        return tuple(expr.args)
    return None


def _combine_with(expr, prev) -> tuple[str, object] | None:
    """(combiner, other operand) when `expr` is `prev (+|*|max|min) other` in either order."""
    kind = _COMBINERS.get(type(expr))
    if kind is None:
        return None
    if expr.a.same_as(prev):
        return kind, expr.b
    if expr.b.same_as(prev):
        return kind, expr.a
    return None


class _FirstPosition:
    """Decides whether a condition means "v is the first position" or "v is a later one"."""

    def __init__(self, iv: tirx.IterVar):
        self.var, self.low = iv.var, iv.dom.min
        self.analyzer = sym.Analyzer()
        self.analyzer.bind(iv.var, iv.dom)

    def _holds(self, cond, where) -> bool:
        with self.analyzer.constraint_scope(where):
            return bool(self.analyzer.can_prove(cond, PROOF))

    def means_first(self, cond) -> bool:
        return self._holds(cond, self.var == self.low) and self._holds(tirx.Not(cond), self.var > self.low)

    def means_later(self, cond) -> bool:
        return self._holds(tirx.Not(cond), self.var == self.low) and self._holds(cond, self.var > self.low)


def _free_of(expr, buf) -> bool:
    return not _loads_of(expr, buf)


def _parts(value, prev, buf, position: _FirstPosition) -> tuple[str, object, object] | None:
    """(combiner, first, rest) of the value, or None when it is not a recognized scan."""
    branches = _branches(value)
    if branches is not None:  # (a): first element | previous (+) rest
        cond, then, other = branches
        for first_cond, first, later in ((cond, then, other), (tirx.Not(cond), other, then)):
            combined = _combine_with(later, prev)
            if combined and _free_of(first, buf) and _free_of(combined[1], buf) and position.means_first(first_cond):
                return combined[0], first, combined[1]
    kind = _COMBINERS.get(type(value))
    if kind is None:
        return None
    for guarded, rest in ((value.a, value.b), (value.b, value.a)):  # (b): (later ? previous : init) (+) rest
        branches = _branches(guarded)
        if branches is None or not _free_of(rest, buf):
            continue
        cond, then, other = branches
        for later_cond, previous, init in ((cond, then, other), (tirx.Not(cond), other, then)):
            if previous.same_as(prev) and _free_of(init, buf) and position.means_later(later_cond):
                return kind, type(value)(init, rest), rest
    return None


def scan_along_loop(realize: s_tir.SBlockRealize, loop_var: tirx.Var) -> ScanForm | None:
    """The scan a spatial block computes along the block variable bound to exactly `loop_var`."""
    iv = next((iv for iv, value in zip(realize.block.iter_vars, realize.iter_values)
               if isinstance(value, tirx.Var) and value.same_as(loop_var)), None)
    return scan_form(realize.block, iv) if iv is not None else None


def scan_form(block: s_tir.SBlock, iv: tirx.IterVar) -> ScanForm | None:
    """The scan a spatial block computes along its variable `iv`, or None."""
    store = block.body
    if not isinstance(store, tirx.BufferStore) or is_reduction_block(block) or block.init is not None:
        return None
    dims = [d for d, index in enumerate(store.indices) if isinstance(index, tirx.Var) and index.same_as(iv.var)]
    previous = _loads_of(store.value, store.buffer)
    if len(dims) != 1 or len(previous) != 1:
        return None
    prev = previous[0]
    if not _is_previous(prev, store, dims[0], iv.var):
        return None
    parts = _parts(store.value, prev, store.buffer, _FirstPosition(iv))
    if parts is None:
        return None
    combiner, first, rest = parts
    return ScanForm(store, iv, dims[0], combiner, first, rest)
