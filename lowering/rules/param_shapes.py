"""Buffer parameter shapes as the launcher checks them.

Each dimension becomes an int (a constant), a str (a shape variable, bound from the first tensor
dimension it names) or a derived dimension: a nested tuple `(op, a, b)` over those, with op one of
`+ - * // % min max`. The generated module keeps these tuples as data and evaluates them with the
hand-written `runtime_support.shape_value` (Python's `//` and `%` floor, as TIR's floordiv and
floormod do), so no expression text is ever evaluated and the launch error prints the same tuple.

Why refuse, not solve, a variable that only appears inside expressions (`n` in `(n * 2,)`): TVM's
own build refuses such a PrimFunc ("variables (n,) are used, but are not passed in as API
arguments"), so there would be no reference to check the kernel against. Every variable must be a
whole dimension of some buffer parameter or a scalar parameter.
Assumes: shape variable names are Python identifiers (they become kernel argument names).
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.errors import UnsupportedConstructError

ShapeEntry = int | str | tuple

_OPS = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.FloorDiv: "//", tirx.FloorMod: "%",
        tirx.Min: "min", tirx.Max: "max"}


def shape_entry(param, axis: int, dim) -> ShapeEntry:
    """One dimension of a buffer parameter as launcher data; refuses what it cannot express."""
    if isinstance(dim, tirx.IntImm):
        return int(dim.value)
    if isinstance(dim, tirx.Var):
        return dim.name
    op = _OPS.get(type(dim))
    if op is None:
        raise UnsupportedConstructError(
            f"parameter {param.name}: dimension {axis} is {dim}; a derived dimension may only use + - * "
            f"floordiv floormod min max of constants and shape variables (found {type(dim).__name__})")
    return (op, shape_entry(param, axis, dim.a), shape_entry(param, axis, dim.b))


def entry_text(entry: ShapeEntry) -> str:
    """`(n // 4) + 1` for ("+", ("//", "n", 4), 1): how printers and dumps show an entry."""
    if isinstance(entry, tuple):
        op, a, b = entry
        if op in ("min", "max"):
            return f"{op}({entry_text(a)}, {entry_text(b)})"
        return f"({entry_text(a)} {op} {entry_text(b)})"
    return str(entry)


def variables(entry: ShapeEntry) -> list[str]:
    """The shape variables an entry reads, in order of first appearance."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, tuple):
        found = variables(entry[1])
        return found + [name for name in variables(entry[2]) if name not in found]
    return []


def check_param_shapes(func: tirx.PrimFunc, name: str) -> None:
    """Raise UnsupportedConstructError for a shape the launcher cannot check: an operation outside
    `+ - * floordiv floormod min max`, or a variable bound by no whole dimension nor scalar parameter."""
    buffers = [p for p in func.params if tirx.is_buffer_var(p)]
    bound = {p.name for p in func.params if not tirx.is_buffer_var(p)}
    bound |= {dim.name for buf in buffers for dim in buf.shape if isinstance(dim, tirx.Var)}
    for buf in buffers:
        for axis, dim in enumerate(buf.shape):
            unbound = [v for v in variables(shape_entry(buf, axis, dim)) if v not in bound]
            if unbound:
                raise UnsupportedConstructError(
                    f"PrimFunc {name}, parameter {buf.name}: dimension {axis} is {dim}, but {unbound[0]} is neither a "
                    f"whole dimension of a buffer parameter nor a scalar parameter, so no argument gives its value; "
                    f"add {unbound[0]} as a scalar parameter (TVM's build requires this too)")
