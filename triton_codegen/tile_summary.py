"""The tile summary of a TileProgram (lowering.tile_ir): what each kernel moves and computes, as
plain data emitted into every module (TILE_SUMMARY) for the hardware model (hardware_model.py) and
the tuner on a GPU machine without TVM: the grid, the tile axes, every load and store site with
the loops around it, every tl.dot with the load sites of its operands, the buffers touched, the
elementwise work on the CUDA cores (vector_work.py), the scalars loop bounds name and the grid's
variables, as formulas of block sizes and shape sizes (evaluated by program_trips.py).
"""

from __future__ import annotations

from tir_passes.infra.dtypes import DTYPES, element_bytes
from triton_codegen.aot import saved_arguments
from triton_codegen.vector_work import children, work_sites


# the operators of a formula (hardware_model.evaluate applies them)
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "//": lambda a, b: a // b, "%": lambda a, b: a % b, "floordiv": lambda a, b: a // b,
        "floormod": lambda a, b: a % b, "cdiv": lambda a, b: -(-a // b), "min": min, "max": max}


def summarize(program) -> dict[str, dict]:
    """{kernel name: summary} of a TileProgram (lowering.tile_ir), plain data for the module."""
    return {kernel.name: _summarize_kernel(program, kernel) for kernel in program.kernels}


def _summarize_kernel(program, kernel) -> dict:
    from lowering.tile_ir import Dot, Load, Loop, Store

    sizes_of = {scalar.param: scalar.name for scalar in kernel.scalars}   # formulas use the launch's names
    dot_axes = set()
    accesses, dots, has_loop = [], [], False
    load_sites: dict = {}      # (load, trips) -> its index in accesses
    dot_operands: list = []    # per dot: the (load, trips) of its a and b operands (None: computed in registers)

    def visit_expr(expr, trips, seen):
        if isinstance(expr, Load) and (expr, tuple(trips)) not in seen:
            seen.add((expr, tuple(trips)))
            load_sites.setdefault((expr, tuple(trips)), len(accesses))
            accesses.append(_access(expr.buffer, "load", expr.dtype, expr.dims, trips))
        if isinstance(expr, Dot):
            dot_axes.update((expr.m, expr.n, expr.k))
            dots.append({"m": expr.m, "n": expr.n, "k": expr.k, "dtype": expr.a.dtype,
                         "precision": expr.precision, "trips": list(trips)})
            dot_operands.append([_operand_load(side, trips) for side in (expr.a, expr.b)])
        for child in children(expr):
            visit_expr(child, trips, seen)

    def visit(stmts, trips, seen):
        nonlocal has_loop
        for stmt in stmts:
            if isinstance(stmt, Loop):
                has_loop = True
                for prefetch in stmt.prefetched:   # a prefetching walk's first rows, loaded before it
                    for load in prefetch.first:
                        visit_expr(load, trips, seen)
                inner, inner_seen = trips + [_loop_trips(stmt, sizes_of)], set()
                for prefetch in stmt.prefetched:   # its rows loaded ahead: in flight beside the iteration's own
                    visit_expr(prefetch.ahead, inner, inner_seen)
                    accesses[load_sites[(prefetch.ahead, tuple(inner))]]["ahead"] = len(prefetch.slots)
                visit(stmt.body, inner, inner_seen)
                continue
            if isinstance(stmt, Store):
                accesses.append(_access(stmt.buffer, "store", _buffer_dtype(kernel, stmt.buffer), stmt.offset.dims,
                                        trips))
            for child in children(stmt):
                visit_expr(child, trips, seen)

    visit(kernel.body, [], set())
    for dot, operands in zip(dots, dot_operands):   # the load sites it reads: a tile two dots read is staged once
        dot["operands"] = [load_sites.get(site) for site in operands]
    floors = {name: minimum for name, minimum, _ in kernel.floors}
    dims = [{"axis": d.name, "block": d.block, "default": d.default, "extent": _entry(d.extent, sizes_of),
             "even": d.even, "min": max(d.min_block, kernel.dot_min_block if d.name in dot_axes else 1,
                                        floors.get(d.block, 1))}
            for d in kernel.dims]
    summary = {"grid": [_entry(axis.count, sizes_of) for axis in kernel.grid], "dims": dims, "accesses": accesses,
               "dots": dots,
               "buffers": {b.name: _buffer(program, b.name, b.dtype) for b in kernel.buffers},
               "num_warps": kernel.num_warps, "num_stages": kernel.num_stages, "group_m": kernel.group_m,
               "loops": has_loop, "arguments": saved_arguments(kernel),
               # what the model needs beyond the traffic: the CUDA-core work (vector_work.py), the
               # program-level scalars loop bounds name (a causal window's tiles), the grid's variables
               "work": work_sites(kernel.body, _loop_trips, sizes_of, {b.name: b.dtype for b in kernel.buffers}),
               "scalars": _scalars(kernel.body, sizes_of),
               "grid_vars": [axis.var for axis in kernel.grid]}
    if kernel.persistent:   # a tile loop: the launch's programs per SM is a config setting (PROGRAMS_PER_SM)
        summary["persistent"] = {"programs_per_sm": kernel.programs_per_sm}
    if kernel.pins:   # deterministic: settings the tuner keeps (search_space.py)
        summary["pinned"] = {name: size for name, size, _ in kernel.pins}
    if kernel.floors:   # and those it keeps at or above a minimum
        summary["at_least"] = floors
    return summary


def _loop_trips(loop, sizes_of):
    """A loop's trip count as a formula (names: shape sizes, block sizes, program-level scalars)."""
    start, stop = _entry(loop.start, sizes_of), _entry(loop.stop, sizes_of)
    return stop if start == 0 else ("-", stop, start)


def _scalars(body, sizes_of) -> dict:
    """{name: formula} of the scalars assigned before the kernel's first loop that are formulas."""
    from lowering.tile_ir import Assign

    scalars = {}
    for stmt in body:
        if isinstance(stmt, Assign) and not stmt.dims:
            formula = _entry(stmt.value, sizes_of)
            if formula is not None:
                scalars[stmt.name] = formula
    return scalars


def _operand_load(expr, trips) -> tuple | None:
    """The load a tl.dot operand reads (under transposes and casts), keyed as load_sites is."""
    from lowering.tile_ir import Load

    if isinstance(expr, Load):
        return (expr, tuple(trips))
    parts = list(children(expr))
    return _operand_load(parts[0], trips) if len(parts) == 1 else None


def dtype_bytes(dtype: str) -> int:
    """Bytes of an element of `dtype`; 4 for a dtype the table lacks (an index, a boolean mask)."""
    return element_bytes(dtype) if dtype in DTYPES else 4


def _access(buffer: str, kind: str, dtype: str, axes, trips) -> dict:
    return {"buffer": buffer, "kind": kind, "bytes": dtype_bytes(dtype), "axes": list(axes),
            "trips": list(trips)}


def _buffer_dtype(kernel, name: str) -> str:
    return next(b.dtype for b in kernel.buffers if b.name == name)


def _buffer(program, name: str, dtype: str) -> dict:
    for param in program.params:
        if param.name == name:
            return {"bytes": dtype_bytes(dtype), "shape": list(param.shape)}
    for scratch in program.scratch:
        if scratch.name == name:
            return {"bytes": dtype_bytes(dtype), "shape": [_entry(d) for d in scratch.shape]}
    return {"bytes": dtype_bytes(dtype), "shape": [None]}


def _entry(expr, names: dict[str, str] | None = None):
    """A scalar tile-IR expression as a formula for `evaluate` (None where it is not one), `names` its scalars'."""
    from lowering.tile_ir import Binary, Cast, Const, Scalar

    if expr is None:
        return None
    if isinstance(expr, Const) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, Scalar):
        return (names or {}).get(expr.name, expr.name)
    if isinstance(expr, Cast):
        return _entry(expr.x, names)
    if isinstance(expr, Binary) and expr.op in OPS:
        a, b = _entry(expr.a, names), _entry(expr.b, names)
        return (expr.op, a, b) if a is not None and b is not None else None
    return None
