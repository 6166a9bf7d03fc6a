"""A deterministic, readable text form of a TileProgram (written next to the IR dumps)."""

from __future__ import annotations

from lowering.rules.param_shapes import entry_text
from lowering.tile_ir import (
    Arange,
    Assign,
    Barrier,
    Binary,
    Cast,
    CombineAssign,
    Comment,
    Const,
    Dot,
    Load,
    Loop,
    Reduce,
    Reg,
    Scalar,
    Scan,
    SelectCombine,
    Store,
    TileProgram,
    Unary,
    Where,
)


def format_expr(expr) -> str:
    if isinstance(expr, Const):
        return repr(expr.value) + (f"<{','.join(expr.dims)}>" if expr.dims else "")
    if isinstance(expr, (Scalar, Reg)):
        return expr.name
    if isinstance(expr, Arange):
        return f"arange({expr.block})@{expr.dim}"
    if isinstance(expr, Unary):
        return f"{expr.op}({format_expr(expr.x)})"
    if isinstance(expr, Binary):
        return f"({format_expr(expr.a)} {expr.op} {format_expr(expr.b)})"
    if isinstance(expr, Where):
        return f"where({format_expr(expr.cond)}, {format_expr(expr.a)}, {format_expr(expr.b)})"
    if isinstance(expr, Cast):
        return f"{expr.dtype}({format_expr(expr.x)})"
    if isinstance(expr, Load):
        mask = " if " + " & ".join(format_expr(m) for m in expr.mask) if expr.mask else ""
        return f"{expr.buffer}[{format_expr(expr.offset)}{mask}]"
    if isinstance(expr, Reduce):
        return f"{expr.kind}({format_expr(expr.x)}, over {','.join(expr.axes)})"
    if isinstance(expr, Scan):
        return f"scan_{expr.kind}({format_expr(expr.x)}, along {expr.axis})"
    if isinstance(expr, Dot):
        return f"dot({format_expr(expr.a)}, {format_expr(expr.b)}, acc={format_expr(expr.acc)}, {expr.precision})"
    raise TypeError(type(expr).__name__)


def _format_stmt(stmt, indent: str, lines: list[str]) -> None:
    if isinstance(stmt, Comment):
        lines.append(f"{indent}# {stmt.text}")
    elif isinstance(stmt, Barrier):
        lines.append(f"{indent}sync  # {stmt.reason}")
    elif isinstance(stmt, Assign):
        lines.append(f"{indent}{stmt.name}: {stmt.dtype}<{','.join(stmt.dims)}> = {format_expr(stmt.value)}")
    elif isinstance(stmt, CombineAssign):
        state, update = (", ".join(format_expr(v) for v in values) for values in (stmt.state, stmt.update))
        lines.append(
            f"{indent}{', '.join(stmt.names)}: ({', '.join(stmt.dtypes)})<{','.join(stmt.dims)}> = "
            f"{stmt.combine.name}(({state}), ({update}))"
        )
    elif isinstance(stmt, Store):
        mask = " if " + " & ".join(format_expr(m) for m in stmt.mask) if stmt.mask else ""
        lines.append(f"{indent}{stmt.buffer}[{format_expr(stmt.offset)}] = {format_expr(stmt.value)}{mask}")
    elif isinstance(stmt, Loop):
        for prefetch in stmt.prefetched:   # Tiling's prefetch of a row walk (prefetch_loads.py)
            for slot, load in zip(prefetch.slots, prefetch.first):
                lines.append(f"{indent}{slot} = {format_expr(load)}  # prefetch")
        lines.append(f"{indent}for {stmt.var} in range({format_expr(stmt.start)}, {format_expr(stmt.stop)}):")
        for prefetch in stmt.prefetched:
            ahead = f"{prefetch.slots[-1]} = {format_expr(prefetch.ahead)}  # prefetch {len(prefetch.slots)} ahead"
            lines.append(f"{indent}    {prefetch.name} = {prefetch.slots[0]}; {ahead}")
        for child in stmt.body:
            _format_stmt(child, indent + "    ", lines)


def _param_text(param) -> str:
    if param.kind != "buffer":
        return f"{param.name}: {param.dtype}"
    return f"{param.name}: {param.dtype}[{', '.join(entry_text(d) for d in param.shape)}]"


def _combine_text(combine: SelectCombine) -> str:
    payloads = ", ".join(combine.payload_dtypes) or "none"
    better = "larger" if combine.kind == "max" else "smaller"
    tie = "smaller" if combine.tie == "first" else "larger"
    return (
        f"  combine {combine.name}: (key {combine.key_dtype}; payloads {payloads}; position {combine.position_dtype})"
        f" the {better} key wins, of equal keys the {tie} position"
    )


def format_program(program: TileProgram) -> str:
    lines = [
        f"program {program.name}  (source hash {program.source_hash})",
        "  params: " + ", ".join(_param_text(p) for p in program.params),
    ]
    for scratch in program.scratch:
        lines.append(f"  scratch {scratch.name}: {scratch.dtype}[{', '.join(format_expr(d) for d in scratch.shape)}]")
    lines += [_combine_text(combine) for combine in program.combines]
    for kernel in program.kernels:
        lines.append(
            f"kernel {kernel.name}  (blocks {', '.join(kernel.source_blocks)}; warps {kernel.num_warps}, stages {kernel.num_stages})"  # noqa: E501
        )
        lines.append(
            "  grid: "
            + (" x ".join(f"{a.var}[{format_expr(a.count)}]" for a in kernel.grid) or "1")
            + (f"  grouped by {kernel.group_m}" if kernel.group_m else "")
            + (f"  persistent (by default {kernel.programs_per_sm} programs an SM)" if kernel.programs_per_sm
               else "  persistent (by default a program a tile)" if kernel.persistent else "")
        )
        for dim in kernel.dims:
            extent = format_expr(dim.extent) if dim.extent is not None else "?"
            lines.append(
                f"  axis {dim.name}: {dim.block}={dim.default} over extent {extent}{' (no tail)' if dim.even else ''}"
            )
        for stmt in kernel.body:
            _format_stmt(stmt, "  ", lines)
    return "\n".join(lines) + "\n"
