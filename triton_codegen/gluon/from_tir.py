"""Thread-bound S-TIR (a CUDA-style schedule with shared staging) -> GluonProgram.

What it accepts, and how each part maps:

- the kernel: blockIdx-bound loops directly under the root block (program ids 0, 1, 2 for x, y,
  z); every threadIdx-bound loop below fixes the kernel's threads (num_warps = threads / 32);
- a loop that holds several blocks is sequential (a Python `for` in the kernel: the k loop of a
  matmul); it must be serial, and it is hoisted out of the thread loops around it, which is
  what running every thread's copy of it in lockstep means (TIR's thread loops are independent);
- every other loop above a block is one of the block's tile loops; the block then becomes one
  statement over its box (ir.Box: the tile of its iteration variables one kernel step covers),
  laid out over the threads as the loops bind them (layouts.py);
- a block writing a shared buffer stores its whole tile (the staging copy: the tile's origin and
  shape are that block's box); a block reading one loads the whole tile; the shared layout is
  BankConflictFreeTiling's decision, read from the staging block;
- `C[..] = C[..] + A_shared[..] * B_shared[..]` reducing over k (after decompose_reduction, with
  its init block) is a contraction: the accumulator stays in registers across the sequential
  loop and is stored once at the end; tensor cores (warpgroup_mma) when the pass gave both
  operands the NVMMA layout, CUDA cores (dot_fma) otherwise.

Everything else raises UnsupportedConstructError naming the construct and its TVMScript line.
"""

from __future__ import annotations

import random

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx

from lowering.rules.exprs import check_dtype, dtype_of, lower_expr
from lowering.tile_ir import Const, Reg, Scalar
from tir_passes.passes.bank_conflict_free_tiling import contraction_operands
from tir_passes.errors import UnsupportedConstructError
from tir_passes.infra.pass_util import root_block, source_line
from tir_passes.contracts.shared_layout import NVMMA, decision_of

from .ir import (Box, Compute, Contract, GlobalLoad, GluonKernelIR, GluonProgram, InitAccumulator, LinearLayout, Loop,
                 MmaLayout, Param, SharedLoad, SharedTile, StoreAccumulator)
from .layouts import LoopSpace, as_blocked, evaluator, thread_tag

GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
WARP = 32


def _where(node, what: str) -> str:
    line = source_line(node)
    return f"{what} ({line})" if line else what


def _blocks_in(stmt) -> list[s_tir.SBlock]:
    found: list = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, lambda r: found.append(r.block)))
    return found


class _KernelLowering:
    """Lowers one kernel (the statement under the root block)."""

    def __init__(self, func: tirx.PrimFunc, shared: dict[str, SharedTile], name: str):
        self.func = func
        self.shared = shared
        self.name = name
        self.grid: list[tuple[tirx.Var, int, str]] = []
        self.sequential: list[tuple[tirx.Var, int]] = []
        self.threads: dict[str, int] = {}
        self.accumulators: dict[str, Box] = {}
        self.acc_dtype: dict[str, str] = {}
        self.tile_origin: dict[str, tuple] = {}    # shared buffer -> TIR offsets of its staging box
        self.buffers: dict[str, tirx.Buffer] = {}
        self.counter = 0

    # --- the kernel's frame --------------------------------------------------------------------
    def lower(self, stmt) -> GluonKernelIR:
        body = stmt
        while isinstance(body, tirx.For) and body.kind == tirx.ForKind.THREAD_BINDING and \
                str(body.thread_binding.thread_tag) in GRID_TAGS:
            self.grid.append((body.loop_var, int(body.extent.value), str(body.thread_binding.thread_tag)))
            body = body.body
        if not self.grid:
            raise UnsupportedConstructError(_where(stmt, "the kernel") + ": the Gluon backend needs the kernel's "
                                            "outer loops bound to blockIdx (a CUDA-style schedule)")
        self._collect_threads(body)
        self.contractions = {b.name_hint: b for b in _blocks_in(body) if contraction_operands(b) is not None}
        accumulated = {b.writes[0].source.name for b in self.contractions.values()}
        self.accumulated = accumulated
        statements = self._walk(body, [])
        stores = tuple(self._store_accumulator(name) for name in sorted(self.accumulators))
        grid = tuple((var.name, extent) for var, extent, _ in sorted(self.grid, key=lambda g: g[2]))
        return GluonKernelIR(f"{self.name}_kernel", grid, max(1, self._thread_count() // WARP),
                             tuple(self.shared.values()), tuple(sorted(self.accumulators.items())),
                             tuple(statements) + stores,
                             tuple(p.name for p in self.func.params if p.name in self.buffers))

    def _collect_threads(self, body) -> None:
        def visit(loop):
            tag = thread_tag(loop)
            if tag is None:
                return
            extent = int(loop.extent.value)
            if self.threads.setdefault(tag, extent) != extent:
                raise UnsupportedConstructError(_where(loop, f"loop {loop.loop_var.name}") + f": {tag} has extents "
                                                f"{self.threads[tag]} and {extent} in one kernel")

        tvm_ffi.structural_walk(body, (tirx.For, visit))
        if self._thread_count() % WARP:
            raise UnsupportedConstructError(f"kernel {self.name}: {self._thread_count()} threads per block; the Gluon "
                                            "backend needs whole warps (a multiple of 32)")

    def _thread_count(self) -> int:
        count = 1
        for extent in self.threads.values():
            count *= extent
        return count

    # --- the walk ------------------------------------------------------------------------------
    def _walk(self, stmt, tile_loops: list) -> list:
        if isinstance(stmt, tirx.SeqStmt):
            return [s for child in stmt.seq for s in self._walk(child, tile_loops)]
        if isinstance(stmt, tirx.For):
            if len(_blocks_in(stmt)) <= 1 or thread_tag(stmt) is not None:
                return self._walk(stmt.body, tile_loops + [stmt])
            return [self._sequential(stmt, tile_loops)]
        if isinstance(stmt, s_tir.SBlockRealize):
            return [self._block(stmt, tile_loops)]
        raise UnsupportedConstructError(_where(stmt, f"a {type(stmt).__name__} statement") +
                                        " inside a kernel has no Gluon mapping")

    def _sequential(self, loop: tirx.For, tile_loops: list) -> Loop:
        where = _where(loop, f"loop {loop.loop_var.name}")
        if loop.kind != tirx.ForKind.SERIAL or not isinstance(loop.extent, tirx.IntImm):
            raise UnsupportedConstructError(f"{where}: a loop around several blocks must be serial with a constant "
                                            "extent to become a sequential loop of the Gluon kernel")
        if any(thread_tag(t) is None for t in tile_loops):
            raise UnsupportedConstructError(f"{where}: a serial loop around it that is not thread-bound cannot be "
                                            "hoisted; make the outer serial loop hold one block or bind it")
        self.sequential.append((loop.loop_var, int(loop.extent.value)))
        body = self._walk(loop.body, tile_loops)
        return Loop(loop.loop_var.name, int(loop.extent.value), tuple(body))

    # --- one block -----------------------------------------------------------------------------
    def _block(self, realize: s_tir.SBlockRealize, tile_loops: list):
        block = realize.block
        where = _where(block, f"block {block.name_hint}")
        if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate.value) == 1):
            raise UnsupportedConstructError(f"{where}: has a predicate (a split that does not divide); the Gluon "
                                            "backend needs tiles that divide the loops")
        if block.init is not None:
            raise UnsupportedConstructError(f"{where}: a reduction with T.init(); decompose_reduction first")
        if not isinstance(block.body, tirx.BufferStore):
            raise UnsupportedConstructError(f"{where}: its body is not one buffer store")
        box, tir_offsets = self._box(realize, tile_loops, where)
        store = block.body
        if block.name_hint in self.contractions:
            return self._contract(block, box, tir_offsets, where)
        if store.buffer.name in self.accumulated:
            return self._init(block, box, where)
        return self._compute(block, box, tir_offsets, where)

    def _box(self, realize, tile_loops: list, where: str) -> tuple[Box, dict]:
        block = realize.block
        space = LoopSpace(tile_loops, self.threads, where)
        tile_vars = {loop.loop_var.__chandle__() for loop in tile_loops}
        zero = {loop.loop_var: tirx.const(0, loop.loop_var.ty.dtype) for loop in tile_loops}
        analyzer = sym.Analyzer()
        offsets, steps = [], []
        for _iv, binding in zip(block.iter_vars, realize.iter_values):
            offset = analyzer.simplify(tvm_ffi.structural_map(binding, (tirx.Var, lambda v: zero.get(v, v))))
            offsets.append(offset)
            steps.append((evaluator(binding), evaluator(offset)))
        self._check_separable(block, realize, steps, tile_vars, where)
        outer_zero = {var.__chandle__(): 0 for var in self._outer_vars()}

        def coords(values: dict) -> list[int]:
            env = {**outer_zero, **values}
            return [full(env) - base(env) for full, base in steps]

        layout = space.layout(coords, tuple(0 for _ in steps))
        extents = [1 + sum(b[d] for b in layout.reg + layout.lane + layout.warp if b[d] > 0 and
                           sum(1 for x in b if x) == 1) for d in range(len(steps))]
        self._check_bijective(layout, extents, tile_loops, where)
        kept = [d for d, e in enumerate(extents) if e > 1]
        project = lambda bases: tuple(tuple(b[d] for d in kept) for b in bases)  # noqa: E731
        projected = LinearLayout(project(layout.reg), project(layout.lane), project(layout.warp),
                                 tuple(extents[d] for d in kept))
        names = [iv.var.name for iv in block.iter_vars]
        tir_offsets = {iv.var.__chandle__(): (offsets[d], extents[d]) for d, iv in enumerate(block.iter_vars)}
        box = Box(block.name_hint, tuple(names[d] for d in kept), tuple(extents[d] for d in kept),
                  tuple(self._scalar_expr(offsets[d], where) for d in kept), projected, source_line(block))
        return box, tir_offsets

    def _outer_vars(self) -> list[tirx.Var]:
        return [var for var, _, _ in self.grid] + [var for var, _ in self.sequential]

    def _check_separable(self, block, realize, steps, tile_vars, where: str) -> None:
        """Each binding is (its value at tile loop 0) + (a function of the tile loops alone)."""
        rng = random.Random(0)
        outer = [(var, extent) for var, extent, _ in self.grid] + self.sequential
        for _ in range(4):
            env_outer = {var.__chandle__(): rng.randrange(extent) for var, extent in outer}
            env_zero = {var.__chandle__(): 0 for var, _ in outer}
            tile = {h: rng.randrange(1 << 12) for h in tile_vars}
            for full, base in steps:
                try:
                    moved = full({**env_outer, **tile}) - base({**env_outer, **tile})
                    fixed = full({**env_zero, **tile}) - base({**env_zero, **tile})
                except KeyError:
                    raise UnsupportedConstructError(f"{where}: an iteration variable depends on a loop outside "
                                                    "the kernel's grid, sequential and tile loops") from None
                if moved != fixed:
                    raise UnsupportedConstructError(f"{where}: the tile an iteration variable covers changes with "
                                                    "the program id or the sequential loop; the Gluon backend needs "
                                                    "boxes of one shape")

    @staticmethod
    def _check_bijective(layout: LinearLayout, extents: list[int], tile_loops: list, where: str) -> None:
        for basis in layout.reg:
            if sum(1 for x in basis if x) != 1:
                raise UnsupportedConstructError(f"{where}: a loop each thread runs moves more than one iteration "
                                                "variable or none; the Gluon backend needs each register to hold "
                                                "its own element")
        bits = [b for b in layout.reg + layout.lane + layout.warp if any(b)]
        if len(set(bits)) != len(bits) or any(e & (e - 1) for e in extents):
            raise UnsupportedConstructError(f"{where}: its loops do not cover a box of iteration variables one to one")

    def _scalar_expr(self, expr, where: str):
        return lower_expr(_ScalarContext(self, where), expr)

    # --- statements ----------------------------------------------------------------------------
    def _compute(self, block, box: Box, tir_offsets: dict, where: str) -> Compute:
        if len(box.dims) > 2:
            raise UnsupportedConstructError(f"{where}: its box has {len(box.dims)} varying axes; the Gluon backend "
                                            "computes boxes of at most two")
        store = block.body
        ctx = _BoxContext(self, block, box, tir_offsets, where)
        value = lower_expr(ctx, store.value)
        dtype = check_dtype(str(store.buffer.dtype), f"buffer {store.buffer.name}", where)
        if store.buffer.name in self.shared:
            permutation = self._stage_tile(store.buffer, store.indices, block, box, tir_offsets, where)
            return Compute(box, tuple(ctx.loads), _cast(value, dtype), store.buffer.name, True,
                           permutation=permutation)
        self._global(store.buffer, where)
        indices = tuple(lower_expr(ctx, index) for index in store.indices)
        return Compute(box, tuple(ctx.loads), _cast(value, dtype), store.buffer.name, False, indices,
                       ctx.masked(store.buffer, store.indices))

    def _stage_tile(self, buffer, indices, block, box: Box, tir_offsets: dict, where: str) -> tuple[int, ...]:
        """The box dim of each tile axis of the shared buffer the block writes (the staging copy);
        records the tile's origin for its readers."""
        tile = self.shared[buffer.name]
        axes, origin = _tile_axes(indices, block, box, where, buffer.name)
        extents = tuple(tir_offsets[v.__chandle__()][1] for v in indices)
        if extents != tile.shape:
            raise UnsupportedConstructError(f"{where}: writes a {list(extents)} box into shared buffer {buffer.name}, "
                                            f"whose staged tile is {list(tile.shape)}")
        self.tile_origin[buffer.name] = tuple(tir_offsets[v.__chandle__()][0] for v in indices)
        return axes

    def _init(self, block, box: Box, where: str) -> InitAccumulator:
        store = block.body
        if not isinstance(store.value, (tirx.IntImm, tirx.FloatImm, tirx.Cast)):
            raise UnsupportedConstructError(f"{where}: initializes accumulator {store.buffer.name} with a value that "
                                            "is not a constant")
        value = lower_expr(_ScalarContext(self, where), store.value)
        if not isinstance(value, Const):
            raise UnsupportedConstructError(f"{where}: the accumulator's initial value is not a constant")
        self._global(store.buffer, where)
        self.accumulators[store.buffer.name] = box
        self.acc_store = getattr(self, "acc_store", {})
        self.acc_store[store.buffer.name] = (block, store)
        self.acc_dtype[store.buffer.name] = str(store.buffer.dtype)
        return InitAccumulator(store.buffer.name, box, value, str(store.buffer.dtype))

    def _contract(self, block, box: Box, tir_offsets: dict, where: str) -> Contract:
        store = block.body
        acc = store.buffer.name
        if acc not in self.accumulators:
            raise UnsupportedConstructError(f"{where}: the contraction into {acc} has no init block before it in the "
                                            "kernel (decompose_reduction makes one)")
        a_load, b_load = contraction_operands(block)
        reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
        if len(reduce_vars) != 1 or len(store.indices) != 2:
            raise UnsupportedConstructError(f"{where}: a contraction of two 2-D tiles over one reduction axis is "
                                            "what the Gluon backend lowers")
        k = reduce_vars[0]
        m, n = store.indices
        if not all(isinstance(x, tirx.Var) for x in (m, n)):
            raise UnsupportedConstructError(f"{where}: the accumulator must be indexed by iteration variables")
        for load, expected in ((a_load, (m, k)), (b_load, (k, n))):
            if list(load.indices) != list(expected) and not all(x.same_as(y) for x, y in zip(load.indices, expected)):
                raise UnsupportedConstructError(f"{where}: {load.source.name} must be read as [m, k] (A) and [k, n] "
                                                "(B), the orientation the tensor cores take")
            origin = self.tile_origin.get(load.source.name)
            offsets = tuple(tir_offsets[v.__chandle__()][0] for v in load.indices)
            if not self.same_origin(origin, offsets):
                raise UnsupportedConstructError(f"{where}: reads {load.source.name} at another origin than the block "
                                                "that staged it")
        acc_box = self.accumulators[acc]
        contraction_box = tuple(e for d, e in zip(box.dims, box.extents) if d != k.name)
        if contraction_box != acc_box.extents:
            raise UnsupportedConstructError(f"{where}: covers a {list(contraction_box)} tile of {acc}, but its init "
                                            f"block covers {list(acc_box.extents)}")
        tensor_cores = all(self.shared[x.source.name].decision.kind == NVMMA for x in (a_load, b_load))
        layout = self._mma_layout(acc_box, where) if tensor_cores else self._fma_layout(box, k.name, where)
        self.accumulators[acc] = Box(acc_box.block, acc_box.dims, acc_box.extents, acc_box.offsets, layout,
                                     acc_box.line)
        return Contract(acc, a_load.source.name, b_load.source.name, "wgmma" if tensor_cores else "fma",
                        source_line(block))

    def _mma_layout(self, acc_box: Box, where: str) -> MmaLayout:
        warps = self._thread_count() // WARP
        m, n = acc_box.extents
        if warps % 4 or m % (16 * warps) or n % 8 or n > 256:
            raise UnsupportedConstructError(f"{where}: a {m}x{n} tensor-core tile with {warps} warps; warpgroup_mma "
                                            "needs whole warpgroups (4 warps), 16 rows per warp and 8 <= n <= 256")
        return MmaLayout((warps, 1), (16, n, 16))

    def _fma_layout(self, box: Box, k: str, where: str):
        keep = [d for d, name in enumerate(box.dims) if name != k]
        layout = box.layout
        if any(basis[d] for basis in layout.lane + layout.warp for d in range(len(box.dims)) if box.dims[d] == k):
            raise UnsupportedConstructError(f"{where}: threads are bound along the reduction axis; the CUDA-core "
                                            "contraction needs each thread to own whole dot products")
        reg = tuple(tuple(b[d] for d in keep) for b in layout.reg if any(b[d] for d in keep))
        project = lambda bases: tuple(tuple(b[d] for d in keep) for b in bases)  # noqa: E731
        linear = LinearLayout(reg, project(layout.lane), project(layout.warp), tuple(box.extents[d] for d in keep))
        blocked = as_blocked(linear)
        if blocked is None:
            raise UnsupportedConstructError(f"{where}: its thread bindings give the accumulator a layout that is not "
                                            "a blocked layout, which gl.dot_fma needs")
        return blocked

    def _store_accumulator(self, name: str) -> StoreAccumulator:
        box = self.accumulators[name]
        block, store = self.acc_store[name]
        where = _where(block, f"block {block.name_hint}")
        ctx = _BoxContext(self, block, box, None, where)
        indices = tuple(lower_expr(ctx, index) for index in store.indices)
        return StoreAccumulator(name, name, box, indices, ctx.masked(store.buffer, store.indices))

    def _global(self, buffer, where: str) -> None:
        if buffer.scope() not in ("global", ""):
            raise UnsupportedConstructError(f"{where}: buffer {buffer.name} in scope {buffer.scope()}; the Gluon "
                                            "backend stages in shared memory and keeps accumulators in registers")
        if not any(p.same_as(buffer) for p in self.func.params):
            raise UnsupportedConstructError(f"{where}: intermediate global buffer {buffer.name}; the Gluon backend "
                                            "takes the function's parameters only")
        self.buffers[buffer.name] = buffer

    def analyzer(self) -> sym.Analyzer:
        """An analyzer that knows the ranges of the program ids and sequential loop variables."""
        analyzer = sym.Analyzer()
        for var, extent in [(v, e) for v, e, _ in self.grid] + self.sequential:
            analyzer.bind(var, tvm.ir.Range(0, extent))
        return analyzer

    def same_origin(self, origin, offsets) -> bool:
        """Whether a reader's offsets of a shared tile are the staging block's (its origin)."""
        analyzer = self.analyzer()
        return origin is not None and all(analyzer.can_prove_equal(a, b) for a, b in zip(origin, offsets))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def _tile_axes(indices, block, box: Box, where: str, buffer: str) -> tuple[tuple[int, ...], None]:
    iter_names = [iv.var.name for iv in block.iter_vars]
    axes = []
    for index in indices:
        if not isinstance(index, tirx.Var) or index.name not in iter_names:
            raise UnsupportedConstructError(f"{where}: indexes shared buffer {buffer} by `{index}`; the Gluon backend "
                                            "moves whole tiles, indexed by the block's iteration variables")
        if index.name in box.dims:
            axes.append(box.dims.index(index.name))
    if sorted(axes) != list(range(len(box.dims))):
        raise UnsupportedConstructError(f"{where}: shared buffer {buffer} is not indexed by every axis of the box")
    return tuple(axes), None


def _cast(value, dtype: str):
    from lowering.rules.exprs import cast

    return cast(value, dtype)


class _ScalarContext:
    """Expressions of the program ids and sequential loop variables (box offsets)."""

    def __init__(self, kernel: _KernelLowering, where: str):
        self.kernel = kernel
        self._where = where

    def variable(self, var):
        if any(var.same_as(v) for v in self.kernel._outer_vars()):
            return Scalar(var.name, dtype_of(var))
        raise UnsupportedConstructError(f"{self._where}: variable {var.name} is neither a program id nor a "
                                        "sequential loop's variable")

    def load(self, load, guards):
        raise UnsupportedConstructError(f"{self._where}: a load from memory in an index or an initial value")

    def proven_non_negative(self, expr) -> bool:
        return True   # program ids and loop variables count up from zero

    def merge_dims(self, *dims):
        return ()

    def where(self) -> str:
        return self._where


class _BoxContext(_ScalarContext):
    """Expressions over one block's box: iteration variables are index tensors, loads are named."""

    def __init__(self, kernel: _KernelLowering, block, box: Box, tir_offsets: dict | None, where: str):
        super().__init__(kernel, where)
        self.block = block
        self.box = box
        self.tir_offsets = tir_offsets
        self.loads: list = []
        self.iter_vars = {iv.var.__chandle__(): iv for iv in block.iter_vars}

    def variable(self, var):
        iv = self.iter_vars.get(var.__chandle__())
        if iv is None:
            return super().variable(var)
        if var.name in self.box.dims:
            return Reg(f"i_{var.name}", "int32", self.box.dims)
        offset = self.tir_offsets[var.__chandle__()][0] if self.tir_offsets else None
        if offset is None:
            raise UnsupportedConstructError(f"{self._where}: iteration variable {var.name} does not vary in the box")
        return lower_expr(_ScalarContext(self.kernel, self._where), offset)

    def load(self, load, guards):
        buffer = load.source
        name = self.kernel.fresh("x")
        if buffer.name in self.kernel.shared:
            axes, _ = _tile_axes(load.indices, self.block, self.box, self._where, buffer.name)
            origin = self.kernel.tile_origin.get(buffer.name)
            offsets = tuple(self.tir_offsets[v.__chandle__()][0] for v in load.indices)
            if not self.kernel.same_origin(origin, offsets):
                raise UnsupportedConstructError(f"{self._where}: reads shared buffer {buffer.name} at another origin "
                                                "than the block that staged it")
            self.loads.append(SharedLoad(name, buffer.name, axes))
            return Reg(name, str(buffer.dtype), self.box.dims)
        self.kernel._global(buffer, self._where)
        indices = tuple(lower_expr(self, index) for index in load.indices)
        dtype = check_dtype(str(buffer.dtype), f"buffer {buffer.name}", self._where)
        self.loads.append(GlobalLoad(name, buffer.name, indices, self.masked(buffer, load.indices), dtype))
        return Reg(name, dtype, self.box.dims)

    def masked(self, buffer, indices) -> tuple[int, ...]:
        """The axes of an access whose bound the analyzer cannot prove over the box."""
        analyzer = self.kernel.analyzer()
        offsets = self.tir_offsets or {}
        replace_map = {}
        for iv in self.block.iter_vars:
            if iv.var.__chandle__() in offsets:
                offset, extent = offsets[iv.var.__chandle__()]
            else:
                offset, extent = self._acc_offset(iv.var)
            step = tirx.Var(f"t_{iv.var.name}", iv.var.ty.dtype)
            analyzer.bind(step, tvm.ir.Range(0, extent))
            replace_map[iv.var.__chandle__()] = offset + step
        masked = []
        for axis, (index, extent) in enumerate(zip(indices, buffer.shape)):
            bound = tvm_ffi.structural_map(index, (tirx.Var, lambda v: replace_map.get(v.__chandle__(), v)))
            if not (analyzer.can_prove(bound >= 0) and analyzer.can_prove(bound < extent)):
                masked.append(axis)
        return tuple(masked)

    def _acc_offset(self, var):
        d = self.box.dims.index(var.name) if var.name in self.box.dims else None
        if d is None:
            raise UnsupportedConstructError(f"{self._where}: cannot bound iteration variable {var.name}")
        return _tir_of(self.box.offsets[d], self.kernel), self.box.extents[d]

    def merge_dims(self, *dims):
        return self.box.dims if any(dims) else ()


def _tir_of(expr, kernel: _KernelLowering):
    """A box offset (tile_ir Expr of program ids and loop variables) as TIR, to bound it."""
    from lowering.tile_ir import Binary

    variables = {var.name: var for var in kernel._outer_vars()}
    if isinstance(expr, Const):
        return tirx.const(expr.value, "int32")
    if isinstance(expr, Scalar):
        return variables[expr.name]
    if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "//", "%"):
        a, b = _tir_of(expr.a, kernel), _tir_of(expr.b, kernel)
        return {"+": a + b, "-": a - b, "*": a * b, "//": tirx.floordiv(a, b), "%": tirx.floormod(a, b)}[expr.op]
    raise UnsupportedConstructError(f"the accumulator's offset `{expr}` is not an affine expression")


# --- the program -----------------------------------------------------------------------------------
def _shared_tiles(func: tirx.PrimFunc) -> dict[str, SharedTile]:
    tiles: dict[str, SharedTile] = {}
    staged: dict[str, object] = {}

    def visit(block):
        decision = decision_of(block)
        if decision is not None:
            staged[decision.buffer] = decision

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    for buf in root_block(func).alloc_buffers:
        if not buf.scope().startswith("shared"):
            raise UnsupportedConstructError(f"buffer {buf.name} in scope {buf.scope()!r}: the Gluon backend allocates "
                                            "shared staging tiles only (keep intermediates in shared memory)")
        decision = staged.get(buf.name)
        if decision is None:
            raise UnsupportedConstructError(f"shared buffer {buf.name} has no layout decision: run "
                                            "BankConflictFreeTiling (compile(backend='gluon') does)")
        tiles[buf.name] = SharedTile(buf.name, str(buf.dtype), decision.tile, decision)
    return tiles


def _params(func: tirx.PrimFunc, kernels: list[GluonKernelIR]) -> tuple[Param, ...]:
    written, read = set(), set()

    def visit(block):
        written.update(r.source.name for r in block.writes)
        read.update(r.source.name for r in block.reads)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    params = []
    for buffer in func.params:
        if not tirx.is_buffer_var(buffer):
            raise UnsupportedConstructError(f"scalar parameter {buffer.name}: the Gluon backend takes buffers only")
        shape = []
        for extent in buffer.shape:
            if not isinstance(extent, (int, tirx.IntImm)):
                raise UnsupportedConstructError(f"buffer {buffer.name} has the symbolic extent {extent}; the Gluon "
                                                "backend compiles static shapes")
            shape.append(int(extent))
        params.append(Param(buffer.name, "buffer", str(buffer.dtype), tuple(shape), buffer.name in written,
                            buffer.name in read))
    return tuple(params)


def lower_gluon(func: tirx.PrimFunc, name: str, source_hash: str, passes: tuple[str, ...]) -> GluonProgram:
    """The GluonProgram of a thread-bound S-TIR function whose shared tiles carry their layout."""
    shared = _shared_tiles(func)
    body = root_block(func).body
    statements = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    kernels = []
    for index, stmt in enumerate(statements):
        kernel_name = name if len(statements) == 1 else f"{name}_{index}"
        kernels.append(_KernelLowering(func, shared, kernel_name).lower(stmt))
    return GluonProgram(name, _params(func, kernels), tuple(kernels), source_hash, passes)
