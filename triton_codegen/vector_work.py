"""The CUDA-core work of a kernel, for the hardware model (hardware_model.py): what the tile summary
(tile_summary.py) records of each kernel's elementwise arithmetic, and what that costs on a GPU.

Every operation on a tile (a Unary, Binary, Where, Cast, Reduce of lowering.tile_ir) is one
instruction per element on one of three pipes of the multiprocessor:
- "alu": the FMA pipe (adds, multiplies, compares, selects, min/max, a reduction's combine, a
  widening cast), at the fp32 rate: GpuSpec.fp32_tflops / 2 instructions per second;
- "special": the multi-function unit (MUFU: ex2, lg2, rsqrt, sqrt, sin, cos, the reciprocal of a
  float division), 16 per clock per SM on sm_80 and sm_90 (GpuSpec.special_function_tops);
- "convert": the conversion pipe (float <-> int, a narrowing float cast, floor/ceil/trunc/round),
  16 per clock per SM too (GpuSpec.conversion_tops); a narrowing cast to 16 bits packs two.
Every instruction takes an issue slot (the FMA pipe's rate) and the special functions and
conversions share the quarter-rate unit: hardware_model.program_vector_seconds takes the slower.
A site is one operation of one loop body: its pipe, the tile axes of its result, the trip counts
of the loops around it, and how many instructions per element. Identical subexpressions of one
loop body count once (the compiler's CSE merges them), as the summary counts a load once.

Why: attention spends as long in its softmax's exponentials and conversions between the two dots
as in the dots (FlashAttention-3's observation for d128 on Hopper); quantize_int8's rounding and
float-to-int conversions (four quarter-rate instructions an element) outlast its DRAM traffic.
"""

from __future__ import annotations

import dataclasses

# unary ops: (special, convert, alu) instructions per element, as emit_kernel.UNARY_RULES writes them
# (round: ties to even from two floors and nine compares, selects and adds; trunc: a ceil, a floor and
# a select; log1p: a log and a division) and libdevice's polynomials as their FMAs (erf, tanh)
_UNARY = {"exp": (1, 0, 1), "exp2": (1, 0, 0), "exp10": (1, 0, 1), "log": (1, 0, 1), "log2": (1, 0, 0),
          "log10": (1, 0, 1), "sqrt": (1, 0, 0), "rsqrt": (1, 0, 0), "sin": (1, 0, 1), "cos": (1, 0, 1),
          "sigmoid": (2, 0, 2), "tanh": (2, 0, 4), "tan": (2, 0, 6), "erf": (0, 0, 12), "log1p": (2, 0, 6),
          "floor": (0, 1, 0), "ceil": (0, 1, 0), "trunc": (0, 2, 2), "round": (0, 2, 9)}
UNITS = ("alu", "special", "convert")


def work_sites(body, trips_of, sizes_of, buffer_dtypes: dict[str, str] | None = None) -> list[dict]:
    """The summary's "work" entries of a kernel body (tile IR statements): per (pipe, axes, trips),
    instructions per element. `trips_of(loop, sizes_of)` is the summary's trip-count formula; a
    store into a buffer of another dtype (`buffer_dtypes`) converts its value as it stores."""
    from lowering.tile_ir import Loop, Store

    totals: dict[tuple, float] = {}

    def visit(stmts, trips):
        seen: set = set()
        for stmt in stmts:
            if isinstance(stmt, Loop):
                visit(stmt.body, trips + [trips_of(stmt, sizes_of)])
                continue
            for child in children(stmt):
                _count(child, trips, seen, totals)
            target = (buffer_dtypes or {}).get(getattr(stmt, "buffer", None))
            if isinstance(stmt, Store) and target and getattr(stmt.value, "dtype", target) != target:
                unit, ops = _cast(stmt.value.dtype, target)
                key = (unit, tuple(getattr(stmt.value, "dims", ())), _frozen(trips))
                totals[key] = totals.get(key, 0) + ops

    visit(body, [])
    return [{"unit": unit, "axes": list(axes), "trips": list(trips), "ops": ops}
            for (unit, axes, trips), ops in totals.items()]


def _count(expr, trips, seen, totals) -> None:
    from lowering.tile_ir import Load, Reduce

    if isinstance(expr, Load) or expr in seen:
        return   # a load's addresses are the pointer arithmetic Triton hoists and increments
    seen.add(expr)
    axes = expr.x.dims if isinstance(expr, Reduce) else getattr(expr, "dims", ())   # a reduction combines its input
    for unit, ops in _instructions(expr):
        key = (unit, tuple(axes), _frozen(trips))
        totals[key] = totals.get(key, 0) + ops
    for child in children(expr):
        _count(child, trips, seen, totals)


def _instructions(expr) -> list[tuple[str, float]]:
    """(pipe, instructions per element) of one tile-IR operation (not its operands)."""
    from lowering.tile_ir import Binary, Cast, Reduce, Unary, Where

    if isinstance(expr, Unary):
        counts = zip(("special", "convert", "alu"), _UNARY.get(expr.op, (0, 0, 1)))
        return [(unit, n) for unit, n in counts if n]
    if isinstance(expr, Binary):
        if expr.op == "/" and expr.dtype.startswith("float"):
            return [("special", 1), ("alu", 2)]   # a reciprocal and its refinement
        if expr.op == "pow":
            return [("special", 2), ("alu", 2)]
        return [("alu", 1)]
    if isinstance(expr, (Where, Reduce)):
        return [("alu", 1)]
    if isinstance(expr, Cast):
        return [_cast(expr.x.dtype, expr.dtype)]
    return []


def _cast(source: str, target: str) -> tuple[str, float]:
    source_float, target_float = source.startswith(("float", "bfloat")), target.startswith(("float", "bfloat"))
    if source_float != target_float and target != "bool":
        return ("convert", 1)
    if source_float and target_float and _bits(target) < _bits(source):
        return ("convert", 0.5 if _bits(target) == 16 else 1)   # cvt.rn.f16x2.f32 packs two
    return ("alu", 1)


def _bits(dtype: str) -> int:
    return int("".join(ch for ch in dtype if ch.isdigit()) or 32)


def _frozen(trips) -> tuple:
    return tuple(_frozen(t) if isinstance(t, (list, tuple)) else t for t in trips)


def children(node):
    """The tile-IR nodes directly under `node` (its fields, tuples of them included)."""
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item):
                yield item


def unit_rates(spec) -> dict[str, float]:
    """Instructions (elements) per second of each pipe over the whole GPU; a GPU without the
    quarter-rate figures gets 16 a clock against the FMA pipe's 128 lanes."""
    alu = (spec.fp32_tflops or 0.0) * 1e12 / 2
    special = spec.special_function_tops * 1e12 if spec.special_function_tops else alu / 8
    convert = spec.conversion_tops * 1e12 if spec.conversion_tops else alu / 8
    return {"alu": alu, "special": special, "convert": convert}
