"""TileKernel -> `@triton.jit` source.

Values are printed at the leaves: an expression over tile axes (i, k) used where the kernel
needs (i, j, k) is printed as `x[:, None, :]`, so broadcasting is explicit and always aligned.
Every load, reduction, dot and repeated subexpression gets a name from one NameTable, within the
scope (kernel body or loop body) it was computed in; a store to a buffer forgets names that read it.

Given a DescriptorPlan (descriptors.py), the same kernel is printed as its `_tma` variant: the
planned loads and stores go through the tensor descriptors it takes as arguments. A descriptor
moves a block laid out in buffer-axis order, with a 1 for each axis indexed by a single index; the
printer reshapes and permutes it to and from the kernel's axis order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tir_passes.infra.names import NameTable, pointer_name, python_name, stride_name
from lowering.tile_ir import (Arange, Assign, Barrier, Binary, Cast, CombineAssign, Comment, Const, Dot, Expr, Load,
                              Loop, Prefetch, Reduce, Reg, Scalar, Scan, Store, TileKernel, Unary, Where)
from tir_passes.infra.dtypes import DTYPES, FLOATS, language_names

from .descriptors import Descriptor, DescriptorPlan
from .jit_options import jit_decorator
from .kernel_helpers import COMBINED_REDUCTIONS, CONSTANTS, HELPERS, NAN_REDUCTIONS
from .persistent import tile_loop, walked_tile
from .source import Source

TL_DTYPES = language_names("tl")


@dataclass(frozen=True)
class Formula:
    """The Triton text of a tile op over its operands: `{x}` (unary), `{a}` and `{b}` (binary).

    `steps` are temporaries assigned first, as (name, text) pairs that later text reads as
    `{name}`; an operand read more than once is named first too, so each is computed once.
    `{dtype}` is the op's Triton dtype, `{bits}` the signed integer as wide as the float it computes in.
    `in_float32`: 16-bit float operands are computed in float32 and the result rounded once, as
    TVM's llvm build computes half math (and Triton's math functions take float32/float64 only).
    """

    text: str
    steps: tuple[tuple[str, str], ...] = ()
    in_float32: bool = False


def _math(function: str) -> Formula:
    return Formula(f"tl.{function}({{x}})", in_float32=True)


UNARY_RULES = {  # one per op of lowering.ops.UNARY_OPS
    "not": Formula("(~{x})"),
    "bitnot": Formula("(~{x})"),
    "abs": Formula("tl.abs({x})"),
    "floor": _math("floor"),
    "ceil": _math("ceil"),
    "trunc": Formula("tl.where({x} < 0.0, tl.ceil({x}), tl.floor({x}))", in_float32=True),
    # ties to even, from floor alone (x - floor(x) is exact), so it needs no libdevice
    "round": Formula("tl.where(({frac} > 0.5) | (({frac} == 0.5) & (tl.floor({whole} * 0.5) * 2.0 != {whole})), "
                     "{whole} + 1.0, {whole})",
                     steps=(("whole", "tl.floor({x})"), ("frac", "{x} - {whole}")), in_float32=True),
    "exp": _math("exp"),
    "exp2": _math("exp2"),
    "exp10": Formula("tl.exp2({x} * 3.321928094887362)", in_float32=True),
    "log": _math("log"),
    "log2": _math("log2"),
    "log10": Formula("(tl.log2({x}) * 0.30102999566398120)", in_float32=True),
    # log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (Goldberg), so small x keeps its digits
    "log1p": Formula('tl.where(({one_plus} == 1.0) | ({x} == float("inf")), {x}, '
                     'tl.log({one_plus}) * ({x} / ({one_plus} - 1.0)))',
                     steps=(("one_plus", "1.0 + {x}"),), in_float32=True),
    "sqrt": _math("sqrt"),
    "rsqrt": _math("rsqrt"),
    "sin": _math("sin"),
    "cos": _math("cos"),
    "tan": Formula("(tl.sin({x}) / tl.cos({x}))", in_float32=True),
    "tanh": Formula("(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)", in_float32=True),
    "erf": _math("erf"),
    "sigmoid": _math("sigmoid"),
    "isnan": Formula("({x} != {x})"),
}


def _infix(op: str) -> Formula:
    return Formula(f"({{a}} {op} {{b}})")


BINARY_RULES = {  # one per op of lowering.ops.BINARY_OPS
    **{
        op: _infix(op)
        for op in ("+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "<<", ">>")
    },
    "and": _infix("&"),
    "or": _infix("|"),
    # NaN propagates, as torch.minimum/maximum do (TVM's llvm build selects `a < b ? a : b` instead:
    # docs/verification.md); integers ignore the flag
    "min": Formula("tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"),
    "max": Formula("tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"),
    "cdiv": Formula("tl.cdiv({a}, {b})"),
    # TIR rounds toward minus infinity; Triton's // and % truncate
    "floordiv": Formula("({a} // {b} - (({a} % {b} != 0) & (({a} < 0) != ({b} < 0))).to({dtype}))"),
    "floormod": Formula(
        "tl.where(({rem} != 0) & (({rem} < 0) != ({b} < 0)), {rem} + {b}, {rem})", steps=(("rem", "{a} % {b}"),)
    ),
    "fmod": Formula("({a} % {b})", in_float32=True),
    # C's pow from exp2/log2 of |a|: a negative base keeps its sign for odd integral exponents
    # and is NaN for non-integral ones; pow(x, 0), pow(1, y) and pow(-1, +-inf) are 1
    "pow": Formula(
        'tl.where(({b} == 0.0) | ({a} == 1.0) | (({a} == -1.0) & (tl.abs({b}) == float("inf"))), 1.0, '
        "tl.where({a} < 0.0, {negative_base}, {magnitude}))",
        steps=(
            ("magnitude", "tl.exp2({b} * tl.log2(tl.abs({a})))"),
            (
                "negative_base",
                (
                    'tl.where(tl.floor({b}) != {b}, float("nan"), '
                    "tl.where(tl.floor({b} * 0.5) * 2.0 != {b}, -{magnitude}, {magnitude}))"
                ),
            ),
        ),
        in_float32=True,
    ),
    "copysign": Formula("tl.where({b}.to({bits}, bitcast=True) < 0, -tl.abs({a}), tl.abs({a}))", in_float32=True),
}

INTEGER_RULES = {  # integers have no NaN to propagate: the plain forms read better
    "min": Formula("tl.minimum({a}, {b})"),
    "max": Formula("tl.maximum({a}, {b})"),
}

_HALF = ("float16", "bfloat16")
LOG2_E = 1.4426950408889634
_SAME_WIDTH_INT = {name: f"tl.int{DTYPES[name].bits}" for name in FLOATS}
_OPERAND_NAMES = {"x": "arg", "a": "lhs", "b": "rhs"}  # temporaries for operands read more than once
_NAMED = (Load, Reduce, Scan, Dot, Where)
_SCANS = {
    "sum": "tl.cumsum({x}, axis={axis})",
    "prod": "tl.cumprod({x}, axis={axis})",
    "max": "tl.associative_scan({x}, {axis}, _tir_maximum)",
    "min": "tl.associative_scan({x}, {axis}, _tir_minimum)",
}
# Triton's reductions widen these (bf16 and 16-bit float sums to fp32, narrow integers to int32)
_WIDENED_BY_REDUCTIONS = ("bool", "int8", "int16", "uint8", "uint16", "float16", "bfloat16")


def format_float(value: float) -> str:
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if math.isnan(value):
        return 'float("nan")'
    return repr(float(value))


def format_const(const: Const) -> str:
    if isinstance(const.value, bool) or const.dtype == "bool":
        return "True" if const.value else "False"
    if const.dtype.startswith(("float", "bfloat")):
        return format_float(const.value)
    return str(int(const.value))


def _names_in(node, found: set[str]) -> None:
    """Every name the lowering gave a value in `node` (scalars, registers, loop indices, assignments)."""
    if isinstance(node, (Scalar, Reg)):
        found.add(node.name)
    elif isinstance(node, (Assign, Loop)):
        found.add(node.name if isinstance(node, Assign) else node.var)
    elif isinstance(node, CombineAssign):
        found.update(node.names)
    elif isinstance(node, Prefetch):
        found.update((node.name, *node.slots))
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for item in dataclasses.fields(node):
            _names_in(getattr(node, item.name), found)
    elif isinstance(node, (tuple, list)):
        for item in node:
            _names_in(item, found)


def kernel_names(kernel: TileKernel, plan: DescriptorPlan | None = None) -> set[str]:
    """The names a kernel has before the printer adds any: what temporaries must avoid."""
    names = {param.split(":")[0] for param in kernel_parameters(kernel, plan)} | {kernel.name}
    names |= {axis.var for axis in kernel.grid}  # not the axes' names: the printer names their positions so
    _names_in((kernel.dims, kernel.grid, kernel.body), names)
    return names


class KernelPrinter:
    def __init__(self, kernel: TileKernel, src: Source, plan: DescriptorPlan | None = None):
        self.kernel = kernel
        self.src = src
        self.plan = plan
        self.order = [d.name for d in kernel.dims]
        self.blocks = {d.name: d.block for d in kernel.dims}
        self.names = NameTable(kernel_names(kernel, plan) | set(HELPERS) | set(CONSTANTS))
        self.scopes: list[dict] = [{}]
        self.helpers: set[str] = set()

    # --- naming ------------------------------------------------------------------------
    def lookup(self, expr) -> str | None:
        for scope in reversed(self.scopes):
            if expr in scope:
                return scope[expr]
        return None

    def bind(self, expr, base: str) -> str:
        name = self.names.fresh(base)
        self.src.line(f"{name} = {self.render_own(expr)}")
        self.scopes[-1][expr] = name
        return name

    def forget(self, predicate) -> None:
        for scope in self.scopes:
            for key in [k for k in scope if predicate(k)]:
                del scope[key]

    # --- expressions -------------------------------------------------------------------
    def shape(self, dims) -> str:
        return "[" + ", ".join(self.blocks[d] for d in dims) + "]"

    def expand(self, text: str, dims, target) -> str:
        """Index `text` (laid out over `dims`) with None for the axes of `target` it lacks."""
        if tuple(dims) == tuple(target) or not dims:
            return text
        index = ", ".join(":" if d in dims else "None" for d in target)
        return f"{text}[{index}]"

    def render(self, expr: Expr, target) -> str:
        """`expr` laid out over the ordered axes `target` (a superset of its own)."""
        return self.expand(self.name_of(expr), expr.dims, target)

    def name_of(self, expr: Expr) -> str:
        known = self.lookup(expr)
        if known is not None:
            return known
        if isinstance(expr, Arange):
            return self.bind(expr, f"r_{expr.dim}")
        if isinstance(expr, _NAMED) or (isinstance(expr, Binary) and self._worth_naming(expr)):
            return self.bind(expr, self._base_name(expr))
        return self.render_own(expr)

    def _worth_naming(self, expr: Binary) -> bool:
        """Masks and tile indices are reused across loads and stores: name them."""
        if not expr.dims:
            return False
        return (
            expr.op in ("<", "<=", ">", ">=", "==", "!=", "and")
            or isinstance(expr.a, Arange)
            or isinstance(expr.b, Arange)
        )

    def _base_name(self, expr) -> str:
        if isinstance(expr, Load):
            return f"{python_name(expr.buffer)}_tile"
        if isinstance(expr, Reduce):
            return f"{expr.kind}_{'_'.join(expr.axes)}"
        if isinstance(expr, Scan):
            return f"scan_{expr.axis}"
        if isinstance(expr, Dot):
            return "dot"
        if isinstance(expr, Binary) and expr.op in ("<", "and", ">=", "<=", ">", "==", "!="):
            return f"mask_{expr.dims[0]}" if len(expr.dims) == 1 else "mask"
        for dim in self.kernel.dims:
            if expr.dims == (dim.name,) and isinstance(expr, Binary) and expr.op == "+" and isinstance(expr.b, Arange):
                return dim.name
        return "t"

    def render_own(self, expr: Expr) -> str:
        """`expr` over its own axes."""
        method = getattr(self, f"_render_{type(expr).__name__.lower()}")
        return method(expr)

    def _render_const(self, expr: Const) -> str:
        if expr.dims:
            return f"tl.full({self.shape(expr.dims)}, {format_const(expr)}, {TL_DTYPES[expr.dtype]})"
        return format_const(expr)

    def _render_scalar(self, expr: Scalar) -> str:
        return expr.name

    def _render_arange(self, expr: Arange) -> str:
        return f"tl.arange(0, {expr.block})"

    def _render_reg(self, expr: Reg) -> str:
        return expr.name

    def _render_unary(self, expr: Unary) -> str:
        if expr.op == "not" and not expr.x.dims:  # `~True` is -2 when the interpreter hands over a Python bool
            return f"({self.name_of(expr.x)} == 0)"
        if expr.op == "exp":
            folded = self._exp_of_shifted(expr)
            if folded is not None:
                return folded
        return self._formula(UNARY_RULES[expr.op], {"x": expr.x}, expr.dtype, expr.dims)

    def _exp_of_shifted(self, expr: Unary) -> str | None:
        """exp((a - b) * c) in float32, for a constant c (or none), as exp2(a * c' - b * c') with
        c' = c · log2(e): one fused multiply-add per element (b · c' is computed at b's shape, a
        row of a softmax), where exp's own lowering multiplies by log2(e) after the subtraction
        and the scale. The online softmax's exponentials have this form. Only where both factors
        are at most 1: a larger one overflows a finite operand near the float32 limit (a running
        maximum still at its -FLT_MAX start after a leading run of masked keys, a mask of
        T.min_value), and -inf - -inf is NaN where exp((a - b) * c) is 0 or 1."""
        x, scale = expr.x, 1.0
        if isinstance(x, Binary) and x.op == "*" and isinstance(x.b, Const) and not x.b.dims:
            x, scale = x.a, float(x.b.value)
        elif isinstance(x, Binary) and x.op == "*" and isinstance(x.a, Const) and not x.a.dims:
            x, scale = x.b, float(x.a.value)
        if not (
            isinstance(x, Binary)
            and x.op == "-"
            and expr.dtype == "float32"
            and x.a.dtype == x.b.dtype == "float32"
            and math.isfinite(scale)
            and scale > 0
        ):
            return None
        factor = format_float(scale * LOG2_E)
        minuend, inner = x.a, scale
        if (
            isinstance(minuend, Binary)
            and minuend.op == "*"
            and isinstance(minuend.b, Const)
            and not minuend.b.dims
            and minuend.a.dtype == "float32"
            and self.lookup(minuend) is None
        ):
            minuend, inner = minuend.a, scale * float(minuend.b.value)  # (s * c2) · c' as s · (c2 · c')
        if max(abs(inner), scale) * LOG2_E > 1:
            return None
        return (
            f"tl.exp2({self.render(minuend, expr.dims)} * {format_float(inner * LOG2_E)} - "
            f"{self.render(x.b, expr.dims)} * {factor})"
        )

    def _render_binary(self, expr: Binary) -> str:
        if expr.op in ("and", "or") and bool(expr.a.dims) != bool(expr.b.dims):
            # NOTE: `scalar_bool & tile` is an integer tile in Triton's interpreter: select instead
            a, b = self.render(expr.a, expr.dims), self.render(expr.b, expr.dims)
            scalar, tile = (a, b) if not expr.a.dims else (b, a)
            return f"tl.where({scalar}, {tile}, False)" if expr.op == "and" else f"tl.where({scalar}, True, {tile})"
        integral = expr.dtype.startswith(("int", "uint"))
        rule = INTEGER_RULES.get(expr.op) if integral else None
        return self._formula(rule or BINARY_RULES[expr.op], {"a": expr.a, "b": expr.b}, expr.dtype, expr.dims)

    def _formula(self, formula: Formula, operands: dict[str, Expr], dtype: str, dims) -> str:
        """`formula` over its operands (by field), laid out over `dims`; assigns its temporaries."""
        in_float32 = formula.in_float32 and any(x.dtype in _HALF for x in operands.values())
        reads = formula.text + "".join(text for _, text in formula.steps)
        fields = {"dtype": TL_DTYPES[dtype], "bits": _SAME_WIDTH_INT.get("float32" if in_float32 else dtype)}
        for field_name, x in operands.items():
            fields[field_name] = self._operand(field_name, x, reads, in_float32, dims)
        for step_name, step in formula.steps:
            fields[step_name] = self._temporary(step_name, step.format(**fields))
        text = formula.text.format(**fields)
        return f"{text}.to({TL_DTYPES[dtype]})" if in_float32 else text

    def _operand(self, field_name: str, x: Expr, reads: str, in_float32: bool, dims) -> str:
        placeholder = f"{{{field_name}}}"
        if isinstance(x, Const) and not x.dims:
            if placeholder + "." in reads:  # a Python number has no methods: make it a tensor
                return f"tl.full([], {format_const(x)}, {TL_DTYPES['float32' if in_float32 else x.dtype]})"
            return format_const(x) if in_float32 else self._scalar_const(x)
        if in_float32:
            x = Cast(x, "float32", x.dims)
        if reads.count(placeholder) > 1 and self.lookup(x) is None and not isinstance(x, _NAMED + (Scalar, Reg)):
            self.bind(x, _OPERAND_NAMES[field_name])  # read more than once: computed once
        return self.render(x, dims)

    def _temporary(self, base: str, text: str) -> str:
        name = self.names.fresh(base)
        self.src.line(f"{name} = {text}")
        return name

    def _render_where(self, expr: Where) -> str:
        a, b = (self._scalar_const(x) if isinstance(x, Const) and not x.dims else self.render(x, expr.dims)
                for x in (expr.a, expr.b))
        return f"tl.where({self.render(expr.cond, expr.dims)}, {a}, {b})"

    @staticmethod
    def _scalar_const(x: Const) -> str:
        """A scalar constant as an operand. A 16-bit float one keeps its dtype: Triton 3.6 makes a
        Python float an fp32 tensor in tl.where/minimum/maximum, so the op ran in fp32 and a result
        TVM rounds to fp16 was not (fuzz seed 8627 on the H200)."""
        if x.dtype in _HALF:
            return f"tl.full([], {format_const(x)}, {TL_DTYPES[x.dtype]})"
        return format_const(x)

    def _render_cast(self, expr: Cast) -> str:
        inner = self.name_of(expr.x)
        if not expr.x.dims and isinstance(expr.x, Const):
            return f"tl.full([], {inner}, {TL_DTYPES[expr.dtype]})"
        if not expr.x.dims:  # loop indices and scalar arguments are plain numbers in the interpreter
            return f"tl.cast({inner}, {TL_DTYPES[expr.dtype]})"
        if "bfloat16" in (expr.x.dtype, expr.dtype) and "float32" not in (expr.x.dtype, expr.dtype):
            # NOTE: Triton's interpreter converts bfloat16 from and to anything but float32 bit by bit
            inner = f"{inner}.to(tl.float32)"
        return f"{inner}.to({TL_DTYPES[expr.dtype]})"

    def mask_text(self, mask, dims) -> str | None:
        if not mask:
            return None
        tiles = [self.render(m, dims) for m in mask if m.dims]
        scalars = [self.name_of(m) for m in mask if not m.dims]
        if not tiles:  # a condition on loop indices is a Python bool in the interpreter: make it a tensor
            return "tl.full([], 1, tl.int1) & " + " & ".join(f"({s})" for s in scalars)
        text = " & ".join(tiles)
        for scalar in scalars:  # a scalar condition gates a tile mask (and stays int1 everywhere)
            text = f"tl.where({scalar}, {text}, False)"
        return text

    def checked_mask_text(self, mask, checks, dims) -> str | None:
        """The mask; in a debug build, range checks are asserted (where the rest of the mask
        holds) instead of masking."""
        if not (self.kernel.debug and checks):
            return self.mask_text(mask, dims)
        guards = [check.cond for check in checks if not check.assumed]
        rest = self.mask_text(tuple(m for m in mask if m not in guards), dims)
        for check in checks:
            where = f", mask={rest}" if rest else ""
            self.src.line(f"tl.device_assert({self.render(check.cond, dims)}, {check.message!r}{where})")
        return rest

    def _render_load(self, expr: Load) -> str:
        descriptor = self._descriptor(expr.buffer, expr.tile)
        if descriptor is not None:
            return self._descriptor_load(expr, descriptor)
        pointer = f"{pointer_name(expr.buffer)} + {self.render(expr.offset, expr.dims)}"
        mask = self.checked_mask_text(expr.mask, expr.checks, expr.dims)
        if mask is None:
            return f"tl.load({pointer})"
        return f"tl.load({pointer}, mask={mask}, other={_zero(expr.dtype)})"

    # --- tensor descriptors ------------------------------------------------------------
    def _descriptor(self, buffer: str, tile) -> Descriptor | None:
        return self.plan.for_access(buffer, tile, self.blocks) if self.plan else None

    def _descriptor_load(self, expr: Load, descriptor: Descriptor) -> str:
        """The tile through its descriptor (out-of-bounds elements read as zero, as the masked
        load reads them), then the mask conjuncts that are not bounds."""
        tile = expr.tile
        text = self._to_kernel_order(f"{descriptor.param}.load([{self._origin(tile)}])", tile, expr.dims)
        if tile.residual:
            text = f"tl.where({self.mask_text(tile.residual, expr.dims)}, {text}, {_zero(expr.dtype)})"
        return text

    def _descriptor_store(self, stmt: Store, descriptor: Descriptor) -> None:
        tile, dims = stmt.tile, stmt.offset.dims
        value = self.render(stmt.value, dims)
        if not stmt.value.dims:  # a descriptor stores a whole block: make it explicitly
            value = f"tl.full({self.shape(dims)}, {value}, {TL_DTYPES[stmt.value.dtype]})"
        elif stmt.value.dims != dims:
            value = f"tl.broadcast_to({value}, {self.shape(dims)})"
        self.src.line(f"{descriptor.param}.store([{self._origin(tile)}], {self._to_buffer_order(value, tile, dims)})")

    def _origin(self, tile) -> str:
        """The block's first element, one coordinate per buffer axis (TMA takes 32-bit ones)."""
        coordinates = []
        for origin in tile.origin:
            text = self.name_of(origin)
            coordinates.append(f"tl.cast({text}, tl.int32)" if origin.dtype == "int64" else text)
        return ", ".join(coordinates)

    def _to_kernel_order(self, text: str, tile, dims) -> str:
        order = tile.tile_axes
        if len(order) != len(tile.axes):  # drop the single-index axes
            text = f"tl.reshape({text}, {self.shape(order)})"
        return _permuted(text, [order.index(d) for d in dims])

    def _to_buffer_order(self, text: str, tile, dims) -> str:
        order = tile.tile_axes
        text = _permuted(text, [list(dims).index(axis) for axis in order])
        if len(order) != len(tile.axes):  # add the single-index axes
            blocks = ", ".join(self.blocks[axis] if axis is not None else "1" for axis in tile.axes)
            text = f"tl.reshape({text}, [{blocks}])"
        return text

    def _render_reduce(self, expr: Reduce) -> str:
        x = self.name_of(expr.x)
        axes = sorted((list(expr.x.dims).index(a) for a in expr.axes), reverse=True)
        if expr.kind in ("max", "min") and expr.x.dtype.startswith(("float", "bfloat")) and expr.propagate_nan:
            # tl.max/tl.min drop NaN; torch.amax/amin propagate it: on the GPU one reduction whose
            # combine propagates NaN (max.NaN), not a second reduction looking for NaN
            return self._reduced(f"nan_{expr.kind}", x, axes)
        return self._reduced(expr.kind, x, axes)

    def _reduced(self, kind: str, text: str, axes: list[int]) -> str:
        combine, helper = COMBINED_REDUCTIONS.get(kind), NAN_REDUCTIONS.get(kind)
        for axis in axes:
            if helper is not None:
                self.helpers.update(helper)
                text = f"{helper[0]}({text}, {axis})"
            elif combine is not None:
                self.helpers.add(combine)
                text = f"tl.reduce({text}, {axis}, {combine})"
            else:
                text = f"tl.{kind}({text}, axis={axis})"
        return text

    def _render_scan(self, expr: Scan) -> str:
        template = _SCANS[expr.kind]
        self.helpers.update(name for name in HELPERS if name in template)
        return template.format(x=self.name_of(expr.x), axis=list(expr.x.dims).index(expr.axis))

    def _render_dot(self, expr: Dot) -> str:
        a, b = self.name_of(expr.a), self.name_of(expr.b)
        if expr.precision == "bf16":  # float32_matmul_precision="medium": bf16 operands, fp32 accumulation
            a, b = f"{a}.to(tl.bfloat16)", f"{b}.to(tl.bfloat16)"
        if "bfloat16" in (expr.a.dtype, expr.b.dtype) or expr.precision == "bf16":
            self.helpers.update(("_dot_operand", "_UPCAST_DOT_OPERANDS"))
            a, b = f"_dot_operand({a})", f"_dot_operand({b})"
        a_mk = a if expr.a.dims == (expr.m, expr.k) else f"tl.trans({a})"
        b_kn = b if expr.b.dims == (expr.k, expr.n) else f"tl.trans({b})"
        fp32_operands = expr.a.dtype == "float32" and expr.precision != "bf16"
        precision = f', input_precision="{expr.precision}"' if fp32_operands else ""
        acc = self.name_of(expr.acc)
        if expr.dims == (expr.m, expr.n):
            return f"tl.dot({a_mk}, {b_kn}, {acc}{precision})"
        # the accumulator is laid out (n, m): compute (a @ b)^T as b^T @ a^T
        b_nk = b if expr.b.dims == (expr.n, expr.k) else f"tl.trans({b})"
        a_km = a if expr.a.dims == (expr.k, expr.m) else f"tl.trans({a})"
        return f"tl.dot({b_nk}, {a_km}, {acc}{precision})"

    # --- statements --------------------------------------------------------------------
    def statement(self, stmt) -> None:
        if isinstance(stmt, Comment):
            self.src.line(f"# {stmt.text}")
        elif isinstance(stmt, Barrier):
            self.src.line(f"tl.debug_barrier()  # {stmt.reason}")
        elif isinstance(stmt, Assign):
            self._assign(stmt)
        elif isinstance(stmt, CombineAssign):
            self._combine_assign(stmt)
        elif isinstance(stmt, Store):
            self._store(stmt)
        elif isinstance(stmt, Loop):
            self._loop(stmt)

    def _assign(self, stmt: Assign) -> None:
        value = stmt.value
        if isinstance(value, Const) or (not value.dims and stmt.dims):
            text = f"tl.full({self.shape(stmt.dims)}, {self.name_of(value)}, {TL_DTYPES[stmt.dtype]})"
        elif value.dims != stmt.dims:
            text = f"tl.broadcast_to({self.render(value, stmt.dims)}, {self.shape(stmt.dims)})"
        else:
            text = self.name_of(value)
        widened = isinstance(value, Reduce) and value.x.dtype in _WIDENED_BY_REDUCTIONS
        if (value.dtype != stmt.dtype or widened) and not isinstance(value, Const):
            text = f"{text}.to({TL_DTYPES[stmt.dtype]})"
        self.src.line(f"{stmt.name} = {text}")
        self.forget(lambda key: _mentions_reg(key, stmt.name))

    def _combine_assign(self, stmt: CombineAssign) -> None:
        args = [self.render(value, stmt.dims) for value in stmt.state + stmt.update]
        self.helpers.update(getattr(stmt.combine, "helpers", ()))   # a SumsCombine's functions (kernel_helpers.py)
        self.src.line(f"{', '.join(stmt.names)} = {stmt.combine.name}({', '.join(args)})")
        self.forget(lambda key: any(_mentions_reg(key, name) for name in stmt.names))

    def _store(self, stmt: Store) -> None:
        descriptor = self._descriptor(stmt.buffer, stmt.tile)
        if descriptor is not None:
            self._descriptor_store(stmt, descriptor)
            self.forget(lambda key: _reads_buffer(key, stmt.buffer))
            return
        dims = stmt.offset.dims
        pointer = f"{pointer_name(stmt.buffer)} + {self.render(stmt.offset, dims)}"
        value = self.render(stmt.value, dims)
        mask = self.checked_mask_text(stmt.mask, stmt.checks, dims)
        self.src.line(f"tl.store({pointer}, {value}" + (f", mask={mask})" if mask else ")"))
        self.forget(lambda key: _reads_buffer(key, stmt.buffer))

    def _loop(self, loop: Loop) -> None:
        if loop.prefetched:   # Tiling's prefetch (lowering/rewrites/prefetch_loads.py): the first rows, before it
            ahead = f"{loop.prefetch_distance} iteration{'s' if loop.prefetch_distance > 1 else ''}"
            self.src.line(f"# rows of {', '.join(loop.prefetch_buffers)} loaded {ahead} ahead of {loop.var} "
                          "(Tiling's prefetch: in flight while a row reduces)")
        for prefetch in loop.prefetched:
            for slot, load in zip(prefetch.slots, prefetch.first):
                self.src.line(f"{slot} = {self.render_own(load)}")
        start, stop = self.name_of(loop.start), self.name_of(loop.stop)
        with self.src.block(f"for {loop.var} in range({start}, {stop}):"):
            self.scopes.append({})
            for prefetch in loop.prefetched:
                self.src.line(f"{prefetch.name} = {prefetch.slots[0]}")
                for slot, later in zip(prefetch.slots, prefetch.slots[1:]):
                    self.src.line(f"{slot} = {later}")
                self.src.line(f"{prefetch.slots[-1]} = {self.render_own(prefetch.ahead)}")
            for child in loop.body:
                self.statement(child)
            self.scopes.pop()


def _zero(dtype: str) -> str:
    return "0.0" if dtype.startswith(("float", "bfloat")) else ("False" if dtype == "bool" else "0")


def _permuted(text: str, permutation: list[int]) -> str:
    """`text` with its axes in the order `permutation` (tl.permute's meaning)."""
    if permutation == sorted(permutation):
        return text
    if permutation == [1, 0]:
        return f"tl.trans({text})"
    return f"tl.permute({text}, ({', '.join(map(str, permutation))}))"


def _children(expr) -> list:
    return [getattr(expr, f) for f in ("x", "a", "b", "cond", "offset", "acc") if hasattr(expr, f)] + list(
        getattr(expr, "mask", ())
    )


def _mentions_reg(expr, name: str) -> bool:
    if isinstance(expr, Reg):
        return expr.name == name
    return any(_mentions_reg(c, name) for c in _children(expr) if c is not None)


def _reads_buffer(expr, buffer: str) -> bool:
    if isinstance(expr, Load) and expr.buffer == buffer:
        return True
    return any(_reads_buffer(c, buffer) for c in _children(expr) if c is not None)


# what Triton's interpreter makes of a Python number of an in-range value: other scalar dtypes
# (int64 given 3 would compute in int32; float64 in float32 on a GPU) are cast on entry
_INFERRED_SCALAR_DTYPES = ("bool", "int32", "float32")


def _cast_scalar_on_entry(scalar, src: Source) -> None:
    name = scalar.param
    if scalar.dtype == "int64":
        # NOTE: through uint64: the interpreter holds an int in [2**31, 2**32) as uint32 data typed
        # int64, which a cast to int64 leaves as it is (and s * s wraps at 32 bits)
        src.line(f"{name} = tl.cast(tl.cast({name}, tl.uint64), tl.int64)")
    elif scalar.dtype not in _INFERRED_SCALAR_DTYPES:
        src.line(f"{name} = tl.cast({name}, {TL_DTYPES[scalar.dtype]})")


def kernel_parameters(kernel: TileKernel, plan: DescriptorPlan | None = None) -> list[str]:
    """The pointer kernel's parameters; the `_tma` variant takes its descriptors after the scalars."""
    params = []
    for buf in kernel.buffers:
        params.append(pointer_name(buf.name))
        params += [stride_name(buf.name, axis) for axis in range(buf.ndim)]
    params += [f"{s.param}: {TL_DTYPES[s.dtype]}" for s in kernel.scalars]  # compiled Triton takes these types
    params += [descriptor.param for descriptor in (plan.descriptors if plan else ())]
    params += [f"{block}: tl.constexpr" for block in kernel.block_sizes]
    if kernel.group_m:
        params.append("GROUP_M: tl.constexpr")
    return params


def _grid_decomposition(kernel: TileKernel, printer: KernelPrinter, pid: str) -> None:
    src = printer.src
    axes = list(kernel.grid)
    if not axes:
        return
    rest = printer.names.fresh("rest")
    counts = [printer.name_of(a.count) for a in axes]
    if kernel.group_m and len(axes) >= 2:
        m, n = axes[-2], axes[-1]
        lead = axes[:-2]
        num_m, num_n, pid_mn, group, first_m, group_rows = (
            printer.names.fresh(base) for base in ("num_m", "num_n", "pid_mn", "group", "first_m", "group_rows")
        )
        src.line(f"{num_m} = {counts[-2]}")
        src.line(f"{num_n} = {counts[-1]}")
        src.line(f"{pid_mn} = {pid} % ({num_m} * {num_n})")
        if len(axes) > 2:
            src.line(f"{rest} = {pid} // ({num_m} * {num_n})")
        src.line(f"{group} = GROUP_M * {num_n}  # programs per group of GROUP_M rows, for L2 reuse")
        src.line(f"{first_m} = ({pid_mn} // {group}) * GROUP_M")
        src.line(f"{group_rows} = tl.minimum({num_m} - {first_m}, GROUP_M)")
        src.line(f"{m.var} = {first_m} + ({pid_mn} % {group}) % {group_rows}")
        src.line(f"{n.var} = ({pid_mn} % {group}) // {group_rows}")
        counts, axes = counts[:-2], lead
        remaining = rest
    else:
        remaining = pid
    for axis, count in zip(reversed(axes[1:]), reversed(counts[1:])):
        src.line(walked_tile(axis, count, f"{remaining} % ({count})"))
        src.line(f"{remaining} = {remaining} // ({count})" if remaining != pid else f"{rest} = {pid} // ({count})")
        remaining = rest
    if axes:
        src.line(walked_tile(axes[0], counts[0], remaining))


def emit_kernel(kernel: TileKernel, src: Source, plan: DescriptorPlan | None = None) -> set[str]:
    """Write the kernel, or with a plan its `_tma` variant; returns the names of the HELPERS it calls."""
    src.line(jit_decorator(kernel))
    name = plan.variant if plan else kernel.name
    with src.block(f"def {name}({', '.join(kernel_parameters(kernel, plan))}):"):
        if kernel.source_blocks:
            src.line(f"# TIR blocks: {', '.join(kernel.source_blocks)}")
        if plan:
            src.line(f"# tensor descriptors: {', '.join(d.param for d in plan.descriptors)}")
        for scalar in kernel.scalars:
            _cast_scalar_on_entry(scalar, src)
        printer = KernelPrinter(kernel, src, plan)
        with tile_loop(kernel, printer) as pid:
            _grid_decomposition(kernel, printer, pid)
            for dim in kernel.dims:  # aranges once, at the top, so every scope can use them
                printer.name_of(Arange(dim.name, dim.block))
            for dim in kernel.dims:  # positions and tail masks of axes that only depend on program ids
                if dim.hoisted and dim.index is not None:
                    if not isinstance(dim.index, Arange):
                        printer.bind(dim.index, dim.name)
                    if dim.tail is not None:
                        printer.bind(dim.tail, f"mask_{dim.name}")
            for stmt in kernel.body:
                printer.statement(stmt)
    return printer.helpers
