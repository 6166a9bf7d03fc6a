"""Scan blocks on tiles: `tl.cumsum` / `tl.cumprod` / `tl.associative_scan` along the marked axis.

Tiling marked the block (`tile.scan`: buffer, axis, combiner) and kept the scan axis a tile; the
parts of the recurrence come from `tir_passes.analyses.scans.scan_form`, the same function Tiling decided
with. Per tile of the scan axis:

    x     = where(position is the first, first, rest), identity where a tail masks the axis
    y     = carry (+) scan(x along the axis)         -> stored to the buffer
    carry = carry (+) reduce(x along the axis)       (only when a serial loop steps the axis)

The carry is a register over the block's other tile axes, opened (at the combiner's identity)
before the serial loop that steps the scan axis. 16-bit values scan in fp32 and round at the store.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import realizes_under, uses_var
from tir_passes.analyses.scans import ScanForm, scan_form
from tir_passes.contracts.tile_contract import ContractError, ScanMark, scan_mark

from lowering.rules.exprs import lower_expr
from lowering.rules.reductions import accumulator_dtype, cast, combine, identity, laid_along
from lowering.tile_ir import Assign, HeldInRegisters, Reduce, Scan, Where


@dataclass
class Carry(HeldInRegisters):
    realize: s_tir.SBlockRealize
    mark: ScanMark
    form: ScanForm
    name: str
    dtype: str
    dims: tuple[str, ...]


def _form(realize: s_tir.SBlockRealize, mark: ScanMark, lowering) -> ScanForm:
    """The block's scan along the iteration variable that the marked axis drives."""
    loops = [p.loop.loop_var for p in lowering.scope.plans.values() if p.kind == "tile" and p.name == mark.axis]
    iv = next((iv for iv, value in zip(realize.block.iter_vars, realize.iter_values)
               if any(uses_var(value, var) for var in loops)), None)
    form = scan_form(realize.block, iv) if iv is not None else None
    if form is None or form.combiner != mark.combiner or form.buffer.name != mark.buffer:
        raise ContractError(f"block {realize.block.name_hint}", f"marked as a {mark.combiner} scan of {mark.buffer} "
                            f"along {mark.axis}, which the block does not compute")
    return form


class ScanState:
    def __init__(self) -> None:
        self.open: dict[str, Carry] = {}

    def open_for_loop(self, lowering, loop: tirx.For) -> list[Carry]:
        """Open carries for scan blocks whose scan axis this (serial) loop steps."""
        plan = lowering.scope.plan(loop)
        opened = []
        for realize in realizes_under(loop.body):
            mark = scan_mark(realize.block)
            if mark is None or plan.partner_of != mark.axis or realize.block.name_hint in self.open:
                continue
            carry = self._open(lowering, realize, mark)
            self.open[realize.block.name_hint] = carry
            opened.append(carry)
        return opened

    def close(self, opened: list[Carry]) -> None:
        for carry in opened:
            del self.open[carry.realize.block.name_hint]

    def _open(self, lowering, realize, mark: ScanMark) -> Carry:
        with lowering.block_context(realize):
            form = _form(realize, mark, lowering)
            indices = lowering.indices(form.store.indices, ())
            dims = tuple(d for d in lowering.merge_dims(*(i.dims for i in indices)) if d != mark.axis)
            dtype = accumulator_dtype(str(form.buffer.dtype))
            carry = Carry(realize, mark, form, lowering.fresh(f"carry_{realize.block.name_hint}"), dtype, dims)
            lowering.emit(Assign(carry.name, identity(mark.combiner, dtype), dtype, dims))
        return carry

    def lower_block(self, lowering, realize: s_tir.SBlockRealize) -> None:
        mark = scan_mark(realize.block)
        carry = self.open.get(realize.block.name_hint)
        with lowering.block_context(realize):
            form = carry.form if carry is not None else _form(realize, mark, lowering)
            x = self._elements(lowering, form, mark)
            scanned = Scan(mark.combiner, x, mark.axis, x.dtype, x.dims)
            if carry is None:
                lowering.store(form.store, scanned)
                return
            lowering.store(
                form.store, combine(mark.combiner, carry.reg, scanned, lowering.merge_dims(carry.dims, x.dims))
            )
            total = Reduce(mark.combiner, x, (mark.axis,), x.dtype, tuple(d for d in x.dims if d != mark.axis))
            lowering.emit(
                Assign(carry.name, combine(mark.combiner, carry.reg, total, carry.dims), carry.dtype, carry.dims)
            )

    def _elements(self, lowering, form: ScanForm, mark: ScanMark):
        var, low = form.iter_var.var, form.iter_var.dom.min
        same = tvm_ffi.structural_equal(form.first, form.rest)  # y_0 = x_0: one element expression
        x = lower_expr(lowering, form.rest if same else tirx.if_then_else(var == low, form.first, form.rest))
        dtype = accumulator_dtype(str(form.buffer.dtype))
        x = cast(x, dtype)
        tails = [c.tile for c in lowering.conditions if mark.axis in c.dims]
        for tail in tails:  # lanes past the extent add nothing to the running value
            x = Where(tail, x, identity(mark.combiner, dtype), dtype, lowering.merge_dims(tail.dims, x.dims))
        if mark.axis not in x.dims:  # elements that do not vary along the axis still scan once per lane
            x = laid_along(lowering, x, mark.axis, identity(mark.combiner, dtype))
        return x
