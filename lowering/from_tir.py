"""Lower a tiled S-TIR PrimFunc to a TileProgram: one kernel per statement under the root block.

Inside a kernel, every block is lowered the same way (no pattern library): its iteration
variables become tile expressions over the kernel's axes (kernel_scope.py), every access becomes
an offset with a mask (accesses.py), every expression the same expression on tiles (exprs.py).
Reductions accumulate in registers: accumulators (and the states of arg-max-like selections)
open before the outermost serial loop that walks the reduction and are stored after it
(reductions.py). Intermediates used by one kernel only stay in registers when every read uses
the index it was written with; intermediates shared by kernels go through global scratch tensors
that the launcher allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import astuple, dataclass, replace

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.assumptions import is_assumption
from tir_passes.errors import UnsupportedConstructError
from tir_passes.analyses.nest import conjuncts
from tir_passes.infra.names import python_name
from tir_passes.infra.pass_util import root_block, source_line, static_int, top_level_statements
from tir_passes.contracts.tile_contract import (GRID, ContractError, KernelTile, deterministic_promise, kernel_tile,
                                               loop_tile, scan_mark)
from tir_passes.contracts.tile_root import backend_limits
from tir_passes.analyses.tile_window import WalkedAxis, interior_range, window_implies

from lowering.rules import reductions
from lowering.rules.accesses import AccessMask, Condition, needs_int64, offset_expr, plan_mask
from lowering.rules.exprs import cast, check_dtype, fold_binary, lower_expr
from lowering.rewrites.hoist_loads import hoist_invariant_loads
from lowering.rewrites.prefetch_loads import prefetch_fields, prefetch_row_loads
from lowering.rewrites.sums_together import sums_together
from lowering.matmul_precision import HIGHEST
from lowering.rules.kernel_scope import TILE_ARITHMETIC, KernelScope, build_scope, window_names
from lowering.rewrites.param_reads import with_reads
from lowering.rules.scans import ScanState
from lowering.rules.param_shapes import shape_entry
from lowering.tile_ir import (Assign, Barrier, Binary, BufferArg, Comment, Const, Expr, Load, Loop, ParamSpec, Reg,
                               Scalar, ScalarArg, ScratchBuffer, SelectCombine, Store, TileKernel, TileProgram)


def lower_program(
    func: tirx.PrimFunc,
    name: str,
    source_hash: str = "",
    passes: tuple[str, ...] = (),
    float32_matmul_precision: str = HIGHEST,
) -> TileProgram:
    params = tuple(_param_spec(func, p) for p in func.params)
    shape_vars = _shape_var_names(func)
    statements = top_level_statements(func)
    records = [kernel_tile(stmt) or KernelTile() for stmt in statements]
    intermediates = root_block(func).alloc_buffers
    scratch_bufs = [b for b in intermediates if _needs_memory(b.name, statements, records)]
    globals_ = [p for p in func.params if tirx.is_buffer_var(p)] + scratch_bufs
    scalars = {p.name: p for p in func.params if not tirx.is_buffer_var(p)}
    kernels, combines = [], []
    for index, (stmt, record) in enumerate(zip(statements, records)):
        lowering = KernelLowering(
            func, f"{python_name(name)}_kernel{index}", globals_, record, scalars, shape_vars, float32_matmul_precision
        )
        kernels.append(replace(lowering.lower(stmt), deterministic=deterministic_promise(func)))
        combines += [c for c in lowering.combines if c not in combines]
    scratch = tuple(
        ScratchBuffer(b.name, str(b.dtype), tuple(_lower_shape_scalar(d) for d in b.shape)) for b in scratch_bufs
    )
    params = with_reads(params, func, tuple(kernels))
    return TileProgram(
        python_name(name),
        params,
        tuple(shape_vars),
        scratch,
        tuple(kernels),
        source_hash,
        passes,
        tuple(combines),
        deterministic_promise(func),
        float32_matmul_precision,
    )


def _needs_memory(buffer: str, statements, records: list[KernelTile]) -> bool:
    """An intermediate lives only in registers when one kernel uses it and holds it there."""
    users = [index for index, stmt in enumerate(statements) if _accesses_buffer(stmt, buffer)]
    return not (len(users) == 1 and buffer in records[users[0]].registers)


def _accesses_buffer(stmt, buffer: str) -> bool:
    found: list = []

    def note(node):
        buf = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if buf.name == buffer:
            found.append(node)

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, note), (tvm.ir.TensorLoad, note)])
    return bool(found)


def _param_spec(func: tirx.PrimFunc, param) -> ParamSpec:
    if not tirx.is_buffer_var(param):
        return ParamSpec(param.name, "scalar", str(param.ty.dtype))
    written = set()
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda s: written.add(s.buffer.name)))
    shape = tuple(shape_entry(param, axis, d) for axis, d in enumerate(param.shape))
    return ParamSpec(param.name, "buffer", str(param.dtype), shape, param.name in written)


def _shape_var_names(func: tirx.PrimFunc) -> list[str]:
    names: list[str] = []
    for param in func.params:
        if tirx.is_buffer_var(param):
            for dim in param.shape:
                found: list = []
                tvm_ffi.structural_walk(dim, (tirx.Var, found.append))
                names += [v.name for v in found if v.name not in names]
    return names


def _lower_shape_scalar(expr) -> Expr:
    if isinstance(expr, tirx.IntImm):
        return Const(int(expr.value), "int32")
    if isinstance(expr, tirx.Var):
        return Scalar(expr.name, "int32")
    ops = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod"}
    if type(expr) in ops:  # a count of tiles of a shape variable (RowPartials' partials: cdiv(rows, 64))
        return Binary(ops[type(expr)], _lower_shape_scalar(expr.a), _lower_shape_scalar(expr.b), "int32", ())
    raise UnsupportedConstructError(f"scratch buffer dimension {expr} must be a constant, a shape variable or "
                                    "+ - * // % of them")


def _key_of(loop: tirx.For) -> int:
    return loop.loop_var.__chandle__()


# The statement rules, one per TIR statement type, at the two places a statement can stand: between
# a kernel's loops (outside any block body) and inside a block's body. The capability check
# (support.py) accepts exactly these, so nothing passes it that the lowering then refuses.
KERNEL_STATEMENTS: dict[type, "StatementRule"] = {}
BODY_STATEMENTS: dict[type, "StatementRule"] = {}


@dataclass(frozen=True)
class StatementRule:
    lower: Callable  # (KernelLowering, stmt[, guards]) -> None
    text: str  # what users write, for the capability check's messages and docs ("": implied)


def statement_rule(table: dict, node_type: type, text: str):
    def register(method):
        assert node_type not in table, f"two rules for {node_type.__name__}"
        table[node_type] = StatementRule(method, text)
        return method

    return register


def statements_text(table: dict) -> str:
    return ", ".join(dict.fromkeys(rule.text for rule in table.values() if rule.text))


class KernelLowering:
    """Lowers one kernel: holds its scope, the statements emitted so far and its registers."""

    def __init__(self, func, name, global_buffers, record: KernelTile, scalar_params, shape_vars,
                 float32_matmul_precision: str = HIGHEST):
        self.func = func
        self.float32_matmul_precision = float32_matmul_precision
        self.name = name
        self.global_buffers = {b.name: b for b in global_buffers}
        self.record = record
        self.pending_sync = False  # a store to a spilled buffer since the last barrier
        self.scalar_params = scalar_params
        self.shape_vars = set(shape_vars)
        self.used_buffers: list[str] = []
        self.used_scalars: list[str] = []
        self.registers: dict[tuple, Reg] = {}  # (buffer, lowered indices) -> register value
        self.emitted: list[list] = [[]]
        self.block_names: list[str] = []
        self.block_env: dict[int, Expr] = {}
        self.conditions: list[Condition] = []
        self.location = name
        self.scope: KernelScope | None = None
        self.reductions = reductions.ReductionState()
        self.scans = ScanState()
        self.combines: list[SelectCombine] = []  # generated functions this kernel calls, first use first
        self.counter = 0
        self.realize = None  # the block being lowered
        self.interior = None  # in a window's interior tiles: condition -> its value there (True/False/None)

    # --- the walk ----------------------------------------------------------------------
    def lower(self, stmt: tirx.Stmt) -> TileKernel:
        self.location = source_line(stmt) or self.name
        self.scope, body = build_scope(stmt, self.lower_scalar, self.location)
        self._bind_all_blocks(stmt)
        self.lower_stmt(body)
        return TileKernel(
            name=self.name,
            source_blocks=tuple(self.block_names),
            buffers=tuple(
                BufferArg(n, str(self.global_buffers[n].dtype), len(self.global_buffers[n].shape))
                for n in self._ordered_buffers()
            ),
            scalars=tuple(ScalarArg(n, self._scalar_dtype(n), python_name(n)) for n in self.used_scalars),
            dims=tuple(self.scope.dims), grid=tuple(self.scope.grid),
            group_m=self.record.group_m, num_warps=self.record.num_warps, num_stages=self.record.num_stages,
            body=sums_together(prefetch_row_loads(hoist_invariant_loads(tuple(self.emitted[0]), self.fresh),
                                                  self.fresh), self.fresh),
            int64_buffers=tuple(n for n in self._ordered_buffers() if needs_int64(self.global_buffers[n])),
            pins=tuple(map(astuple, self.record.pins)), floors=tuple(map(astuple, self.record.floors)),
            dot_min_block=getattr(backend_limits(self.func), "dot_min_block", TileKernel.dot_min_block),
            persistent=self.record.persistent, programs_per_sm=self.record.programs_per_sm,
        )

    def _ordered_buffers(self) -> list[str]:
        return [n for n in self.global_buffers if n in self.used_buffers]

    def _scalar_dtype(self, name: str) -> str:
        param = self.scalar_params.get(name)
        return str(param.ty.dtype) if param is not None else "int32"

    def _bind_all_blocks(self, stmt) -> None:
        realizes: list = []
        tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, realizes.append))
        for realize in realizes:
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                self.scope.analyzer.bind(iv.var, value)

    def emit(self, stmt) -> None:
        self.emitted[-1].append(stmt)

    def use_combine(self, combine: SelectCombine) -> None:
        if combine not in self.combines:
            self.combines.append(combine)

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{python_name(base)}_{self.counter}"

    def lower_stmt(self, stmt) -> None:
        rule = KERNEL_STATEMENTS.get(type(stmt))
        if rule is None:
            raise UnsupportedConstructError(
                f"{source_line(stmt) or self.location}: statement {type(stmt).__name__} "
                f"`{str(stmt).strip()[:80]}` has no Triton mapping here (supported around "
                f"blocks: {statements_text(KERNEL_STATEMENTS)})"
            )
        rule.lower(self, stmt)

    @statement_rule(KERNEL_STATEMENTS, tirx.SeqStmt, "")
    def _lower_seq(self, stmt: tirx.SeqStmt) -> None:
        for child in stmt.seq:
            self.lower_stmt(child)
            self._sync_if_pending()

    @statement_rule(KERNEL_STATEMENTS, tirx.For, "for loops of known extent")
    def _lower_for(self, loop: tirx.For) -> None:
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            raise UnsupportedConstructError(
                f"{source_line(loop) or self.location}: loop {loop.loop_var.name} is bound "
                "to a GPU thread; the Triton path expects a Tiling-annotated nest, not a CUDA schedule"
            )
        plan = self.scope.plan(loop)
        if plan.kind == "tile":
            self.lower_stmt(loop.body)
            return
        if plan.kind == GRID:
            raise ContractError(f"loop {loop.loop_var.name}", "a grid loop must be among the kernel's outermost loops")
        opened = self.reductions.open_for_loop(self, loop)
        carries = self.scans.open_for_loop(self, loop)
        start = (plan.first or Const(0, "int32")) if plan.partner_of else self.lower_scalar(loop.min)
        stop = plan.count if plan.partner_of else fold_binary("+", start, plan.count, "int32", ())
        segments, entered = [(start, stop, None)], self._entered(loop)
        if plan.first is not None:  # a windowed walk: its bounds named, as the TileWindow says them
            first, last = window_names(plan.name)
            start = start if isinstance(start, Const) else self._named_bound(first, start)
            stop = self._named_bound(last, stop)
            segments = self._window_segments(loop, plan, start, stop)
        for seg_start, seg_stop, interior in segments:
            self.emitted.append([])
            self.interior = interior
            self.lower_stmt(loop.body)
            self.interior = None
            if plan.carries:  # the next iteration reads what this one stored
                self.emit(Barrier(f"loop {plan.name} carries a dependence through {', '.join(plan.carries)}"))
            body = self.emitted.pop()
            if interior is not None:
                self.emit(Comment(f"tiles of {plan.partner_of} inside the window for every row: no window mask"))
            prefetch = prefetch_fields(plan.prefetch)
            self.emit(Loop(plan.name, seg_start, seg_stop, tuple(body), entered=entered, **prefetch))
        self.reductions.close(self, opened)
        self.scans.close(carries)
        self._sync_if_pending()

    def _entered(self, loop: tirx.For) -> bool:
        """Every program runs `loop`: a positive extent, constant or proven from the grid's ranges
        (causal attention's key loop is `i_0 // 16 + 1` after Tiling)."""
        extent = static_int(loop.extent)
        return extent > 0 if extent is not None else bool(self.scope.analyzer.can_prove(loop.extent > 0))

    def _window_segments(self, loop: tirx.For, plan, start, stop) -> list[tuple]:
        """A windowed walk as up to three loops over its tiles: those the window's masks cut (the
        diagonal tiles of causal attention), those wholly inside the window for every row of the
        row tile, whose selects on j - r are decided (tile_window.window_implies: no mask), and the
        cut ones past them. Each is the same body; the accumulators run through all three."""
        window = loop_tile(loop).window
        inner = next((p for p in self.scope.plans.values() if p.kind == "tile" and p.name == plan.partner_of), None)
        plans = list(self.scope.plans.values())
        rows_outer = next((p for p in plans if p.partner_of == window.rows and p.kind == GRID), None)
        rows, cols = self.scope.dim(window.rows), self.scope.dim(plan.partner_of)
        if inner is None or rows_outer is None or rows is None or cols is None:
            return [(start, stop, None)]
        first, last = interior_range(
            window,
            Scalar(rows_outer.name, "int32"),
            Scalar(rows.block, "int32"),
            Scalar(cols.block, "int32"),
            start,
            stop,
            TILE_ARITHMETIC,
            name_first=lambda value: self._named_bound(f"{plan.name}_inside", value),
        )
        if window.high is not None:
            last = self._named_bound(f"{plan.name}_past", last)
        walk = WalkedAxis(loop, inner.loop, cols.default)
        enclosing = [p.loop for p in self.scope.plans.values()]
        tiles = {_key_of(p.loop): loop_tile(p.loop) for p in self.scope.plans.values()}

        def decided(condition):
            return window_implies(condition, self.realize, walk, enclosing, tiles, window)

        segments = [(start, first, None)] if window.low is not None else []
        segments.append((first, last, decided))
        if window.high is not None:
            segments.append((last, stop, None))
        return segments

    def _named_bound(self, name: str, value) -> Scalar:
        self.emit(Assign(name, value, "int32", ()))
        return Scalar(name, "int32")

    def _sync_if_pending(self) -> None:
        if self.pending_sync:
            self.emit(Barrier(f"{', '.join(self.record.spilled)} went through memory: later reads see the stores"))
            self.pending_sync = False

    # --- blocks ---------------------------------------------------------------------------
    @statement_rule(KERNEL_STATEMENTS, s_tir.SBlockRealize, "T.sblock blocks")
    def _lower_realize(self, realize: s_tir.SBlockRealize) -> None:
        block = realize.block
        if block.alloc_buffers or block.match_buffers:
            raise UnsupportedConstructError(
                f"{self.location}: block '{block.name_hint}' allocates or matches buffers; "
                "only the root block may allocate"
            )
        self.block_names.append(block.name_hint)
        self.location = self._block_location(block)
        self.emit(Comment(f"block {block.name_hint}" + (f" ({self.location})" if ":" in self.location else "")))
        with self.block_context(realize):
            if scan_mark(block) is not None:
                self.scans.lower_block(self, realize)
            elif any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
                self.reductions.lower_block(self, realize)
            else:
                if block.init is not None:
                    raise UnsupportedConstructError(
                        f"{self.location}: block '{block.name_hint}' has T.init but no reduction axis"
                    )
                self.lower_body(block.body)

    @statement_rule(BODY_STATEMENTS, tirx.Evaluate, "T.assume")
    @statement_rule(KERNEL_STATEMENTS, tirx.Evaluate, "T.assume")
    def _lower_evaluate(self, stmt: tirx.Evaluate, guards: tuple = ()) -> None:
        if not is_assumption(stmt):  # support.py names what else an Evaluate may be
            raise UnsupportedConstructError(
                f"{source_line(stmt) or self.location}: `{str(stmt).strip()[:80]}` "
                "evaluates a value for no effect; it has no Triton mapping"
            )
        # a fact for the bounds proofs (accesses.py), no run-time effect

    def _block_location(self, block) -> str:
        stores: list = []
        tvm_ffi.structural_walk(block.body, (tirx.BufferStore, stores.append))
        line = source_line(stores[0]) if stores else None
        return line or f"{self.name}, block '{block.name_hint}'"

    @contextmanager
    def block_context(self, realize):
        """While lowering one block: its variables' tile expressions, its conditions, its
        predicate as an analyzer fact, and its line for messages (also where a reduction's
        registers open, before the walk reaches the block)."""
        saved = (self.block_env, self.conditions, self.location, self.realize)
        self.location = self._block_location(realize.block)
        self.realize = realize
        self.block_env = {
            iv.var.__chandle__(): lower_expr(self, value)
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
        }
        self.conditions = self.block_conditions(realize)
        try:
            with self.scope.analyzer.constraint_scope(realize.predicate):
                yield
        finally:
            self.block_env, self.conditions, self.location, self.realize = saved

    def block_conditions(self, realize) -> list[Condition]:
        """The tails of its tile axes, from the contract (LoopTile.extent), then its predicate's other
        conjuncts: the copy of a tail TVM's split wrote there (in `_tail_condition`'s TIR form, proven
        by the contract check) is not lowered again."""
        conditions: list[Condition] = []
        for dim in self.scope.dims:
            if dim.even:
                continue
            # several loops may share one axis (whole-row tiles of sub-nests): the block's own counts
            plan = next((p for p in self.scope.plans.values()
                         if p.kind == "tile" and p.name == dim.name and self._block_uses_loop(realize, p.loop)), None)
            if plan is not None:
                conditions.append(self._tail_condition(plan, dim))
        tails = list(conditions)
        for cond in conjuncts(realize.predicate):
            if any(tvm_ffi.structural_equal(cond, tail.tir) for tail in tails):
                continue
            tile = lower_expr(self, cond)
            if all(tile != c.tile for c in conditions[len(tails):]):   # the user's own conditions, once each
                conditions.append(Condition(cond, tile))
        return conditions

    def _block_uses_loop(self, realize, loop) -> bool:
        found: list = []
        for value in realize.iter_values:
            tvm_ffi.structural_walk(value, (tirx.Var, found.append))
        return any(v.same_as(loop.loop_var) for v in found)

    def _tail_condition(self, plan, dim) -> Condition:
        """The tile axis's tail mask, with its TIR form (`outer * B + inner < extent`) for proofs."""
        loop = plan.loop
        outer = next((p.loop for p in self.scope.plans.values() if p.partner_of == dim.name), None)
        position = loop.loop_var if outer is None else outer.loop_var * loop.extent + loop.loop_var
        return Condition(position < loop_tile(loop).extent, dim.tail)

    def lower_body(self, stmt, guards: tuple = ()) -> None:
        rule = BODY_STATEMENTS.get(type(stmt))
        if rule is None and isinstance(stmt, s_tir.SBlockRealize):
            raise UnsupportedConstructError(f"{self.location}: nested blocks are not supported")
        if rule is None:
            raise UnsupportedConstructError(
                f"{source_line(stmt) or self.location}: statement {type(stmt).__name__} "
                f"`{str(stmt).strip()[:80]}` has no Triton mapping in a block's body "
                f"(supported: {statements_text(BODY_STATEMENTS)})"
            )
        rule.lower(self, stmt, guards)

    @statement_rule(BODY_STATEMENTS, tirx.SeqStmt, "")
    def _body_seq(self, stmt: tirx.SeqStmt, guards: tuple) -> None:
        for child in stmt.seq:
            self.lower_body(child, guards)

    @statement_rule(BODY_STATEMENTS, tirx.BufferStore, "buffer stores")
    def _body_store(self, stmt: tirx.BufferStore, guards: tuple) -> None:
        self.store(stmt, lower_expr(self, stmt.value, guards), guards)

    @statement_rule(BODY_STATEMENTS, tirx.Bind, "let bindings")
    def _body_bind(self, stmt: tirx.Bind, guards: tuple) -> None:
        """`v: T.let = value`: later statements read v as the value."""
        self.block_env[stmt.var.__chandle__()] = lower_expr(self, stmt.value, guards)

    @statement_rule(BODY_STATEMENTS, tirx.IfThenElse, "if/else")
    def _body_if(self, stmt: tirx.IfThenElse, guards: tuple) -> None:
        self.lower_body(stmt.then_case, guards + (stmt.condition,))
        if stmt.else_case is not None:
            self.lower_body(stmt.else_case, guards + (tirx.Not(stmt.condition),))

    @statement_rule(BODY_STATEMENTS, tirx.For, "for loops of known extent")
    def _body_for(self, stmt: tirx.For, guards: tuple) -> None:
        self._lower_for(stmt)

    # --- ExprContext ----------------------------------------------------------------------
    def where(self) -> str:
        return self.location

    def merge_dims(self, *dims_list: tuple[str, ...]) -> tuple[str, ...]:
        present = {d for dims in dims_list for d in dims}
        if self.scope is None:  # loop extents, lowered while the scope is built, are scalars
            assert not present, f"tile axes {present} before the kernel's axes exist"
            return ()
        return tuple(d for d in self.scope.dim_order() if d in present)

    def proven_non_negative(self, expr) -> bool:
        if self.scope is None:  # a loop extent (rows // 64), lowered while the scope is built: no bounds yet
            return False
        return bool(self.scope.analyzer.can_prove(expr >= 0))

    def variable(self, var: tirx.Var) -> Expr:
        key = var.__chandle__()
        if key in self.block_env:
            return self.block_env[key]
        substitute = self.scope.substitute(var) if self.scope else None
        if substitute is not None:
            return substitute
        if var.name in self.scalar_params or var.name in self.shape_vars:
            if var.name not in self.used_scalars:
                self.used_scalars.append(var.name)
            return Scalar(python_name(var.name), str(var.ty.dtype))
        raise UnsupportedConstructError(
            f"{self.location}: variable {var.name} is not a loop, block or parameter variable"
        )

    def lower_scalar(self, expr) -> Expr:
        if isinstance(expr, int):  # annotation values arrive as Python ints
            return Const(int(expr), "int32")
        return lower_expr(self, expr)

    def indices(self, indices, guards) -> list[Expr]:
        return [lower_expr(self, i, guards) for i in indices]

    def access_conditions(self, buf, indices_tir, dims, guards) -> AccessMask:
        conditions = self.conditions + [Condition(g, lower_expr(self, g)) for g in guards]
        access = f"{self.location}: {buf.name}[{', '.join(map(str, indices_tir))}]"
        return plan_mask(
            access,
            conditions,
            dims,
            indices_tir,
            buf.shape,
            self.scope.analyzer,
            self.func,
            lambda cond: lower_expr(self, cond, guards),
        )

    def load(self, load: tvm.ir.TensorLoad, guards: tuple) -> Expr:
        buf = load.source
        indices = self.indices(load.indices, guards)
        register = self.registers.get((buf.name, tuple(indices)))
        if register is not None:
            return register
        if buf.name in self.record.registers and any(key[0] == buf.name for key in self.registers):
            raise ContractError(
                self.location,
                f"{buf.name} is held in registers, but this read "
                f"[{', '.join(map(str, load.indices))}] is not the element its write produced",
            )
        if buf.name not in self.global_buffers:
            raise ContractError(
                self.location,
                f"{buf.name} lives only in registers of the kernel that writes it, "
                "but this kernel reads it before any write",
            )
        check_dtype(str(buf.dtype), f"buffer {buf.name}", self.location)
        self._use_buffer(buf.name)
        dims = self.merge_dims(*(i.dims for i in indices))
        offset = offset_expr(indices, buf.name, needs_int64(buf), self.merge_dims)
        chosen = self.access_conditions(buf, list(load.indices), dims, guards)
        mask = tuple(c.tile for c in chosen.conditions)
        dims = self.merge_dims(dims, *(m.dims for m in mask))
        offset = self._broadcast_offset(offset, dims)
        return Load(buf.name, offset, mask, str(buf.dtype), dims, chosen.checks)

    def _broadcast_offset(self, offset: Expr, dims: tuple[str, ...]) -> Expr:
        missing = tuple(d for d in dims if d not in offset.dims)
        if not missing:
            return offset
        return Binary("+", offset, Const(0, offset.dtype, missing), offset.dtype, dims)

    def _use_buffer(self, name: str) -> None:
        if name not in self.used_buffers:
            self.used_buffers.append(name)

    def store(self, store: tirx.BufferStore, value: Expr, guards: tuple = ()) -> None:
        buf = store.buffer
        indices = self.indices(store.indices, guards)
        dims = self.merge_dims(*(i.dims for i in indices))
        if not set(value.dims) <= set(dims):
            extra = ", ".join(d for d in value.dims if d not in dims)
            raise UnsupportedConstructError(
                f"{self.location}: the value stored to {buf.name} varies along tile axes "
                f"({extra}) that its index does not; is a reduction axis marked spatial?"
            )
        value = value if value.dtype == str(buf.dtype) else cast(value, str(buf.dtype))
        if buf.name in self.record.registers:
            if guards:
                raise ContractError(self.location, f"{buf.name} is held in registers, but its write is conditional")
            name = self.fresh(buf.name)
            self.emit(Assign(name, value, str(buf.dtype), dims))
            self.registers[(buf.name, tuple(indices))] = Reg(name, str(buf.dtype), dims)
            if buf.name not in self.global_buffers:
                return
            value = self.registers[(buf.name, tuple(indices))]
        self._use_buffer(buf.name)
        offset = offset_expr(indices, buf.name, needs_int64(buf), self.merge_dims)
        chosen = self.access_conditions(buf, list(store.indices), dims, guards)
        outside = [c for c in chosen.conditions if not set(c.dims) <= set(dims)]
        if outside:
            raise UnsupportedConstructError(
                f"{self.location}: the store to {buf.name} is guarded by `{outside[0].tir}`, "
                "which varies along axes its index does not"
            )
        self.emit(Store(buf.name, offset, value, tuple(c.tile for c in chosen.conditions), chosen.checks))
        self.pending_sync = self.pending_sync or buf.name in self.record.spilled
