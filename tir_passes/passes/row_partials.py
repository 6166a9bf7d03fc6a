"""RowPartials: compute a norm's weight gradients as column partials in the walk of the rows that
computes its row gradient, so X and dY are read once.

Rewrite: a run of row nests (each `for i` over the same rows, every block binding one spatial
variable to `i`, every access to what the run writes at row `i`) followed, later, by column
reductions `C[j] += e(i, j)` (analyses/columns.py) that read only inputs and rows the run wrote,
becomes

    for t in T:                      # one program per tile of R rows
        for r in R:                  # walked serially, one whole row per iteration
            <each row nest's body at row t·R + r>
            for j: C_rows[t, j] += e(t·R + r, j)     # per column reduction: its partials, spatial in t
    for j: for t: C[j] += C_rows[t, j]               # the partials summed, one fixed order

Tiling makes `t` the program id, `r` a serial loop around whole-row tiles (fused_shape's walked
loop) and the partials accumulators of one row tile, stored once per program: one kernel reads X
and dY once, writes dX and the partials (T·columns·4 bytes), a second sums them (no atomics, the
same bits every run).

The decision is the root block's "rows.partials" record (contracts/row_partials.py): the row and
column blocks, R, T, why; a group left alone is recorded with the reason.
Why: without it the column reductions re-read X and dY down the columns, and the row statistics
they read are recomputed in kernels of their own (LoopFusion cannot move a statistic with several
reader nests): LayerNorm's backward was 7 kernels moving 8 bytes per element against the floor's 6.
Assumes: HoistAllocations ran (intermediates are root allocations); unscheduled nests (a backward
from `differentiate`). R: a divisor of static rows within [target, 2·target] (no predicate), else R =
target (DETERMINISTIC_ROWS for symbolic rows) and `cdiv(rows, R)` programs whose last one is ragged: every
row block gets the predicate `t·R + r < rows` (the split form TVM's schedule reads as an affine binding),
and the partial block, whose bindings `t` and `r` are separate, takes its summand under
`if_then_else(t·R + r < rows, e, 0)` instead (the lowering masks the loads of the untaken side). Both are
provable in bounds by the analyzer (`t·R + r >= 0` from the loop ranges, `< rows` from the condition;
the partials' row `t` from its loop), so a verified compile takes symbolic rows.
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.columns import reduces_down_columns
from tir_passes.analyses.nest import block_accesses, bound_iter_var, perfect_nest, realizes_under, uses_var
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.contracts.row_partials import RowPartialsPlan, write_row_partials
from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, static_int, top_level_statements, \
    with_root_block

MIN_ROWS = 16          # rows per program at least: the partials' round trip (8 bytes a column) stays small
PROGRAMS_PER_SM = 2    # whole-row programs resident per multiprocessor (a row of 8192 fp16 is 16 KiB a buffer)
DETERMINISTIC_ROWS = 64   # deterministic or symbolic rows: R independent of the GPU and the rows


def _row_bindings(stmt) -> dict[str, tirx.Var] | None:
    """Block name -> the spatial variable bound to the outer loop, when every block under `stmt`
    binds exactly one, to exactly the loop's variable; else None."""
    if not isinstance(stmt, tirx.For):
        return None
    rows = {}
    for realize in realizes_under(stmt):
        pairs = list(zip(realize.block.iter_vars, realize.iter_values))
        bound = [iv for iv, value in pairs if isinstance(value, tirx.Var) and value.same_as(stmt.loop_var)]
        if len(bound) != 1 or bound[0].iter_type != tirx.IterVar.DataPar or \
                sum(uses_var(value, stmt.loop_var) for _, value in pairs) != 1:
            return None
        rows[realize.block.name_hint] = bound[0].var
    return rows or None


def _at_row(accesses, row: tirx.Var, names: set[str]) -> bool:
    """Every access to a buffer of `names` indexes its first axis by exactly `row`."""
    return all(a.indices and isinstance(a.indices[0], tirx.Var) and a.indices[0].same_as(row)
               for a in accesses if a.buffer.name in names)


def _joins_run(stmt, rows, written: set[str], read: set[str]) -> bool:
    for realize in realizes_under(stmt):
        accesses = block_accesses(realize.block, include_init=True)
        stores = {a.buffer.name for a in accesses if a.is_store}
        if stores & read or not _at_row(accesses, rows[realize.block.name_hint], written | stores):
            return False
    return True


def _column_form(stmt, extent):
    """(j loop, i loop, realize, vi, store value's summand) of `C[j] += e(i, j)` over rows `extent`."""
    nest = perfect_nest(stmt)
    if nest is None or len(nest[0]) != 2:
        return None
    loops, realize = nest
    block = realize.block
    if len(block.iter_vars) != 2:
        return None
    reduce_first = bound_iter_var(realize, loops[0].loop_var)
    j_loop, i_loop = (loops[1], loops[0]) if reduce_first is not None and \
        reduce_first.iter_type == tirx.IterVar.CommReduce else loops
    store = block.body
    if block.init is None or not isinstance(store, tirx.BufferStore) or not str(store.buffer.dtype).startswith("float"):
        return None
    if not tvm_ffi.structural_equal(i_loop.extent, extent) or not reduces_down_columns(i_loop, j_loop, realize):
        return None
    kinds = {value.name: iv for iv, value in zip(block.iter_vars, realize.iter_values) if isinstance(value, tirx.Var)}
    vi, vj = kinds.get(i_loop.loop_var.name), kinds.get(j_loop.loop_var.name)
    if vi is None or vj is None or vi.iter_type != tirx.IterVar.CommReduce or len(block.iter_vars) != 2:
        return None
    if len(store.indices) != 1 or not store.indices[0].same_as(vj.var) or not isinstance(store.value, tirx.Add):
        return None
    value = store.value
    own = lambda e: isinstance(e, tvm.ir.TensorLoad) and e.source.same_as(store.buffer)  # noqa: E731
    summand = value.b if own(value.a) else value.a if own(value.b) else None
    if summand is None or any(a.buffer.same_as(store.buffer) for a in block_accesses(
            s_tir.SBlock([], [], [], "e", tirx.Evaluate(summand)))):
        return None
    return j_loop, i_loop, realize, vi, vj, summand


def _substitute(node, mapping: dict):
    def replace(var):
        return next((expr for key, expr in mapping.items() if key.same_as(var)), var)

    return tvm_ffi.structural_map(node, (tvm.ir.Var, replace))


def _region(buf, indices):
    return tirx.BufferRegion(buf, [tvm.ir.Range.from_min_extent(i, 1) for i in indices])


def _partial_buffer(form, programs):
    j_loop, realize = form[0], form[2]
    total = realize.block.body.buffer
    return tirx.decl_buffer((programs, j_loop.extent), total.dtype, f"{total.name}_rows", layout=None)


def _partial_walk(form, partial, t, r, per, rows, name: str) -> tirx.For:
    """`C_rows[t, j] += e(t·R + r, j)` over the columns, at program `t`, row `r` of its R; where the last
    program is ragged (`rows` given), the summand under `if_then_else(t·R + r < rows, e, 0)`."""
    j_loop, _, realize, vi, vj, summand = form
    block, total = realize.block, realize.block.body.buffer
    vt = tirx.IterVar(tvm.ir.Range(0, partial.shape[0]), tirx.Var("vt", "int32"), tirx.IterVar.DataPar)
    vr = tirx.IterVar(tvm.ir.Range(0, per), tirx.Var("vr", "int32"), tirx.IterVar.CommReduce)
    row = {vi.var: vt.var * per + vr.var}
    reads = [_substitute(region, row) for region in block.reads if not region.source.same_as(total)]
    here = [vt.var, vj.var]
    term = _substitute(summand, row)
    if rows is not None:
        term = tirx.if_then_else(vt.var * per + vr.var < rows, term, tirx.const(0, term.ty.dtype))
    body = tirx.BufferStore(partial, tirx.Add(tirx.BufferLoad(partial, here), term), here)
    init = tirx.BufferStore(partial, block.init.value, here)
    rows_block = s_tir.SBlock([vt, vj, vr], [_region(partial, here)] + reads, [_region(partial, here)],
                              name, body, init)
    j = tirx.Var(j_loop.loop_var.name, "int32")
    return tirx.For(j, 0, j_loop.extent, tirx.ForKind.SERIAL, s_tir.SBlockRealize([t, j, r], True, rows_block))


def _sum_block(form, partial) -> s_tir.SBlock:
    """`C[j] += C_rows[t, j]` over the programs `t`: the partials summed in one fixed order."""
    block = form[2].block
    total = block.body.buffer
    sj = tirx.IterVar(tvm.ir.Range(0, form[0].extent), tirx.Var("vj", "int32"), tirx.IterVar.DataPar)
    st = tirx.IterVar(tvm.ir.Range(0, partial.shape[0]), tirx.Var("vt", "int32"), tirx.IterVar.CommReduce)
    load = tirx.BufferLoad(partial, [st.var, sj.var])
    return s_tir.SBlock([sj, st], [_region(total, [sj.var]), _region(partial, [st.var, sj.var])],
                        [_region(total, [sj.var])], block.name_hint,
                        tirx.BufferStore(total, tirx.Add(tirx.BufferLoad(total, [sj.var]), load), [sj.var]),
                        tirx.BufferStore(total, block.init.value, [sj.var]))


def _predicated(stmt, condition):
    """`stmt` with `condition` added to every block's predicate (the rows of a ragged last program)."""
    def add(realize):
        predicate = realize.predicate
        always = isinstance(predicate, tirx.IntImm) and bool(predicate.value)
        return s_tir.SBlockRealize(realize.iter_values, condition if always else tirx.And(predicate, condition),
                                   realize.block)

    return tvm_ffi.structural_map(stmt, (s_tir.SBlockRealize, add))


def rows_per_program(spec: GpuSpec, rows: int | None, deterministic: bool) -> int:
    """R: the target (enough programs to fill the GPU, PROGRAMS_PER_SM each, at least MIN_ROWS rows each;
    DETERMINISTIC_ROWS when deterministic or the rows are symbolic), or the smallest divisor of static rows
    within [target, 2·target] (whole programs, no predicate) where there is one."""
    if rows is None:
        return DETERMINISTIC_ROWS
    target = DETERMINISTIC_ROWS if deterministic else max(MIN_ROWS, math.ceil(rows / (PROGRAMS_PER_SM *
                                                                                     spec.multiprocessors)))
    target = min(target, rows)
    return next((d for d in range(target, min(2 * target, rows) + 1) if rows % d == 0), target)


def _groups(stmts: list):
    """(run indices, [(index, column form)]) per run of row nests with column reductions after it."""
    groups, i, claimed = [], 0, set()
    while i < len(stmts):
        rows = _row_bindings(stmts[i])
        if rows is None:
            i += 1
            continue
        run, written, read, extent = [], set(), set(), stmts[i].extent
        while i < len(stmts) and (rows := _row_bindings(stmts[i])) is not None and \
                tvm_ffi.structural_equal(stmts[i].extent, extent) and _column_form(stmts[i], extent) is None \
                and _joins_run(stmts[i], rows, written, read):
            run.append(i)
            for realize in realizes_under(stmts[i]):
                for a in block_accesses(realize.block, include_init=True):
                    (written if a.is_store else read).add(a.buffer.name)
            i += 1
        if not run:  # a row nest that starts no run (it does not join one): move past it
            i += 1
            continue
        columns, stored, touched = [], set(), set()  # by the statements between the run and a column nest
        for k in range(i, len(stmts)):
            form = _column_form(stmts[k], extent) if k not in claimed else None
            if form is not None:
                accesses, total = block_accesses(form[2].block), form[2].block.body.buffer.name
                if not {a.buffer.name for a in accesses} & stored and total not in written | read | touched \
                        and _at_row(accesses, form[3].var, written):
                    columns.append((k, form))
                    claimed.add(k)
                    continue
            for realize in realizes_under(stmts[k]):
                for a in block_accesses(realize.block, include_init=True):
                    touched.add(a.buffer.name)
                    if a.is_store:
                        stored.add(a.buffer.name)
        if columns:
            groups.append((run, columns, extent))
    return groups


def _block_names(stmts, indices) -> tuple[str, ...]:
    return tuple(r.block.name_hint for k in indices for r in realizes_under(stmts[k]))


def row_partials(func: tirx.PrimFunc, spec: GpuSpec, deterministic: bool = False) -> tirx.PrimFunc:
    root = root_block(func)
    stmts = top_level_statements(func)
    plans, buffers, removed, placed = [], [], set(), {}
    for run, columns, extent in _groups(stmts):
        names, column_names = _block_names(stmts, run), tuple(form[2].block.name_hint for _, form in columns)
        rows = static_int(extent)
        per = rows_per_program(spec, rows, deterministic)
        ragged = rows is None or rows % per != 0   # the last program walks fewer than R rows
        # cdiv; symbolic, written `+ (R - 1)`, which TVMScript prints as it parses (`+ R - 1` re-parses folded)
        programs = (extent + (per - 1)) // per if rows is None else -(-rows // per)
        t, r = tirx.Var("t", "int32"), tirx.Var("r", "int32")
        body = [_substitute(stmts[k].body, {stmts[k].loop_var: t * per + r}) for k in run]
        if ragged:
            body = [_predicated(stmt, t * per + r < extent) for stmt in body]
        sums = []
        for k, form in columns:
            partial = _partial_buffer(form, programs)
            body.append(_partial_walk(form, partial, t, r, per, extent if ragged else None,
                                      f"{form[2].block.name_hint}_rows"))
            buffers.append(partial)
            sums.append(_sum_block(form, partial))
            removed.add(k)
        fused = tirx.For(t, 0, programs, tirx.ForKind.SERIAL, tirx.For(r, 0, per, tirx.ForKind.SERIAL,
                                                                        tirx.SeqStmt(body)))
        one_extent = all(tvm_ffi.structural_equal(b.iter_vars[0].dom.extent, sums[0].iter_vars[0].dom.extent)
                         for b in sums)
        placed[run[0]] = [fused] + ([_sum_nest(sums)] if one_extent else [_sum_nest([b]) for b in sums])
        removed |= set(run)
        partial_blocks = tuple(f"{form[2].block.name_hint}_rows" for _, form in columns)
        plans.append(RowPartialsPlan(names, column_names, tuple(b.name for b in buffers[-len(columns):]),
                                     partial_blocks, per, static_int(programs) or 0, True,
                                     _reason(rows, extent, per, programs)))
    if not plans:
        return func
    out = []
    for k, stmt in enumerate(stmts):
        out += placed.get(k, []) if k in placed else ([] if k in removed else [stmt])
    func = with_root_block(func, replace_block(root, body=tirx.SeqStmt(out),
                                               alloc_buffers=list(root.alloc_buffers) + buffers))
    return write_row_partials(func, plans)


def _reason(rows: int | None, extent, per: int, programs) -> str:
    if rows is None:
        return (f"rows symbolic ({extent}): cdiv({extent}, {per}) programs of {per} rows, the last one's rows "
                f"past {extent} masked (predicate t * {per} + r < {extent})")
    if rows % per:
        return (f"{programs} programs of {per} rows, the last one ragged (no divisor of {rows} within "
                f"[{per}, {2 * per}])")
    return (f"{programs} programs of {per} rows (at least {MIN_ROWS}, {PROGRAMS_PER_SM} per multiprocessor, "
            f"dividing {rows})")


def _sum_nest(blocks: list) -> tirx.For:
    """The partials' sums: one nest over the columns when they have one extent (one small kernel)."""
    j = tirx.Var("j", "int32")
    inner = []
    for block in blocks:
        t = tirx.Var("t", "int32")
        inner.append(tirx.For(t, 0, block.iter_vars[1].dom.extent, tirx.ForKind.SERIAL,
                              s_tir.SBlockRealize([j, t], True, block)))
    return tirx.For(j, 0, blocks[0].iter_vars[0].dom.extent, tirx.ForKind.SERIAL,
                    inner[0] if len(inner) == 1 else tirx.SeqStmt(inner))


def RowPartials(gpu: str = "H200", deterministic: bool = False, limits=None):
    spec = gpu_spec(gpu, limits)
    return s_tir_pass("RowPartials", lambda func: row_partials(func, spec, deterministic))
