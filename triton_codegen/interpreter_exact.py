"""Which compiled programs Triton's interpreter reproduces bit for bit on the GPU, decided from the TileProgram.

The interpreter (`TRITON_INTERPRET=1`, triton/runtime/interpreter.py) runs the same frontend as a
GPU compile (the same types, promotions and constant roundings) and swaps only the builder: each
op is a numpy function. So a program's bits agree where every op it reaches is evaluated alike by
numpy and by the instruction Triton's NVIDIA backend lowers it to:

- exactly rounded on both: `+ - *` of fp16/fp32/fp64 (`add.rn`, `mul.rn`; numpy rounds each op,
  float16 through float32, which double-rounds innocuously), integer arithmetic, comparisons,
  `min`/`max` (`min.NaN.f32`, `max.NaN.f32`: selections), floor, ceil, trunc, round (`cvt.rmi`),
  abs, isnan, copysign (bit operations), selections, casts between fp16, fp32, fp64 and the integers
  (`cvt.rn`, `cvt.rzi` against numpy's astype), and `/` and sqrt in float64 (`div.rn.f64`);
- order-free reductions: max and min (numpy's max in the interpreter, the GPU's tree of max.NaN: a
  selection in any order),
  integer sums, products and scans (two's complement wraps alike in any order), arg-max/arg-min
  selections, and tl.dot of integer operands;
- only when no product is contracted into a sum: a deterministic kernel launches with
  `enable_fp_fusion=False`; any other kernel may get an `fma` where numpy rounds twice.

Everything else differs on ordinary inputs: a float sum, product or scan over a tile (numpy's
pairwise `np.sum` or sequential `np.cumsum` against Triton's tree), a float tl.dot (numpy's matmul
against the MMA), the transcendentals (`ex2.approx`, `lg2.approx`, `rsqrt.approx`, libdevice's
erf, against numpy's), fp32 `/` (Triton lowers it to `div.full.f32`, approximate to 2 ulp; numpy
divides exactly) and sqrt (`sqrt.approx.ftz.f32`), float `%` (LLVM's `a - trunc(a / b) * b` with a
`div.rn` and an fma, against `np.fmod`), and any bfloat16 arithmetic, comparison or rounding (the
interpreter holds bfloat16 as raw uint16 bits: its arithmetic adds bits, comparisons compare them
unsigned, and fp32 -> bfloat16 truncates where the GPU rounds to nearest). fp8 is not covered.

Outside the claim whatever the program: NaN payloads, the sign of a zero that min/max choose, and
subnormal inputs (`cvt.rmi.ftz` flushes them), none of which seeded normal inputs produce.
`tests/triton_codegen/test_interpreter_exact.py` checks the GPU side of the table in sm_90 PTX;
benchmarks/interp_bits_gpu.py checks the claim on the H200 (docs/determinism.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

from lowering.tile_ir import Binary, Cast, CombineAssign, Dot, Reduce, Scan, Store, SumsCombine, TileProgram, Unary

EXACT_UNARY = ("not", "bitnot", "abs", "floor", "ceil", "trunc", "round", "isnan")
INEXACT_UNARY = {  # op -> what the GPU computes instead of numpy's correctly rounded function
    "exp": "ex2.approx of x * log2(e)", "exp2": "ex2.approx", "exp10": "ex2.approx",
    "log": "lg2.approx times ln(2)", "log2": "lg2.approx", "log10": "lg2.approx", "log1p": "lg2.approx and a division",
    "sqrt": "sqrt.approx.ftz.f32", "rsqrt": "rsqrt.approx.ftz.f32", "sin": "sin.approx", "cos": "cos.approx",
    "tan": "sin.approx / cos.approx", "tanh": "ex2.approx and div.full", "erf": "libdevice's erf",
    "sigmoid": "ex2.approx and div.full",
}
EXACT_IN_FLOAT64 = ("sqrt", "/")   # sqrt.rn.f64 and div.rn.f64: correctly rounded, as numpy's
EXACT_BINARY = ("+", "-", "*", "//", "%", "floordiv", "floormod", "cdiv", "copysign", "min", "max", "<", "<=",
                ">", ">=", "==", "!=", "and", "or", "&", "|", "^", "<<", ">>")
INEXACT_BINARY = {
    "/": "div.full.f32 (approximate, 2 ulp) where numpy divides exactly",
    "fmod": "a - trunc(a / b) * b with div.rn and an fma, where numpy's fmod is exact",
    "pow": "ex2.approx and lg2.approx",
}
ORDER_FREE_KINDS = ("max", "min")
_BF16 = "bfloat16"


@dataclass(frozen=True)
class InterpreterExactness:
    """Whether the interpreter's outputs are the GPU's bit for bit; else why not (each reason once)."""

    exact: bool
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"exact": self.exact, "reasons": list(self.reasons)}


def interpreter_exactness(program: TileProgram) -> InterpreterExactness:
    """The decision for a lowered program (a compiled kernel's `.program`)."""
    reasons: list[str] = []
    for kernel in program.kernels:
        dtypes = {b.name: b.dtype for b in kernel.buffers} | {s.name: s.dtype for s in program.scratch}
        for node in _nodes(kernel.body):
            reason = _reason(node, dtypes, kernel.deterministic)
            if reason and f"{kernel.name}: {reason}" not in reasons:
                reasons.append(f"{kernel.name}: {reason}")
    return InterpreterExactness(not reasons, tuple(reasons))


def _nodes(value):
    """Every IR node under `value`, parents first, in program order."""
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _nodes(item)
    elif is_dataclass(value):
        yield value
        for item in fields(value):
            yield from _nodes(getattr(value, item.name))


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _reason(node, dtypes: dict[str, str], deterministic: bool) -> str:
    """Why `node` may compute other bits on the GPU than in the interpreter ('' if it cannot)."""
    if isinstance(node, (Unary, Binary, Reduce, Scan)) and _touches_bfloat16(node):
        return f"{_op_name(node)} in bfloat16: the interpreter computes on its raw uint16 bits"
    if isinstance(node, Unary):
        return _unary(node)
    if isinstance(node, Binary):
        return _binary(node, deterministic)
    if isinstance(node, (Reduce, Scan)):
        return _fold(node)
    if isinstance(node, Dot):
        if _is_float(node.a.dtype) or _is_float(node.b.dtype):
            return f"a {node.a.dtype} tl.dot: numpy's matmul against the MMA's order"
        return ""
    if isinstance(node, Cast):
        return _cast(node.x.dtype, node.dtype)
    if isinstance(node, Store):
        return _cast(node.value.dtype, dtypes.get(node.buffer, node.value.dtype))
    if isinstance(node, CombineAssign):   # a selection under a total order: the same winner in any order
        together = isinstance(node.combine, SumsCombine)   # else float sums (sums_together.py)
        return _fold(Reduce("sum", node.update[0], (), node.combine.dtype, ())) if together else ""
    return ""


def _touches_bfloat16(node) -> bool:
    operands = (node.a, node.b) if isinstance(node, Binary) else (node.x,)
    return _BF16 in (node.dtype, *(x.dtype for x in operands))


def _op_name(node) -> str:
    return node.op if isinstance(node, (Unary, Binary)) else f"a {node.kind} {type(node).__name__.lower()}"


def _unary(node: Unary) -> str:
    if node.op in EXACT_UNARY or (node.op in EXACT_IN_FLOAT64 and node.dtype == "float64"):
        return ""
    return f"{node.op} ({node.dtype}): the GPU computes {INEXACT_UNARY[node.op]}, the interpreter numpy's {node.op}"


def _binary(node: Binary, deterministic: bool) -> str:
    if node.op in INEXACT_BINARY and not (node.op in EXACT_IN_FLOAT64 and node.dtype == "float64"):
        return f"{node.op} ({node.dtype}): the GPU computes {INEXACT_BINARY[node.op]}"
    if node.op == "*" and _is_float(node.dtype) and not deterministic:
        return "a float product without deterministic=True: Triton may contract it with a sum into an fma"
    return ""


def _fold(node: Reduce | Scan) -> str:
    what = "scan" if isinstance(node, Scan) else "reduction"
    if node.kind in ORDER_FREE_KINDS or not _is_float(node.x.dtype):
        return ""
    scan = isinstance(node, Scan)
    order = f"np.cum{node.kind}'s sequential order" if scan else f"the interpreter's {node.kind} order"
    return f"a {node.x.dtype} {node.kind} {what}: {order} against Triton's tree"


def _cast(source: str, target: str) -> str:
    if "float8" in source or "float8" in target:
        return f"a cast {source} -> {target}: fp8 is not covered"
    if target == _BF16 and source != _BF16:
        return f"a cast {source} -> bfloat16: the interpreter truncates, the GPU rounds to nearest"
    return ""
