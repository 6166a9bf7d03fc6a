"""OnlineSoftmax: fuse a max reduction and the sums of exponentials that read it into one loop
over their common reduction axis (the online softmax of flash attention).

Why: softmax(x)·V written as TIR is a max over a row, then sums of exp(c*(x - max)) (the row's
normalizer, and for attention the weighted sum of V), each a separate pass over the row. When
the row does not fit in registers, or a sum is a contraction (the weighted sum of V), every pass
re-reads or recomputes the row. In the online form one loop keeps a running maximum M and
rescales each sum whenever M grows, so the row is walked once.

What it rewrites: a nest `M[r] = max(M[r], x)` over one reduction axis j (with T.init), and the
later nests that read M only through exponentials, `Y[r, ..] = Y[r, ..] + t` over the same
domain of j with T.init zero, where t scales like exp(-c*M) (degree one: every M in t sits in an
`exp` whose argument is linear in M with the same coefficient -c, and t is a product, quotient,
cast or selection of such factors and terms free of M; a later reduction that reads M but is not such
a sum, or cannot move up to the max, stays where it is and reads the final M: a backward's adjoints,
the reason in the record). Elementwise blocks that read M and write
an intermediate (softmax's exponentials) are inlined first, so their consumers read M directly.
The result is one nest at the max's place:

    for r...:                               # the max's spatial axes
        for j:
            block max:  M_prev[r] = M[r]; M[r] = max(M[r], x)          # "online.shift"
            for ..:     block sum:  Y[r, ..] = Y[r, ..] * F + t         # "online.rescale"

with F = exp(c*(M_prev[r] - M[r])) (exactly 1 when the maximum did not move, so an initial -inf
gives no NaN), and Y restarting from zero where M_prev[r] is -inf: elements folded while the
maximum was -inf were -inf themselves (their terms NaN), and add nothing once it is finite. That
assumes, as flash attention does, that what those weights multiply is finite: the two-pass form
computes 0 * V for them, NaN where V is Inf or NaN, which the restart drops. No restart where
the first element is proven finite for every row (leading_element.py: unmasked or causal scores;
the mark's `first_finite`). Per element this is ordinary TIR, which the numerics check compares
with the input; the marks (online_contract.py) tell the later stages that a whole tile of j may
be folded at once, which is what makes the rewrite pay.

Applied only where it pays: some sum has spatial axes besides the rows (a contraction over j,
such as attention's weighted sum), or j is longer than one tile can hold (the backend's limits.max_row_tile) or
symbolic, or the row's elements are a contraction's output (softmax(Q·Kᵀ)) whose rows do not fit
in registers (BackendLimits.row_fits_in_registers, LoopFusion's rule): then the statistics are
computed tile by tile and the normalize pass recomputes the scores (LoopFusion). A softmax whose
rows fit in one tile keeps its three passes over registers. Every
group found is recorded, taken or refused with the reason, as the root block's "online.decisions".

Assumes: HoistAllocations ran (intermediates are root allocations); nests are perfect, with
block bindings that are plain loop variables (TVMScript's T.grid + T.axis.remap), which is how
the max and the sums are written before LoopFusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.schedule import ScheduleError

from tir_passes.errors import first_line
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.analyses.nest import blocks_under, call_name, is_self_load, is_zero, perfect_nest, unique_name
from tir_passes.infra.pass_util import static_int
from tir_passes.contracts.online_contract import DECISIONS_KEY, RESCALE_KEY, SHIFT_KEY, OnlineRescale, OnlineShift
from tir_passes.contracts.online_contract import rescale_value, shift_value
from tir_passes.analyses.leading_element import finite_constant, first_element_finite
from tir_passes.analyses.recompute import worth_recomputing
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, top_level_statements, with_root_block

REDUCE = tirx.IterVar.CommReduce


class _Refused(Exception):
    """Why a max and its sums are left as they are."""


# --- the max ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MaxNest:
    index: int  # position among the top-level statements
    realize: s_tir.SBlockRealize
    loops: list[tirx.For]
    buffer: object  # M
    rows: list[tirx.IterVar]  # the spatial block variables, in M's axis order
    axis: tirx.IterVar  # the reduction variable j


def _reduce_vars(block: s_tir.SBlock) -> list[tirx.IterVar]:
    return [iv for iv in block.iter_vars if iv.iter_type == REDUCE]


def _plain_bindings(realize: s_tir.SBlockRealize, loops: list[tirx.For]) -> bool:
    """Every block variable is bound to its own loop variable of the nest."""
    values = list(realize.iter_values)
    loop_vars = [loop.loop_var for loop in loops]
    return (
        len(values) == len(loop_vars)
        and all(isinstance(v, tirx.Var) for v in values)
        and all(any(v.same_as(lv) for lv in loop_vars) for v in values)
        and len({v.__chandle__() for v in values}) == len(values)
    )


def _update_operand(store: tirx.BufferStore, kind) -> object | None:
    """`x` when the store is `Y = kind(Y, x)` or `kind(x, Y)`, else None."""
    value = store.value
    if not isinstance(value, kind):
        return None
    if is_self_load(value.a, store):
        return value.b
    if is_self_load(value.b, store):
        return value.a
    return None


def _reads(expr, buffer) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda l: found.append(l) if l.source.same_as(buffer) else None))
    return bool(found)


def max_nest(stmt, index: int) -> MaxNest | None:
    """The nest when it is a max reduction over one axis that a later sum may share."""
    nest = perfect_nest(stmt)
    if nest is None:
        return None
    loops, realize = nest
    block = realize.block
    if len(_reduce_vars(block)) != 1 or block.init is None or not isinstance(block.body, tirx.BufferStore):
        return None
    if block.annotations.get(SHIFT_KEY) is not None or not _plain_bindings(realize, loops):
        return None
    store = block.body
    element = _update_operand(store, tirx.Max)
    spatial = [iv for iv in block.iter_vars if iv.iter_type != REDUCE]
    if element is None or _reads(element, store.buffer) or not _indexed_by(store.indices, spatial):
        return None
    rows = [next(iv for iv in spatial if iv.var.same_as(index_var)) for index_var in store.indices]
    return MaxNest(index, realize, loops, store.buffer, rows, _reduce_vars(block)[0])


def _indexed_by(indices, ivs: list[tirx.IterVar]) -> bool:
    """The indices are exactly the block variables `ivs`, each once, in some order."""
    return (
        len(indices) == len(ivs)
        and all(isinstance(i, tirx.Var) for i in indices)
        and {i.__chandle__() for i in indices} == {iv.var.__chandle__() for iv in ivs}
    )


# --- degree of a term in exp(-c*M) -------------------------------------------------------------------
class _Scaling:
    """Reads a sum's term as a function of M: how M enters each exponential (a constant
    coefficient), and the term's degree in exp(-c*M). Everything it cannot read is refused."""

    ANY = "any"  # a literal zero: homogeneous of every degree

    def __init__(self, buffer):
        self.buffer = buffer
        self.rates: list[float] = []  # c of each exponential, which must agree
        self.loads: list = []  # the M loads, which must all be the same element

    def is_m(self, expr) -> bool:
        if isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(self.buffer):
            self.loads.append(expr)
            return True
        return False

    def coefficient(self, expr) -> float | None:
        """d expr / d M, when expr is linear in M with a constant coefficient."""
        if self.is_m(expr):
            return 1.0
        if not _reads(expr, self.buffer):
            return 0.0
        if isinstance(expr, tirx.Cast) and str(expr.ty.dtype).startswith(("float", "bfloat")):
            return self.coefficient(expr.value)
        if isinstance(expr, (tirx.Add, tirx.Sub)):
            a, b = self.coefficient(expr.a), self.coefficient(expr.b)
            if a is None or b is None:
                return None
            return a + b if isinstance(expr, tirx.Add) else a - b
        if isinstance(expr, (tirx.Mul, tirx.Div)):
            return self._scaled(expr)
        return None

    def _scaled(self, expr) -> float | None:
        constant_b = _float_constant(expr.b)
        if isinstance(expr, tirx.Div):
            inner = self.coefficient(expr.a)
            return inner / constant_b if inner is not None and constant_b not in (None, 0.0) else None
        constant_a = _float_constant(expr.a)
        if constant_b is not None:
            inner = self.coefficient(expr.a)
            return inner * constant_b if inner is not None else None
        if constant_a is not None:
            inner = self.coefficient(expr.b)
            return inner * constant_a if inner is not None else None
        return None

    def degree(self, expr):
        """The degree in exp(-c*M): 0 for terms free of M, ANY for a literal zero, else None
        when the term is not homogeneous."""
        if is_zero(expr):
            return self.ANY
        if not _reads(expr, self.buffer):
            return 0
        if call_name(expr) == "exp":
            rate = self.coefficient(expr.args[0])
            if rate is None or rate == 0.0:
                return None
            self.rates.append(-rate)
            return 1
        if isinstance(expr, tirx.Cast):
            return self.degree(expr.value)
        if isinstance(expr, (tirx.Mul, tirx.Div)):
            a, b = self.degree(expr.a), self.degree(expr.b)
            if a is None or b is None or (isinstance(expr, tirx.Div) and b == self.ANY):
                return None
            if self.ANY in (a, b):
                return self.ANY
            return a + b if isinstance(expr, tirx.Mul) else a - b
        if isinstance(expr, (tirx.Add, tirx.Sub)):
            return _same_degree(self.degree(expr.a), self.degree(expr.b))
        if call_name(expr) == "if_then_else" or isinstance(expr, tirx.Select):
            cond, then, other = (
                expr.args if call_name(expr) == "if_then_else" else (expr.condition, expr.true_value, expr.false_value)
            )
            if _reads(cond, self.buffer):
                return None
            return _same_degree(self.degree(then), self.degree(other))
        return None


def _same_degree(a, b):
    if a is None or b is None:
        return None
    if a == _Scaling.ANY:
        return b
    if b == _Scaling.ANY or a == b:
        return a
    return None


def _float_constant(expr) -> float | None:
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    if isinstance(expr, (tirx.FloatImm, tirx.IntImm)):
        return float(expr.value)
    return None


# --- the sums --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SumNest:
    index: int
    realize: s_tir.SBlockRealize
    loops: list[tirx.For]
    store: tirx.BufferStore
    term: object
    rows: list[tirx.IterVar]  # the block variables that index M, in M's axis order
    extra: list[tirx.IterVar]  # its other spatial variables (a contraction's output columns)
    axis: tirx.IterVar
    rate: float  # c


def sum_nest(stmt, index: int, mx: MaxNest) -> SumNest:
    """The nest as a sum of exponentials of M over the max's axis, or _Refused with why."""
    nest = perfect_nest(stmt)
    name = ", ".join(b.name_hint for b in blocks_under(stmt))
    if nest is None:
        raise _Refused(f"{name} reads {mx.buffer.name} but is not one block under its loops")
    loops, realize = nest
    block = realize.block
    reduce = _reduce_vars(block)
    if len(reduce) != 1 or not isinstance(block.body, tirx.BufferStore) or not _plain_bindings(realize, loops):
        raise _Refused(f"{name} reads {mx.buffer.name} but is not a sum over one axis")
    store = block.body
    term = _update_operand(store, tirx.Add)
    if term is None or _reads(term, store.buffer) or not _zero_init(block, store):
        raise _Refused(f"{name} reads {mx.buffer.name} but is not `Y = Y + t` with T.init zero")
    if not _same_range(reduce[0].dom, mx.axis.dom):
        raise _Refused(f"{name} sums over {reduce[0].dom}, the max over {mx.axis.dom}")
    scaling = _Scaling(mx.buffer)
    if scaling.degree(term) != 1 or not scaling.rates:
        raise _Refused(
            f"{name}: its term is not proportional to exp(-c*{mx.buffer.name}) "
            "(each exp linear in it with one constant coefficient)"
        )
    if any(not math.isclose(rate, scaling.rates[0], rel_tol=1e-6) for rate in scaling.rates):
        raise _Refused(f"{name}: its exponentials scale {mx.buffer.name} by different factors {scaling.rates}")
    rows = _row_vars(scaling.loads, block, mx, name)
    spatial = [iv for iv in block.iter_vars if iv.iter_type != REDUCE]
    extra = [iv for iv in spatial if not any(iv.same_as(row) for row in rows)]
    return SumNest(index, realize, loops, store, term, rows, extra, reduce[0], scaling.rates[0])


def _zero_init(block: s_tir.SBlock, store: tirx.BufferStore) -> bool:
    init = block.init
    return (
        isinstance(init, tirx.BufferStore)
        and init.buffer.same_as(store.buffer)
        and is_zero(init.value)
        and all(tvm_ffi.structural_equal(a, b) for a, b in zip(init.indices, store.indices))
    )


def _same_range(a: tvm.ir.Range, b: tvm.ir.Range) -> bool:
    return tvm_ffi.structural_equal(a.min, b.min) and tvm_ffi.structural_equal(a.extent, b.extent)


def _row_vars(loads: list, block: s_tir.SBlock, mx: MaxNest, name: str) -> list[tirx.IterVar]:
    """The sum's spatial variables at M's axes: every M it reads is M[those variables]."""
    spatial = {iv.var.__chandle__(): iv for iv in block.iter_vars if iv.iter_type != REDUCE}
    first = list(loads[0].indices)
    for load in loads:
        if not all(tvm_ffi.structural_equal(a, b) for a, b in zip(load.indices, first)):
            raise _Refused(f"{name} reads several elements of {mx.buffer.name}")
    if not all(isinstance(i, tirx.Var) and i.__chandle__() in spatial for i in first) or len(
        {i.__chandle__() for i in first}
    ) != len(first):
        raise _Refused(f"{name} reads {mx.buffer.name}[{', '.join(map(str, first))}], not the row it sums")
    rows = [spatial[i.__chandle__()] for i in first]
    for row, max_row in zip(rows, mx.rows):
        if not _same_range(row.dom, max_row.dom):
            raise _Refused(f"{name} has rows over {row.dom}, the max over {max_row.dom}")
    return rows


# --- finding a group ---------------------------------------------------------------------------------
def _intermediates(func) -> set[str]:
    return {b.name for b in root_block(func).alloc_buffers}


def _block_reads(block: s_tir.SBlock, buffer) -> bool:
    return _reads(block.body, buffer) or (block.init is not None and _reads(block.init, buffer))


def _inline_exponentials(func, mx: MaxNest) -> tuple[tirx.PrimFunc, list[str]]:
    """Inline the elementwise blocks that read M into their consumers (softmax's exp(x - max)):
    afterwards every sum reads M itself."""
    sch = s_tir.Schedule(func)
    intermediates = _intermediates(func)
    inlined = []
    for block in blocks_under(root_block(func).body):
        written = [region.source for region in block.writes]
        spatial = all(iv.iter_type != REDUCE for iv in block.iter_vars) and block.init is None
        if (
            not spatial
            or len(written) != 1
            or written[0].name not in intermediates
            or not _block_reads(block, mx.buffer)
        ):
            continue
        try:
            sch.compute_inline(sch.get_sblock(block.name_hint))
        except ScheduleError as err:
            raise _Refused(
                f"{block.name_hint} reads {mx.buffer.name} and TVM cannot inline it ({first_line(err, 120)})"
            ) from None
        inlined.append(block.name_hint)
    return sch.mod["main"], inlined


def _group(func, max_index: int) -> tuple[MaxNest, list[SumNest], list[str]]:
    """The max, its sums, and why each other reducing reader of M stays (reading the final maximum)."""
    statements = top_level_statements(func)
    mx = max_nest(statements[max_index], max_index)
    sums, left = [], []
    for index in range(max_index + 1, len(statements)):
        stmt, nest = statements[index], perfect_nest(statements[index])
        if not any(_block_reads(b, mx.buffer) for b in blocks_under(stmt)) or (
                nest is not None and len(_reduce_vars(nest[1].block)) == 0):
            continue  # a later elementwise reader sees the final maximum, as before
        try:
            candidate = sum_nest(stmt, index, mx)
            _blocked(statements, mx, sums, candidate)
            sums.append(candidate)
        except _Refused as why:   # a backward's adjoints: rows over the other axis, or after what the sums feed
            left.append(str(why))
    if not sums:
        raise _Refused(f"no sum over {mx.axis.var.name} reads {mx.buffer.name}" + "".join(f"; {w}" for w in left))
    rates = {s.rate for s in sums}
    if any(not math.isclose(r, sums[0].rate, rel_tol=1e-6) for r in rates):
        raise _Refused(f"the sums scale {mx.buffer.name} by different factors {sorted(rates)}")
    return mx, sums, left


def _contraction_producing(func, mx: MaxNest, spec: GpuSpec) -> str | None:
    """The block that computes the max's elements as a contraction cheap enough to recompute
    (attention's scores; recompute.worth_recomputing, the rule LoopFusion then applies), if any."""
    element = _update_operand(mx.realize.block.body, tirx.Max)
    for block in blocks_under(root_block(func).body):
        for buf in (region.source for region in block.writes):
            if _reads(element, buf) and worth_recomputing(block, buf, spec) is not None:
                return block.name_hint
    return None


def _worth_it(func, mx: MaxNest, sums: list[SumNest], spec: GpuSpec) -> str | None:
    """Why the online form pays here, or None. The same with deterministic=True: a static row
    within one tile is pinned whole there (read once, determinism.py), a longer or symbolic one
    walks fixed chunks in the online form."""
    extent = static_int(mx.axis.dom.extent)
    if any(s.extra for s in sums):
        names = ", ".join(s.realize.block.name_hint for s in sums if s.extra)
        return f"{names} also has columns besides the rows (a contraction over {mx.axis.var.name})"
    if extent is None:
        return f"the row length {mx.axis.dom.extent} is symbolic"
    if extent > spec.limits.max_row_tile:
        return f"rows of {extent} are longer than one tile ({spec.limits.max_row_tile})"
    producer = _contraction_producing(func, mx, spec)
    if producer is not None and not spec.limits.row_fits_in_registers(extent, contraction=True):
        return (
            f"its elements are {producer}'s contraction, whose rows of {extent} do not fit in registers: "
            "computed tile by tile (and again to normalize, LoopFusion)"
        )
    return None


def _writes_of(stmt) -> set[str]:
    return {region.source.name for block in blocks_under(stmt) for region in block.writes}


def _reads_of(stmt) -> set[str]:
    return {region.source.name for block in blocks_under(stmt) for region in block.reads}


def _blocked(statements: list, mx: MaxNest, sums: list[SumNest], s: SumNest) -> None:
    """_Refused unless `s` may move up to the max beside `sums` (nothing between touches what it reads, writes)."""
    reads, writes = _reads_of(statements[s.index]), _writes_of(statements[s.index])
    if reads & {w for other in sums for w in _writes_of(statements[other.index])}:
        raise _Refused(f"{s.realize.block.name_hint} reads what another sum of {mx.buffer.name} writes")
    moving = {other.index for other in sums}
    for index in range(mx.index + 1, s.index):
        if index in moving:
            continue
        between = statements[index]
        name = ", ".join(b.name_hint for b in blocks_under(between))
        if _writes_of(between) & (reads | writes) or _reads_of(between) & writes:
            raise _Refused(f"{name}, between the max and {s.realize.block.name_hint}, touches what it reads or writes")


# --- building the online nest ----------------------------------------------------------------------
def _with_regions(block: s_tir.SBlock, buffers: dict) -> s_tir.SBlock:
    """The block with the read and write regions of its new body (TVM's own analysis)."""
    reads, writes = s_tir.analysis.get_sblock_read_write_region(block, buffers)
    return replace_block(block, reads=reads, writes=writes)


def _loop_name(nest_loops: list[tirx.For], realize, iv: tirx.IterVar) -> str:
    value = next(v for b, v in zip(realize.block.iter_vars, realize.iter_values) if b.same_as(iv))
    return next(loop.loop_var.name for loop in nest_loops if loop.loop_var.same_as(value))


def _shift_block(mx: MaxNest, previous, buffers: dict, first_finite: bool, finite_init: bool) -> s_tir.SBlock:
    block = mx.realize.block
    store, init = block.body, block.init
    remember = tirx.BufferStore(previous, tirx.BufferLoad(mx.buffer, list(store.indices)), list(store.indices))
    start = tirx.BufferStore(previous, init.value, list(store.indices))
    # every reason _worth_it takes a group for is a reason to walk the row in tiles: the mark says so to Tiling
    mark = OnlineShift(mx.buffer.name, previous.name, True, first_finite, finite_init)
    annotations = {**dict(block.annotations), SHIFT_KEY: shift_value(mark)}
    return _with_regions(
        replace_block(
            block, body=tirx.SeqStmt([remember, store]), init=tirx.SeqStmt([init, start]), annotations=annotations
        ),
        buffers,
    )


def _rescaled_block(s: SumNest, mx: MaxNest, previous, buffers: dict, first_finite: bool,
                    finite_init: bool) -> s_tir.SBlock:
    """`Y = if_then_else(M_prev == -inf, 0, Y * F) + t`, F = exp(c*(M_prev - M)), exactly 1 when the
    maximum did not move. While the maximum is -inf every element so far was -inf, and its term
    exp(c*(-inf - -inf)) is NaN: the sum restarts from zero (those elements add nothing once the
    maximum is finite, as in the two-pass form), or stays NaN while the row has only -inf (as the
    two-pass form's exp(-inf - -inf) is NaN). So leading masked elements, a sliding window or
    left padding, give what the input gives; with `first_finite` it never fires: not written. With
    `finite_init` too (M starts finite, so with finite data it is finite from the first element on, and
    an all-masked row keeps the finite start: exp(0)), F needs no guard: written without it."""
    block = s.realize.block
    row = [iv.var for iv in s.rows]
    before, after = tirx.BufferLoad(previous, row), tirx.BufferLoad(mx.buffer, row)
    dtype = str(mx.buffer.dtype)
    moved = tirx.exp((before - after) * tirx.const(s.rate, dtype))
    factor = moved if finite_init else tirx.if_then_else(before == after, tirx.const(1.0, dtype), moved)
    old = tirx.BufferLoad(s.store.buffer, list(s.store.indices))
    y_dtype = str(s.store.buffer.dtype)
    scaled = old * (factor if dtype == y_dtype else tirx.Cast(y_dtype, factor))
    if not first_finite:
        restart = before == tirx.const(float("-inf"), dtype)
        scaled = tirx.if_then_else(restart, tirx.const(0.0, y_dtype), scaled)
    body = tirx.BufferStore(s.store.buffer, scaled + s.term, list(s.store.indices))
    annotations = {**dict(block.annotations), RESCALE_KEY: rescale_value(OnlineRescale(mx.buffer.name, previous.name))}
    return _with_regions(replace_block(block, body=body, annotations=annotations), buffers)


def _online_nest(mx: MaxNest, sums: list[SumNest], previous, buffers: dict, first_finite: bool,
                 finite_init: bool) -> tirx.Stmt:
    """for rows: for j: [max block; for extras: sum block ...]"""
    row_vars = [tirx.Var(_loop_name(mx.loops, mx.realize, iv), "int32") for iv in mx.rows]
    j = tirx.Var(_loop_name(mx.loops, mx.realize, mx.axis), str(mx.axis.var.ty.dtype))

    def realize_of(realize, block, rows: list[tirx.IterVar], extra_vars: dict) -> s_tir.SBlockRealize:
        values = []
        for iv in block.iter_vars:
            if iv.iter_type == REDUCE:
                values.append(j)
            elif any(iv.same_as(r) for r in rows):
                values.append(row_vars[next(k for k, r in enumerate(rows) if iv.same_as(r))])
            else:
                values.append(extra_vars[iv.var.__chandle__()])
        return s_tir.SBlockRealize(values, realize.predicate, block)

    body = [realize_of(mx.realize, _shift_block(mx, previous, buffers, first_finite, finite_init), mx.rows, {})]
    for s in sums:
        extra_vars = {iv.var.__chandle__(): tirx.Var(_loop_name(s.loops, s.realize, iv), "int32") for iv in s.extra}
        rescaled = _rescaled_block(s, mx, previous, buffers, first_finite, finite_init)
        stmt = realize_of(s.realize, rescaled, s.rows, extra_vars)
        for iv in reversed(s.extra):
            stmt = tirx.For(extra_vars[iv.var.__chandle__()], iv.dom.min, iv.dom.extent, tirx.ForKind.SERIAL, stmt)
        body.append(stmt)
    stmt = tirx.For(j, mx.axis.dom.min, mx.axis.dom.extent, tirx.ForKind.SERIAL, tirx.SeqStmt(body))
    for var, iv in reversed(list(zip(row_vars, mx.rows))):
        stmt = tirx.For(var, iv.dom.min, iv.dom.extent, tirx.ForKind.SERIAL, stmt)
    return stmt


def _rewrite(func, mx: MaxNest, sums: list[SumNest], first_finite: bool, finite_init: bool) -> tirx.PrimFunc:
    root = root_block(func)
    taken = {b.name for b in root.alloc_buffers} | {p.name for p in func.params if tirx.is_buffer_var(p)}
    previous = tirx.decl_buffer(
        mx.buffer.shape, mx.buffer.dtype, unique_name(f"{mx.buffer.name}_prev", taken), layout=None
    )
    statements = top_level_statements(func)
    moved = {s.index for s in sums}
    buffers = {b: b for b in [*func.params, *root.alloc_buffers, previous] if tirx.is_buffer_var(b)}
    body = []
    for index, stmt in enumerate(statements):
        if index == mx.index:
            body.append(_online_nest(mx, sums, previous, buffers, first_finite, finite_init))
        elif index not in moved:
            body.append(stmt)
    allocs = []
    for buf in root.alloc_buffers:
        allocs.append(buf)
        if buf.same_as(mx.buffer):
            allocs.append(previous)
    if not any(buf.same_as(mx.buffer) for buf in root.alloc_buffers):
        allocs.append(previous)
    block = replace_block(root, body=body[0] if len(body) == 1 else tirx.SeqStmt(body), alloc_buffers=allocs)
    return with_root_block(func, block)


# --- the pass --------------------------------------------------------------------------------------
def _try_group(func, index: int, decisions: list[str], spec: GpuSpec) -> tirx.PrimFunc | None:
    mx = max_nest(top_level_statements(func)[index], index)
    name = mx.realize.block.name_hint
    try:
        inlined_func, inlined = _inline_exponentials(func, mx)
        mx, sums, left = _group(inlined_func, _index_of(inlined_func, name))
        reason = _worth_it(inlined_func, mx, sums, spec)
        if reason is None:
            decisions.append(
                f"{name}: not online: its rows fit in one tile and no sum is a contraction over {mx.axis.var.name}"
            )
            return None
    except _Refused as why:
        decisions.append(f"{name}: not online: {why}")
        return None
    summed = ", ".join(s.realize.block.name_hint for s in sums)
    note = f" (inlined {', '.join(inlined)} first)" if inlined else ""
    element = _update_operand(mx.realize.block.body, tirx.Max)
    first_finite, why = first_element_finite(inlined_func, mx.realize.block, element, mx.axis)
    restart = "no restart: " if first_finite else "the sums restart where the maximum was -inf: "
    decisions.append(f"{name}: online with {summed} over {mx.axis.var.name}{note}: {reason}; one pass over the row; "
                     f"{restart}{why}" + (f"; left reading the final maximum: {'; '.join(left)}" if left else ""))
    return _rewrite(inlined_func, mx, sums, first_finite, first_finite and finite_constant(mx.realize.block.init.value))


def _index_of(func, block_name: str) -> int:
    return next(
        i
        for i, stmt in enumerate(top_level_statements(func))
        if any(b.name_hint == block_name for b in blocks_under(stmt))
    )


def online_softmax(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    decisions: list[str] = []
    index = 0
    while index < len(top_level_statements(func)):
        if max_nest(top_level_statements(func)[index], index) is not None:
            rewritten = _try_group(func, index, decisions, spec)
            if rewritten is not None:
                func = rewritten
        index += 1
    if not decisions:
        return func
    root = root_block(func)
    return with_root_block(func, replace_block(root, annotations={**dict(root.annotations), DECISIONS_KEY: decisions}))


def OnlineSoftmax(gpu: str = "H200", limits=None):
    spec = gpu_spec(gpu, limits)
    return s_tir_pass("OnlineSoftmax", lambda func: online_softmax(func, spec))
