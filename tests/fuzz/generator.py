"""Random S-TIR programs as TVMScript text, one per seed (deterministic: the same seed gives the
same bytes on every machine).

A program is a complete Python file holding one `@T.prim_func(s_tir=True)`, so every program is
readable and a failing one is its own reproducer. Families (FAMILIES, drawn by weight): elementwise
trees, transposes, row/column reductions, matmuls with epilogues, fused reduce-then-broadcast
(softmax / layernorm-like), integer arithmetic with floordiv/floormod, scans, sliding windows,
multi-block chains, and a few constructs the docs list as unsupported (a clean refusal is their
pass). Every family may make some sizes symbolic (`T.match_buffer` with `n = T.int32()`).

What keeps every program well defined on the reference data (standard normal floats, the same
made strictly negative, integers in [-8, 8]):
- log, sqrt and division only see `abs(x) + 1` (or `abs(x)`, for sqrt);
- every value carries a rough bound on its magnitude, so exp, products and fp16 stay finite;
- comparisons, float -> int casts and rounding only see values computed the same way bit for bit
  everywhere (loads, constants, and sums or products of them, never a product feeding a sum,
  which a GPU may fuse into an fma);
- a float16 value that one ulp of difference upstream may round differently (a float16
  transcendental, a float16 rounding of an inexact float32) only reaches float16 outputs: in a
  float32 output, one float16 ulp is ten times the float32 tolerance;
- intermediates are written in full before any read; only output parameters are accumulated into
  without T.init (their contents are input data);
- sum reductions accumulate in float32 or int32 (TVM rounds a float16 accumulator after every
  step, a GPU reduction does not: that difference is documented, not a bug).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

# family -> weight: how often it is drawn
FAMILIES = {
    "elementwise": 14,
    "transpose": 6,
    "reduction": 14,
    "matmul": 10,
    "reduce_broadcast": 12,
    "integer": 8,
    "scan": 8,
    "window": 5,
    "chain": 14,
    "conditional": 7,
    "unsupported": 2,
}
# drawn apart from FAMILIES, from a generator of its own, so every other seed's program stays
# byte for byte what it was (the CI range was vetted in full with them)
LOADED_INTEGERS_SHARE = 0.06
# the Gluon backend's family, drawn the same way from a stream of its own: CUDA-style schedules
GLUON_SHARE = 0.04

# hostile_names=True: identifiers the code generator itself uses, or that Python and Triton mean
# something by, as loop and buffer names (disjoint: a loop variable would shadow a buffer)
HOSTILE_LOOP_NAMES = ("t", "pid", "rest", "mask_i", "dot", "acc", "tl", "r_i", "num_m", "group", "i_0", "lhs")
HOSTILE_BUFFER_NAMES = ("triton", "run", "torch", "s", "config", "PARAMS", "tune", "math", "X_ptr", "launch",
                        "programs", "arg")
# scalar parameters and symbolic sizes (disjoint from the above, and a float's from an int's): the
# kernel's parameters and the launch keywords a @triton.jit function takes
HOSTILE_SCALAR_NAMES = {"float": ("range", "num_warps", "BLOCK_I", "A_stride0"), "int": ("grid", "float", "x_desc")}
HOSTILE_SIZE_NAMES = ("len", "num_stages", "GROUP_M", "i_kernel0")
MAX_DOMAIN = 2048          # elements of one loop nest's iteration space (the interpreter is slow)
FLOAT_BOUND = {"float32": 1e5, "float16": 3e3}   # largest magnitude a float value may reach
INT_BOUND = 1 << 20
DATA_BOUND = 6.0           # |x| of the reference data: normal values, and -|x| - 1


@dataclass(frozen=True)
class Dim:
    """A buffer dimension or loop extent: its TVMScript text and the size the check binds."""

    text: str
    size: int

    @property
    def static(self) -> bool:
        return self.text.isdigit()


@dataclass(frozen=True)
class Axis:
    """An axis of the program's iteration domain; every nest names it v<id> (loop i<id>)."""

    id: int
    dim: Dim

    @property
    def var(self) -> str:
        return f"v{self.id}"


@dataclass(frozen=True)
class Buffer:
    name: str
    dims: tuple[Dim, ...]
    dtype: str
    role: str   # "in", "out", "tmp" (a root allocation) or "scalar"

    @property
    def symbolic(self) -> bool:
        return any(not d.static for d in self.dims)


@dataclass(frozen=True)
class Tensor:
    """A buffer whose dimensions follow domain axes one to one (outputs, intermediates)."""

    buffer: Buffer
    axes: tuple[Axis, ...]

    def load(self) -> str:
        return f"{self.buffer.name}[{', '.join(a.var for a in self.axes)}]"


@dataclass(frozen=True)
class Value:
    text: str
    dtype: str
    bound: float          # a rough bound of |value| on the reference data
    exact: bool = True    # computed bit-identically by any correct evaluation order
    product: bool = False  # an unrounded product (a following + may become an fma)


@dataclass(frozen=True)
class Program:
    seed: int
    family: str
    name: str
    source: str
    sizes: dict[str, int] = field(default_factory=dict)   # symbolic size -> the value the kernel check binds
    backend: str = "triton"   # the backend the runner compiles it with


def pick_extent(rng: random.Random, high: int = 70, low: int = 1) -> int:
    """low..high, biased to 1 (when allowed), to small sizes and to odd sizes."""
    high = max(low, high)
    roll = rng.random()
    if roll < 0.12 and low <= 1:
        return 1
    if roll < 0.85:
        small = min(high, max(low, 15)) if roll < 0.55 else high
        odd = range(low | 1, small + 1, 2)
        if odd:
            return rng.choice(odd)
    return rng.randint(low, high)


def float_const(dtype: str, value: float) -> Value:
    return Value(f"T.{dtype}({value!r})", dtype, abs(value))


def cast(value: Value, dtype: str) -> Value:
    if value.dtype == dtype:
        return value
    exact = value.exact and (dtype != "int32" or value.bound < INT_BOUND)
    return Value(f'T.Cast("{dtype}", {value.text})', dtype, value.bound, exact and not value.product)


class ProgramBuilder:
    """Collects the buffers and loop nests of one program and renders it as TVMScript."""

    def __init__(self, rng: random.Random, family: str, scale: int = 1, names: random.Random | None = None):
        self.rng = rng
        self.names = names   # draws hostile loop and buffer names (its own stream: the program is the same)
        self.family = family
        self.scale = scale
        self.params: list[Buffer] = []
        self.allocs: list[Buffer] = []
        self.nests: list[str] = []
        self.symbols: dict[str, int] = {}
        self.axes: list[Axis] = []
        self.symbolic_rate = 0.0 if rng.random() < 0.8 else 0.5

    # -- the iteration domain -------------------------------------------------------------

    def axis(self, high: int = 70, symbolic_ok: bool = True, low: int = 1) -> Axis:
        size = pick_extent(self.rng, high * self.scale, low)
        if symbolic_ok and self.rng.random() < self.symbolic_rate and len(self.symbols) < 2:
            name = "nm"[len(self.symbols)] if self.names is None else self.names.choice(
                [n for n in HOSTILE_SIZE_NAMES if n not in self.symbols])
            self.symbols[name] = size
            dim = Dim(name, size)
        else:
            dim = Dim(str(size), size)
        axis = Axis(len(self.axes), dim)
        self.axes.append(axis)
        return axis

    def domain(self, rank: int, *, budget: int = MAX_DOMAIN, high: int = 70) -> list[Axis]:
        """`rank` new axes whose sizes multiply to at most `budget`."""
        axes = []
        budget *= self.scale ** 2
        budget = budget if rank < 3 else budget // 2   # a 3-D nest runs more programs per element
        for _ in range(rank):
            left = max(1, budget // math.prod(a.dim.size for a in axes) if axes else budget)
            axes.append(self.axis(high=max(1, min(high, left // self.scale))))
        return axes

    # -- buffers --------------------------------------------------------------------------

    def _name(self, prefix: str) -> str:
        taken = {b.name for b in self.params + self.allocs}
        free = [name for name in HOSTILE_BUFFER_NAMES if name not in taken]
        if self.names is not None and free:
            return self.names.choice(free)
        index = 0
        while f"{prefix}{index}" in taken:
            index += 1
        return f"{prefix}{index}"

    def input(self, dims: tuple[Dim, ...], dtype: str) -> Buffer:
        buf = Buffer(self._name("A" if "float" in dtype else "I"), dims, dtype, "in")
        self.params.append(buf)
        return buf

    def output(self, axes, dtype: str) -> Tensor:
        buf = Buffer(self._name("Out"), tuple(a.dim for a in axes), dtype, "out")
        self.params.append(buf)
        return Tensor(buf, tuple(axes))

    def temp(self, axes, dtype: str) -> Tensor:
        buf = Buffer(self._name("T"), tuple(a.dim for a in axes), dtype, "tmp")
        self.allocs.append(buf)
        return Tensor(buf, tuple(axes))

    def scalar(self, dtype: str) -> Value:
        existing = [b for b in self.params if b.role == "scalar" and b.dtype == dtype]
        if existing:
            buf = existing[0]
        else:
            kind = "float" if dtype.startswith("float") else "int"
            name = {"float": "alpha", "int": "shift"}[kind] if self.names is None else self.names.choice(
                HOSTILE_SCALAR_NAMES[kind])
            buf = Buffer(name, (), dtype, "scalar")
            self.params.append(buf)
        # the reference binds float scalars to 0.75 and int scalars to 3
        return Value(buf.name, dtype, 3.0)

    def inputs(self) -> list[Buffer]:
        return [b for b in self.params if b.role == "in"]

    # -- nests ----------------------------------------------------------------------------

    def nest(self, name: str, axes: list[Axis], kinds: str, body: list[str], init: str | None = None,
             split: bool | None = None, permute: bool | None = None, partial: bool = False) -> None:
        """One loop nest around one block; `kinds` is S/R per axis (binding order). Loops are
        sometimes in another order (`permute`), one axis is sometimes split by hand with a
        `T.where` tail (`split`; None lets the generator decide), or its loop starts above 0.
        `partial`: the block writes only output parameters, so a `T.where` on one of its spatial
        loops may leave some of their elements as they were. (Not on reduction loops: they found the bug fixed in
        found/reduction_predicate_fusion.py.)"""
        rng = self.rng
        order = list(range(len(axes)))
        if permute if permute is not None else rng.random() < 0.2:
            rng.shuffle(order)
        factors, starts = {}, {}
        splittable = [i for i, a in enumerate(axes) if a.dim.static and a.dim.size > 2]
        if splittable and (split if split is not None else rng.random() < 0.12):
            chosen = rng.choice(splittable)
            factors[chosen] = rng.choice([f for f in (2, 3, 4, 8, 16) if f < axes[chosen].dim.size])
        elif rng.random() < 0.08:
            starts[rng.randrange(len(axes))] = rng.randint(1, 3)
        loops = []   # (name, start, stop)
        for position in order:
            axis = axes[position]
            if position in factors:
                loops += [(f"i{axis.id}o", 0, str(-(-axis.dim.size // factors[position]))),
                          (f"i{axis.id}i", 0, str(factors[position]))]
            elif position in starts:
                loops.append((f"i{axis.id}", starts[position], f"{axis.dim.text} + {starts[position]}"))
            else:
                loops.append((f"i{axis.id}", 0, axis.dim.text))
        conditions = [f"i{axes[p].id}o * {f} + i{axes[p].id}i < {axes[p].dim.text}" for p, f in factors.items()]
        plain = [p for p, a in enumerate(axes) if p not in factors and p not in starts and a.dim.size > 1
                 and partial and kinds[p] == "S"]
        if plain and rng.random() < 0.06:
            position = rng.choice(plain)
            conditions.append(f"i{axes[position].id} < {rng.randint(1, axes[position].dim.size - 1)}")
        bindings = _bindings(axes, kinds, factors, starts) + ([f"T.where({' and '.join(conditions)})"] if conditions else [])
        block = [f'with T.sblock("{name}"):'] + ["    " + line for line in bindings]
        if init is not None:
            block += ["    with T.init():", f"        {init}"]
        block += ["    " + line for line in body]
        text = "\n".join(_loop_lines(loops, block))
        if self.names is not None:
            text = _hostile_loops(text, [name for name, _, _ in loops], self.names)
        self.nests.append(text)

    # -- rendering ------------------------------------------------------------------------

    def render(self, name: str, seed: int) -> Program:
        signature, matches = [], []
        for buf in self.params:
            if buf.role == "scalar":
                signature.append(f"{buf.name}: T.{buf.dtype}")
            elif buf.symbolic:
                signature.append(f"{buf.name.lower()}_handle: T.handle")
                matches.append(f'{buf.name} = T.match_buffer({buf.name.lower()}_handle, {_shape(buf)}, "{buf.dtype}")')
            else:
                signature.append(f'{buf.name}: T.Buffer({_shape(buf)}, "{buf.dtype}")')
        body = [f"{symbol} = T.int32()" for symbol in self.symbols] + matches
        body += [f'{buf.name} = T.sblock_alloc_buffer({_shape(buf)}, "{buf.dtype}")' for buf in self.allocs]
        for nest in self.nests:
            body += nest.splitlines()
        sizes = ", ".join(f"{k}={v}" for k, v in self.symbols.items())
        header = [f'"""tir-triton fuzz program: seed {seed}, family {self.family}'
                  + (f"; the kernel check binds {sizes}." if sizes else ".") + '"""',
                  "from tvm.script import tirx as T", "", f"SIZES = {dict(self.symbols)!r}", "", ""]
        text = "\n".join(header + ["@T.prim_func(s_tir=True)", f"def {name}({', '.join(signature)}):"]
                         + ["    " + line for line in body]) + "\n"
        return Program(seed, self.family, name, text, dict(self.symbols))


def _hostile_loops(text: str, loops: list[str], names: random.Random) -> str:
    """The nest with its loop variables renamed to distinct hostile names (whole words only)."""
    chosen = names.sample(HOSTILE_LOOP_NAMES, len(loops)) if len(loops) <= len(HOSTILE_LOOP_NAMES) else loops
    for old, new in zip(loops, chosen):
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def _loop_lines(loops: list[tuple[str, int, str]], block: list[str]) -> list[str]:
    """`for ... in T.grid(...)` when every loop starts at 0, else one `for` per loop."""
    if all(start == 0 for _, start, _ in loops):
        head = f"for {', '.join(name for name, _, _ in loops)} in T.grid({', '.join(stop for _, _, stop in loops)}):"
        return [head] + ["    " + line for line in block]
    lines = []
    for depth, (name, start, stop) in enumerate(loops):
        lines.append("    " * depth + (f"for {name} in range({start}, {stop}):" if start else f"for {name} in range({stop}):"))
    return lines + ["    " * len(loops) + line for line in block]


def _bindings(axes: list[Axis], kinds: str, factors: dict[int, int], starts: dict[int, int]) -> list[str]:
    """The block's variable bindings: one T.axis.remap, or explicit ones."""
    if not factors and not starts:
        loops = ", ".join(f"i{a.id}" for a in axes)
        return [f'{", ".join(a.var for a in axes)} = T.axis.remap("{kinds}", [{loops}])']
    lines = []
    for position, (axis, kind) in enumerate(zip(axes, kinds)):
        role = "spatial" if kind == "S" else "reduce"
        value = f"i{axis.id}"
        if position in factors:
            value = f"i{axis.id}o * {factors[position]} + i{axis.id}i"
        elif position in starts:
            value = f"i{axis.id} - {starts[position]}"
        lines.append(f"{axis.var} = T.axis.{role}({axis.dim.text}, {value})")
    return lines


def _shape(buf: Buffer) -> str:
    dims = [d.text for d in buf.dims]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


class Expressions:
    """Random typed expression trees over the variables of one block.

    Leaves read inputs (created on demand over a subset of the block's axes, with broadcast,
    reversed, offset, strided, floordiv and floormod indices), the tensors in `sources` (earlier
    outputs and intermediates), guarded neighbours, constants, block variables and scalars."""

    def __init__(self, program: ProgramBuilder, axes: list[Axis], sources: list[Tensor] = (),
                 *, features: dict[str, float] | None = None, coarse_ok: bool = False):
        self.p = program
        self.coarse_ok = coarse_ok   # the result goes to a float16 output (see the module docstring)
        self.rng = program.rng
        self.axes = list(axes)
        self.sources = [s for s in sources if set(s.axes) <= set(axes)]
        self.features = {"neighbour": 0.06, "condition": 0.08, "select": 0.06, "scalar": 0.04, "fp16_input": 0.15,
                         **(features or {})}

    # -- leaves ---------------------------------------------------------------------------

    def leaf(self, dtype: str) -> Value:
        rng, f = self.rng, self.features
        weights = {"load": 1.0, "source": 0.9 if self.sources else 0, "constant": 0.12,
                   "index": 0.08 if self.axes else 0, "scalar": f["scalar"], "neighbour": f["neighbour"] if self.axes else 0}
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        if kind == "source":
            return self.source(dtype)
        if kind == "constant":
            return self.constant(dtype)
        if kind == "index":
            axis = rng.choice(self.axes)
            return cast(Value(axis.var, "int32", axis.dim.size if axis.dim.static else 80), dtype)
        if kind == "scalar":
            return cast(self.p.scalar("float32" if dtype.startswith("float") else "int32"), dtype)
        if kind == "neighbour":
            return self.neighbour(dtype) or self.load(dtype)
        return self.load(dtype)

    def constant(self, dtype: str) -> Value:
        if dtype == "int32":
            value = self.rng.choice([0, 1, 2, 3, -1, -5, 7])
            return Value(str(value), "int32", abs(value))
        return float_const(dtype, self.rng.choice([0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.0]))

    def source(self, dtype: str) -> Value:
        tensor = self.rng.choice(self.sources)
        return cast(Value(tensor.load(), tensor.buffer.dtype, 1e4), dtype)

    def load(self, dtype: str, required: Axis | None = None) -> Value:
        """A load of a new or reused input over some of the block's axes (always `required`'s)."""
        stored = self._stored_dtype(dtype)
        indices, dims = self._view(required)
        buf = self._reuse(dims, stored) or self.p.input(tuple(dims), stored)
        bound = DATA_BOUND if "float" in stored else 16
        return cast(Value(f"{buf.name}[{', '.join(indices)}]", stored, bound), dtype)

    def _stored_dtype(self, dtype: str) -> str:
        """The dtype an input holds: mostly the one computed in, sometimes another one cast to it."""
        roll = self.rng.random()
        if dtype == "float32" and roll < self.features["fp16_input"]:
            return self.rng.choices(["float16", "bfloat16", "float64"], weights=[6, 2, 2])[0]
        if dtype == "int32" and roll < 0.15:
            return self.rng.choice(["int8", "uint8", "int64"])
        return dtype

    def _reuse(self, dims: list[Dim], dtype: str) -> Buffer | None:
        same = [b for b in self.p.inputs() if b.dims == tuple(dims) and b.dtype == dtype]
        return same[0] if same and self.rng.random() < 0.5 else None

    def _view(self, required: Axis | None) -> tuple[list[str], list[Dim]]:
        rng = self.rng
        chosen = [a for a in self.axes if a is required or rng.random() < 0.7]
        if len(self.axes) > 1 and rng.random() < 0.25:
            rng.shuffle(chosen)
        indices, dims = [], []
        for axis in chosen:
            index, dim = self.index_form(axis, keep_whole=axis is required)
            indices.append(index)
            dims.append(dim)
        if not chosen or rng.random() < 0.12:
            position = rng.randint(0, len(indices))
            indices.insert(position, "0")
            dims.insert(position, Dim("1", 1))
        return indices, dims

    def index_form(self, axis: Axis, keep_whole: bool = False) -> tuple[str, Dim]:
        """(index, buffer dimension) reading `axis` as is or transformed."""
        rng, var, dim = self.rng, axis.var, axis.dim
        roll = 1.0 if keep_whole else rng.random()
        if roll < 0.08:
            return f"{dim.text} - 1 - {var}", dim
        if not dim.static or roll >= 0.3:
            return var, dim
        size = dim.size
        if roll < 0.14:
            offset = rng.randint(1, 3)
            return f"{var} + {offset}", Dim(str(size + offset), size + offset)
        if roll < 0.19:
            return f"{var} * 2", Dim(str(2 * size - 1), 2 * size - 1)
        if roll < 0.25:
            divisor = rng.randint(2, 4)
            return f"{var} // {divisor}", Dim(str(-(-size // divisor)), -(-size // divisor))
        modulus = rng.randint(2, 5)
        return f"{var} % {modulus}", Dim(str(min(size, modulus)), min(size, modulus))

    def neighbour(self, dtype: str) -> Value | None:
        """`if_then_else(v >= 1, X[.., v - 1, ..], 0)`: a guarded read one step away."""
        candidates = [a for a in self.axes if a.dim.size >= 2 or not a.dim.static]
        if not candidates:
            return None
        axis = self.rng.choice(candidates)
        centre = self.load(dtype, required=axis)
        step_back = self.rng.random() < 0.5
        shifted = f"{axis.var} - 1" if step_back else f"{axis.var} + 1"
        condition = f"{axis.var} >= 1" if step_back else f"{axis.var} + 1 < {axis.dim.text}"
        text = _replace_index(centre.text, axis.var, shifted)
        zero = "0" if dtype == "int32" else f"T.{dtype}(0)"
        return Value(f"T.if_then_else({condition}, {text}, {zero})", dtype, centre.bound, centre.exact)

    # -- trees ----------------------------------------------------------------------------

    def tree(self, dtype: str, depth: int) -> Value:
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf(dtype)
        operators = INT_OPS if dtype == "int32" else FLOAT_OPS
        limit = INT_BOUND if dtype == "int32" else FLOAT_BOUND[dtype]
        for _ in range(12):
            name = self.rng.choices(list(operators), weights=list(operators.values()))[0]
            value = self._attempt(getattr(self, f"_{name}"), dtype, depth - 1,
                                  accept=lambda v: v is not None and v.bound <= limit)
            if value is not None:
                return value
        return self.leaf(dtype)

    def exact_tree(self, dtype: str) -> Value:
        """A value that every evaluation computes bit for bit alike (for comparisons and casts)."""
        for _ in range(8):
            value = self._attempt(self.tree, dtype, self.rng.randint(0, 1), accept=lambda v: v.exact and not v.product)
            if value is not None:
                return value
        return self.load(dtype)

    def _attempt(self, build, *args, accept) -> Value | None:
        """build(*args) if accept(result); otherwise None, and the inputs the attempt created are dropped."""
        created = len(self.p.params)
        value = build(*args)
        if accept(value):
            return value
        del self.p.params[created:]
        return None

    def condition(self) -> str:
        """A condition on block variables (for if_then_else)."""
        rng = self.rng
        axis = rng.choice(self.axes)
        var, text = axis.var, axis.dim.text
        middle = max(1, axis.dim.size // 2)
        forms = [f"{var} < {middle}", f"{var} % 2 == 0", f"{var} >= {middle}", f"{var} != {middle}",
                 f"{var} * 2 < {text}", f"not ({var} == 0)"]
        cond = rng.choice(forms)
        if len(self.axes) > 1 and rng.random() < 0.3:
            other = rng.choice([a for a in self.axes if a is not axis])
            cond = f"{cond} {rng.choice(['and', 'or'])} {other.var} < {max(1, other.dim.size // 2)}"
        return cond

    def comparison(self, dtype: str) -> str:
        if self.rng.random() < 0.1:   # a mask read from memory
            return self.load("bool").text
        a, b = self.exact_tree(dtype), self.exact_tree(dtype)
        return f"{a.text} {self.rng.choice(['<', '<=', '>', '>=', '==', '!='])} {b.text}"

    # float operators: each returns None when it does not fit the operands it drew

    def _add(self, dtype, depth):
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        op = self.rng.choice(["+", "-"])
        exact = a.exact and b.exact and not (a.product or b.product)
        return Value(f"({a.text} {op} {b.text})", dtype, a.bound + b.bound, exact)

    def _mul(self, dtype, depth):
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        return Value(f"({a.text} * {b.text})", dtype, a.bound * b.bound, a.exact and b.exact,
                     product=dtype != "int32")

    def _div(self, dtype, depth):
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        if self.rng.random() < 0.4:
            c = self.rng.choice([2.0, -4.0, 0.5, 3.0])
            return Value(f"({a.text} / T.{dtype}({c!r}))", dtype, a.bound / min(abs(c), 1) * 2, False)
        return Value(f"({a.text} / (T.fabs({b.text}) + T.{dtype}(1)))", dtype, a.bound, False)

    def _minmax(self, dtype, depth):
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        op = self.rng.choice(["max", "min"])
        return Value(f"T.{op}({a.text}, {b.text})", dtype, max(a.bound, b.bound), a.exact and b.exact)

    def _unary(self, dtype, depth):
        a = self.tree(dtype, depth)
        name = self.rng.choice(["exp", "log", "sqrt", "tanh", "sigmoid", "rsqrt", "erf", "fabs", "neg"])
        if dtype == "float16" and (name == "erf" or name in TRANSCENDENTAL and not self.coarse_ok):
            return None   # TVM's llvm build has no float16 erf
        one = f"T.{dtype}(1)"
        if name == "exp":
            if a.bound > (7 if dtype == "float32" else 4):
                return None
            return Value(f"T.exp({a.text})", dtype, math.exp(a.bound), False)
        if name == "log":
            return Value(f"T.log(T.fabs({a.text}) + {one})", dtype, math.log(a.bound + 1) + 1, False)
        if name == "sqrt":
            return Value(f"T.sqrt(T.fabs({a.text}))", dtype, math.sqrt(a.bound) + 1, False)
        if name == "rsqrt":
            return Value(f"T.rsqrt(T.fabs({a.text}) + {one})", dtype, 1.0, False)
        if name == "fabs":
            return Value(f"T.fabs({a.text})", dtype, a.bound, a.exact, a.product)
        if name == "neg":
            return Value(f"(-{a.text})", dtype, a.bound, a.exact, a.product)
        return Value(f"T.{name}({a.text})", dtype, 1.0, False)

    def _select(self, dtype, depth):
        if self.rng.random() > self.features["select"] * 8:
            return None
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        cond = self.comparison(self.rng.choice(["float32", "int32"]) if dtype != "float16" else "float16")
        return Value(f"T.Select({cond}, {a.text}, {b.text})", dtype, max(a.bound, b.bound), a.exact and b.exact)

    def _branch(self, dtype, depth):
        if self.rng.random() > self.features["condition"] * 8 or not self.axes:
            return None
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        return Value(f"T.if_then_else({self.condition()}, {a.text}, {b.text})", dtype, max(a.bound, b.bound),
                     a.exact and b.exact)

    def _recast(self, dtype, depth):
        """A detour through another float type (or an integer computation)."""
        if self.rng.random() < 0.35:
            inner = self.tree("int32", depth)
            return Value(f'T.Cast("{dtype}", {inner.text})', dtype, inner.bound, inner.exact)
        other = "float16" if dtype == "float32" else "float32"
        inner = self.tree(other, depth)
        if inner.bound > FLOAT_BOUND["float16"] or not (inner.exact or self.coarse_ok):
            return None
        return Value(f'T.Cast("{dtype}", {inner.text})', dtype, inner.bound, False)

    def _rounding(self, dtype, depth):
        a = self.exact_tree(dtype)
        name = self.rng.choice(["floor", "ceil", "round", "trunc"])
        return Value(f"T.{name}({a.text})", dtype, a.bound + 1, a.exact)

    # integer operators

    def _intdiv(self, dtype, depth):
        a = self.tree(dtype, depth)
        op = self.rng.choice(["T.floordiv", "T.floormod", "T.truncdiv", "T.truncmod", "//", "%"])
        if self.rng.random() < 0.7:
            divisor = str(self.rng.choice([2, 3, 4, 5, 7, -2, -3, -4, -7]))
        else:
            b = self.tree(dtype, depth)
            divisor = f"(T.max({b.text}, 0) + 1)" if self.rng.random() < 0.5 else f"({b.text} * {b.text} + 1)"
        text = f"({a.text} {op} {divisor})" if op in ("//", "%") else f"{op}({a.text}, {divisor})"
        return Value(text, dtype, a.bound)

    def _bits(self, dtype, depth):
        a, b = self.tree(dtype, depth), self.tree(dtype, depth)
        roll = self.rng.random()
        if roll < 0.5:
            op = self.rng.choice(["&", "|", "^"])
            return Value(f"({a.text} {op} {b.text})", dtype, 2 ** max(1, math.ceil(math.log2(max(a.bound, b.bound) + 1))))
        shift = self.rng.randint(1, 3)
        if roll < 0.75:
            return Value(f"({a.text} << {shift})", dtype, a.bound * 2 ** shift)
        return Value(f"({a.text} >> {shift})", dtype, a.bound)

    def _from_float(self, dtype, depth):
        a = self.exact_tree(self.rng.choice(["float32", "float16"]))
        if a.bound > INT_BOUND:
            return None
        return Value(f'T.Cast("int32", {a.text})', dtype, a.bound + 1)


TRANSCENDENTAL = {"exp", "log", "tanh", "sigmoid", "rsqrt", "erf"}
FLOAT_OPS = {"add": 6, "mul": 4, "div": 2, "minmax": 2, "unary": 6, "select": 1, "branch": 1, "recast": 1,
             "rounding": 0.5}
INT_OPS = {"add": 5, "mul": 3, "intdiv": 5, "minmax": 2, "select": 1, "branch": 1, "bits": 2, "from_float": 1}


def _replace_index(load: str, var: str, replacement: str) -> str:
    """`X[v0, v1]` with the index that is exactly `var` replaced (the load keeps `var` whole)."""
    head, _, rest = load.partition("[")
    inner, _, tail = rest.rpartition("]")
    indices = [replacement if i.strip() == var else i.strip() for i in inner.split(",")]
    return f"{head}[{', '.join(indices)}]{tail}"


# -- families ---------------------------------------------------------------------------------

def _float_dtype(rng: random.Random) -> str:
    return "float16" if rng.random() < 0.2 else "float32"


def _store(target: Tensor, value: Value) -> str:
    return f"{target.load()} = {cast(value, target.buffer.dtype).text}"


def family_elementwise(p: ProgramBuilder, features: dict | None = None) -> None:
    rng = p.rng
    axes = p.domain(rng.randint(1, 3))
    dtype = rng.choices(["float32", "float16", "int32"], weights=[6, 2, 2])[0]
    out_dtype = dtype if rng.random() < 0.8 else rng.choice(["float32", "float16", "int32"])
    exprs = Expressions(p, axes, features=features, coarse_ok=out_dtype == "float16")
    if rng.random() < 0.06:
        value = Value(exprs.comparison(rng.choice(["float32", "int32"])), "bool", 1)
        out_dtype = "bool"
    else:
        value = exprs.tree(dtype, rng.randint(1, 4))
    if out_dtype == "int32" and dtype != "int32" and not value.exact:
        out_dtype = dtype
    if dtype == "float16" and not value.exact:
        out_dtype = "float16"
    out = p.output(axes, _other_output_dtype(rng, value, out_dtype))
    if rng.random() < 0.1:   # a second output from the same block
        second = p.output(axes[::-1], dtype)
        body = [_store(out, value), _store(second, exprs.tree(dtype, rng.randint(0, 2)))]
    else:
        body = [_store(out, value)]
    p.nest("compute", axes, "S" * len(axes), body, partial=True)


def _other_output_dtype(rng: random.Random, value: Value, dtype: str) -> str:
    """Sometimes a narrower or wider output: bfloat16 for a float (rounded once, at the store),
    float64 for an exact float, int64 for an int (a float64 output of an inexact float32 value
    would be compared at float64's tolerance)."""
    roll = rng.random()
    if roll < 0.05 and dtype.startswith("float"):
        return "bfloat16"
    if roll < 0.1 and dtype == "float32" and value.exact and not value.product:
        return "float64"
    if roll < 0.1 and dtype == "int32":
        return "int64"
    return dtype


def family_conditional(p: ProgramBuilder) -> None:
    family_elementwise(p, {"neighbour": 0.3, "condition": 0.5, "select": 0.3})


def family_transpose(p: ProgramBuilder) -> None:
    rng = p.rng
    axes = p.domain(rng.randint(2, 4), budget=2048)
    dtype = rng.choice(["float32", "float16", "int32"])
    order = axes[:]
    while order == axes:
        rng.shuffle(order)
    source = Expressions(p, axes, features={"fp16_input": 0}, coarse_ok=dtype == "float16")
    load = f"{p.input(tuple(a.dim for a in axes), dtype).name}[{', '.join(a.var for a in axes)}]"
    value = Value(load, dtype, DATA_BOUND)
    if rng.random() < 0.5:
        other = source.tree(dtype, 1)
        value = Value(f"({value.text} + {other.text})", dtype, value.bound + other.bound, False)
    out = p.output(order, dtype)
    p.nest("transpose", axes, "S" * len(axes), [_store(out, value)], partial=True)


COMBINE = {"sum": "{old} + {new}", "max": "T.max({old}, {new})", "min": "T.min({old}, {new})"}


def _identity(op: str, dtype: str) -> str:
    if op == "sum":
        return "0" if dtype == "int32" else f"T.{dtype}(0)"
    return f'T.{"min_value" if op == "max" else "max_value"}("{dtype}")'


def reduction_nest(p: ProgramBuilder, name: str, axes: list[Axis], kinds: str, target: Tensor, op: str,
                   value: Value, init: str | None) -> None:
    update = COMBINE[op].format(old=target.load(), new=cast(value, target.buffer.dtype).text)
    p.nest(name, axes, kinds, [f"{target.load()} = {update}"],
           init=None if init is None else f"{target.load()} = {init}")


def family_reduction(p: ProgramBuilder) -> None:
    rng = p.rng
    spatial = rng.randint(1, 2)
    reduced = 1 if rng.random() < 0.8 else 2
    axes = p.domain(spatial + reduced)
    kinds = ["S"] * spatial + ["R"] * reduced
    rng.shuffle(kinds)   # row, column and middle reductions
    op = rng.choice(["sum", "sum", "max", "min"])
    dtype = rng.choices(["float32", "int32", "float16"], weights=[6, 2, 0 if op == "sum" else 2])[0]
    value = Expressions(p, axes, coarse_ok=dtype == "float16").tree(dtype, rng.randint(0, 3))
    out = p.output([a for a, k in zip(axes, kinds) if k == "S"], dtype)
    roll = rng.random()
    init = _identity(op, dtype) if roll < 0.65 else (None if roll < 0.85 else Expressions(p, []).constant(dtype).text)
    reduction_nest(p, "reduce", axes, "".join(kinds), out, op, value, init)


def family_matmul(p: ProgramBuilder) -> None:
    rng = p.rng
    dot_sized = rng.random() < 0.5
    low = 16 if dot_sized else 1
    batch = [p.axis(high=4, symbolic_ok=False)] if rng.random() < 0.2 else []
    i, j, k = (p.axis(low=low, high=70) for _ in range(3))
    dtype = rng.choice(["float16", "float32"])
    a_axes = (batch + [k, i]) if rng.random() < 0.25 else (batch + [i, k])
    shared_b = batch and rng.random() < 0.5
    b_axes = ([] if shared_b else batch) + ([j, k] if rng.random() < 0.25 else [k, j])
    a = p.input(tuple(x.dim for x in a_axes), dtype)
    b = p.input(tuple(x.dim for x in b_axes), dtype)
    product = (f'T.Cast("float32", {a.name}[{", ".join(x.var for x in a_axes)}]) * '
               f'T.Cast("float32", {b.name}[{", ".join(x.var for x in b_axes)}])')
    out_axes = batch + [i, j]
    epilogue = rng.random() < 0.7
    acc = p.temp(out_axes, "float32") if epilogue else p.output(out_axes, "float32")
    accumulate = not epilogue and rng.random() < 0.2   # into the output's contents, without T.init
    reduction_nest(p, "matmul", batch + [i, j, k], "S" * (len(batch) + 2) + "R", acc, "sum",
                   Value(product, "float32", 36), None if accumulate else _identity("sum", "float32"))
    if epilogue:
        x = Value(acc.load(), "float32", 1e3, False)
        if rng.random() < 0.7:
            bias = p.input((j.dim,), rng.choice(["float32", dtype]))
            x = Value(f"({x.text} + {cast(Value(f'{bias.name}[{j.var}]', bias.dtype, DATA_BOUND), 'float32').text})",
                      "float32", 1e3, False)
        out = p.output(out_axes, rng.choice(["float32", dtype]))
        p.nest("epilogue", out_axes, "S" * len(out_axes), [_store(out, _activation(rng, x))])


def _activation(rng: random.Random, x: Value) -> Value:
    t = x.text
    forms = {
        "identity": t,
        "relu": f"T.max({t}, T.float32(0))",
        "gelu": f"{t} * T.float32(0.5) * (T.float32(1) + T.erf({t} * T.float32(0.7071067811865476)))",
        "gelu_tanh": f"T.float32(0.5) * {t} * (T.float32(1) + T.tanh(T.float32(0.7978845608) * ({t} + T.float32(0.044715) * {t} * {t} * {t})))",
        "silu": f"{t} * T.sigmoid({t})",
        "scale": f"{t} * T.float32(0.125)",
    }
    return Value(forms[rng.choice(sorted(forms))], "float32", x.bound, False)


def family_reduce_broadcast(p: ProgramBuilder) -> None:
    """softmax, layernorm, rmsnorm, logsumexp and random stats over rows (or columns)."""
    rng = p.rng
    rows = p.domain(rng.randint(1, 2), budget=256)
    col = p.axis(high=70)
    axes = rows + [col]
    stat_first = rng.random() < 0.25   # a column statistic: the reduced axis is the first loop
    if stat_first:
        axes = [col] + rows
    kinds = "".join("R" if a is col else "S" for a in axes)
    dtype = _float_dtype(rng)
    x_buf = p.input(tuple(a.dim for a in axes), dtype)
    x = cast(Value(f"{x_buf.name}[{', '.join(a.var for a in axes)}]", dtype, DATA_BOUND), "float32")
    pattern = rng.choice(["softmax", "layernorm", "rmsnorm", "logsumexp", "random"])
    builder = {"softmax": _softmax, "layernorm": _layernorm, "rmsnorm": _rmsnorm, "logsumexp": _logsumexp,
               "random": _random_stats}[pattern]
    builder(p, axes, rows, col, kinds, x, dtype)


def _stat(p, name, axes, kinds, rows, op, value):
    stat = p.temp(rows, "float32")
    reduction_nest(p, name, axes, kinds, stat, op, value, _identity(op, "float32"))
    return Value(stat.load(), "float32", 1e3, False)


def _count(col: Axis) -> str:
    return f'T.Cast("float32", {col.dim.text})' if not col.dim.static else f"T.float32({col.dim.size})"


def _softmax(p, axes, rows, col, kinds, x, dtype):
    row_max = _stat(p, "row_max", axes, kinds, rows, "max", x)
    exp = Value(f"T.exp({x.text} - {row_max.text})", "float32", 1.0, False)
    if p.rng.random() < 0.5:
        exp_buf = p.temp(axes, "float32")
        p.nest("exp", axes, "S" * len(axes), [_store(exp_buf, exp)])
        exp = Value(exp_buf.load(), "float32", 1.0, False)
    row_sum = _stat(p, "row_sum", axes, kinds, rows, "sum", exp)
    out = p.output(axes, dtype)
    p.nest("normalize", axes, "S" * len(axes), [_store(out, Value(f"{exp.text} / {row_sum.text}", "float32", 1.0, False))])


def _layernorm(p, axes, rows, col, kinds, x, dtype):
    mean = _stat(p, "mean", axes, kinds, rows, "sum", Value(f"{x.text} / {_count(col)}", "float32", 6, False))
    centred = f"({x.text} - {mean.text})"
    var = _stat(p, "var", axes, kinds, rows, "sum", Value(f"{centred} * {centred} / {_count(col)}", "float32", 40, False))
    gamma = p.input((col.dim,), dtype)
    beta = p.input((col.dim,), dtype)
    value = (f'{centred} * T.rsqrt({var.text} + T.float32(1e-5)) * T.Cast("float32", {gamma.name}[{col.var}])'
             f' + T.Cast("float32", {beta.name}[{col.var}])')
    out = p.output(axes, dtype)
    p.nest("normalize", axes, "S" * len(axes), [_store(out, Value(value, "float32", 1e3, False))])


def _rmsnorm(p, axes, rows, col, kinds, x, dtype):
    ms = _stat(p, "sum_sq", axes, kinds, rows, "sum", Value(f"{x.text} * {x.text}", "float32", 36, False))
    out = p.output(axes, dtype)
    value = f"{x.text} * T.rsqrt({ms.text} / {_count(col)} + T.float32(1e-6))"
    p.nest("normalize", axes, "S" * len(axes), [_store(out, Value(value, "float32", 1e3, False))])


def _logsumexp(p, axes, rows, col, kinds, x, dtype):
    row_max = _stat(p, "row_max", axes, kinds, rows, "max", x)
    row_sum = _stat(p, "row_sum", axes, kinds, rows, "sum", Value(f"T.exp({x.text} - {row_max.text})", "float32", 1, False))
    out = p.output(rows, "float32")
    p.nest("lse", rows, "S" * len(rows), [_store(out, Value(f"T.log({row_sum.text}) + {row_max.text}", "float32", 1e3, False))])


def _random_stats(p, axes, rows, col, kinds, x, dtype):
    exprs = Expressions(p, axes)
    stats: list[Tensor] = []
    for index in range(p.rng.randint(1, 2)):
        op = p.rng.choice(["sum", "max", "min"])
        value = Expressions(p, axes, stats).tree("float32", p.rng.randint(0, 2))
        stat = p.temp(rows, "float32")
        reduction_nest(p, f"stat{index}", axes, kinds, stat, op, value, _identity(op, "float32"))
        stats.append(stat)
    final = Expressions(p, axes, stats).tree("float32", 2)
    value = Value(f"({exprs.tree('float32', 1).text} + {final.text})", "float32", 1e4, False)
    out = p.output(axes, dtype)
    p.nest("combine", axes, "S" * len(axes), [_store(out, value)])


def family_integer(p: ProgramBuilder) -> None:
    rng = p.rng
    axes = p.domain(rng.randint(1, 3))
    exprs = Expressions(p, axes, features={"fp16_input": 0})
    value = exprs.tree("int32", rng.randint(2, 4))
    out = p.output(axes, "int32" if rng.random() < 0.8 else "float32")
    p.nest("integer", axes, "S" * len(axes), [_store(out, value)], partial=True)


SCAN_FORMS = ("first_branch", "guarded_previous", "not_first", "next_element")


def family_scan(p: ProgramBuilder) -> None:
    rng = p.rng
    axes = p.domain(rng.randint(1, 2))
    axis = rng.choice(axes)
    op = rng.choice(["sum", "sum", "max", "min", "prod"])
    dtype = rng.choice(["float32", "float32", "int32"]) if op != "prod" else "float32"
    exprs = Expressions(p, axes, features={"neighbour": 0})
    x = exprs.tree(dtype, rng.randint(0, 1)) if op != "prod" else exprs.tree(dtype, 0)
    if op == "prod":   # a product of normal values shrinks or grows fast: keep its terms near 1
        x = Value(f"(T.float32(1) + T.tanh({x.text}) * T.float32(0.25))", "float32", 1.25, False)
    intermediate = rng.random() < 0.3
    y = p.temp(axes, dtype) if intermediate else p.output(axes, dtype)
    previous = _replace_index(y.load(), axis.var, f"{axis.var} - 1")
    combine = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": "T.max({a}, {b})", "min": "T.min({a}, {b})"}[op]
    identity = f"T.{dtype}(1)" if op == "prod" else _identity(op, dtype)
    form = rng.choice(SCAN_FORMS if not intermediate else SCAN_FORMS[:3])
    if form == "first_branch":
        value = f"T.if_then_else({axis.var} == 0, {x.text}, {combine.format(a=previous, b=x.text)})"
    elif form == "guarded_previous":
        value = combine.format(a=x.text, b=f"T.if_then_else({axis.var} >= 1, {previous}, {identity})")
    elif form == "not_first":
        value = combine.format(a=f"T.if_then_else(not ({axis.var} == 0), {previous}, {identity})", b=x.text)
    else:   # reads the element after: the output's input contents, an anti-dependence
        following = _replace_index(y.load(), axis.var, f"{axis.var} + 1")
        value = f"T.if_then_else({axis.var} + 1 < {axis.dim.text}, {combine.format(a=following, b=x.text)}, {x.text})"
    p.nest("scan", axes, "S" * len(axes), [f"{y.load()} = {value}"], split=False)
    if intermediate:
        out = p.output(axes, rng.choice(["float32", dtype]))
        after = Expressions(p, axes, [y]).tree(dtype, 1)
        p.nest("after_scan", axes, "S" * len(axes), [_store(out, Value(f"({y.load()} + {after.text})", dtype, 1e4, False))])


def family_window(p: ProgramBuilder) -> None:
    """Sliding windows: Y[b, i] = reduce_r X[b, i * stride + r] (* W[r]), pooling and 1-D convolution."""
    rng = p.rng
    batch = [p.axis(high=9, symbolic_ok=False)] if rng.random() < 0.5 else []
    i = p.axis(high=40, symbolic_ok=False)
    r = p.axis(high=7, symbolic_ok=False)
    stride = rng.choice([1, 1, 2, 3])
    length = (i.dim.size - 1) * stride + r.dim.size
    dtype = rng.choice(["float32", "float16"])
    x = p.input(tuple(a.dim for a in batch) + (Dim(str(length), length),), dtype)
    window = ", ".join([a.var for a in batch] + [f"{i.var} * {stride} + {r.var}" if stride > 1 else f"{i.var} + {r.var}"])
    load = cast(Value(f"{x.name}[{window}]", dtype, DATA_BOUND), "float32")
    op = rng.choice(["sum", "max", "min"])
    if op == "sum" and rng.random() < 0.7:
        w = p.input((r.dim,), dtype)
        load = Value(f"{load.text} * {cast(Value(f'{w.name}[{r.var}]', dtype, DATA_BOUND), 'float32').text}",
                     "float32", 36, False)
    out = p.output(batch + [i], "float32" if op == "sum" else rng.choice(["float32", dtype]))
    reduction_nest(p, "window", batch + [i, r], "S" * (len(batch) + 1) + "R", out, op, load, _identity(op, out.buffer.dtype))


def family_chain(p: ProgramBuilder) -> None:
    """Two to four blocks over one domain: elementwise maps, reductions of earlier results and
    scans, through intermediates; sometimes an intermediate is also an output."""
    rng = p.rng
    axes = p.domain(rng.randint(1, 3), budget=2048)
    available: list[Tensor] = []
    stages = rng.randint(2, 4)
    for index in range(stages):
        last = index == stages - 1
        kind = rng.choice(["map", "map", "reduce", "update"]) if len(axes) > 1 else rng.choice(["map", "update"])
        pool = available[-2:]
        whole = [t for t in available if t.axes == tuple(axes) and t.buffer.dtype == "float32"]
        if kind == "update" and whole:   # read-modify-write of an earlier result, in a nest of its own
            target = rng.choice(whole)
            value = Expressions(p, list(axes), pool).tree("float32", rng.randint(0, 2))
            p.nest(f"s{index}_update", list(axes), "S" * len(axes),
                   [f"{target.load()} = {target.load()} * T.float32(0.5) + {value.text}"])
            if last:
                available.append(p.output(list(axes), "float32"))
                p.nest(f"s{index}_out", list(axes), "S" * len(axes), [f"{available[-1].load()} = {target.load()}"])
            continue
        if kind == "reduce":
            space = max((t.axes for t in pool), key=len, default=tuple(axes))
            if len(space) < 2:
                space = tuple(axes)
            reduced = rng.choice(space)
            kinds = "".join("R" if a is reduced else "S" for a in space)
            target_axes = [a for a in space if a is not reduced]
            target = p.output(target_axes, "float32") if last or rng.random() < 0.2 else p.temp(target_axes, "float32")
            op = rng.choice(["sum", "max", "min"])
            value = Expressions(p, list(space), pool).tree("float32", rng.randint(0, 2))
            reduction_nest(p, f"s{index}_reduce", list(space), kinds, target, op, value, _identity(op, "float32"))
        else:
            space = list(axes)
            dtype = "float16" if not pool and rng.random() < 0.2 else "float32"   # fp16 of a large value is inf
            exprs = Expressions(p, space, pool)
            value = exprs.tree(dtype, rng.randint(1, 3))
            if pool and pool[-1].buffer.name not in value.text:   # use the previous stage
                value = Value(f"({cast(Value(pool[-1].load(), pool[-1].buffer.dtype, 1e4), dtype).text} + {value.text})",
                              dtype, value.bound + 1e4, False)
            if dtype == "float16" and not value.exact:   # later float32 stages read it: no float16 roundings
                dtype = "float32"
                value = exprs.tree(dtype, rng.randint(1, 3))
            target = p.output(space, dtype) if last or rng.random() < 0.2 else p.temp(space, dtype)
            p.nest(f"s{index}_map", space, "S" * len(space), [_store(target, value)])
        available.append(target)


def family_unsupported(p: ProgramBuilder) -> None:
    """A bitwise-or reduction: docs/lowering.md lists reductions other than +, *, max and min as
    unsupported (products compile since 2026-12-02: tests/lowering/test_product_reductions.py)."""
    axes = p.domain(2, budget=512)
    x = Expressions(p, axes).load("int32")
    out = p.output(axes[:1], "int32")
    p.nest("bitwise_or", axes, "SR", [f"{out.load()} = T.bitwise_or({out.load()}, {x.text})"], init=f"{out.load()} = 0")


LOADED_DIVISIONS = ("T.floordiv", "T.floormod", "T.truncdiv", "T.truncmod", "//", "%")


def family_loaded_integers(p: ProgramBuilder) -> None:
    """What the numerics check must draw data for with care (tir_passes/checks/data_ranges.py):
    integer division and modulo by loaded values (sometimes with a `T.assume` on the divisor's
    sign), gathers through a computed index of a loaded id under a `T.assume` range, and row sums
    into a float16 accumulator (checked under the fp32 accumulation rule)."""
    form = p.rng.choice(["divide", "gather", "half_sum"])
    {"divide": _loaded_division, "gather": _computed_gather, "half_sum": _half_sum}[form](p)


def _loaded_division(p: ProgramBuilder) -> None:
    rng = p.rng
    axes = p.domain(rng.randint(1, 2))
    dims = tuple(a.dim for a in axes)
    index = ", ".join(a.var for a in axes)
    a, b = p.input(dims, "int32"), p.input(dims, "int32")
    op = rng.choice(LOADED_DIVISIONS)
    quotient = f"({a.name}[{index}] {op} {b.name}[{index}])" if op in ("//", "%") else \
        f"{op}({a.name}[{index}], {b.name}[{index}])"
    body = [f"T.assume({b.name}[{index}] {rng.choice(['>', '<'])} 0)"] if rng.random() < 0.4 else []
    out = p.output(axes, "int32")
    p.nest("divide", axes, "S" * len(axes), body + [f"{out.load()} = {quotient} + {a.name}[{index}]"])


def _computed_gather(p: ProgramBuilder) -> None:
    rng = p.rng
    rows, width = p.axis(40, symbolic_ok=False), p.axis(30, symbolic_ok=False)
    vocabulary, offset = rng.randint(3, 20), rng.choice([0, 0, 1, 2])
    ids = p.input((rows.dim,), "int32")
    fact = f"T.assume(0 <= {ids.name}[{rows.var}] and {ids.name}[{rows.var}] < {vocabulary})"
    if rng.random() < 0.5:
        table = p.input((Dim(str(vocabulary * width.dim.size), vocabulary * width.dim.size),), "float32")
        read = f"{table.name}[{ids.name}[{rows.var}] * {width.dim.size} + {width.var}]"
    else:
        table = p.input((Dim(str(vocabulary + offset), vocabulary + offset), width.dim), "float32")
        read = f"{table.name}[{ids.name}[{rows.var}] + {offset}, {width.var}]"
    out = p.output([rows, width], "float32")
    p.nest("gather", [rows, width], "SS", [fact, f"{out.load()} = {read} * T.float32({rng.choice([1.0, 0.5, -2.0])})"])


def _half_sum(p: ProgramBuilder) -> None:
    rng = p.rng
    rows, cols = p.axis(8, symbolic_ok=False), p.axis(250, symbolic_ok=False, low=16)
    dtype = rng.choice(["float16", "float16", "bfloat16"])
    data = p.input((rows.dim, cols.dim), dtype)
    out = p.output([rows], dtype)
    p.nest("half_sum", [rows, cols], "SR", [f"{out.load()} = {out.load()} + {data.name}[{rows.var}, {cols.var}]"],
           init=f"{out.load()} = T.{dtype}(0)")


FAMILY_BUILDERS = {
    "elementwise": family_elementwise,
    "transpose": family_transpose,
    "reduction": family_reduction,
    "matmul": family_matmul,
    "reduce_broadcast": family_reduce_broadcast,
    "integer": family_integer,
    "scan": family_scan,
    "window": family_window,
    "chain": family_chain,
    "conditional": family_conditional,
    "unsupported": family_unsupported,
    "loaded_integers": family_loaded_integers,
}


def generate(seed: int, family: str | None = None, *, scale: int = 1, hostile_names: bool = False) -> Program:
    """The program of `seed` (of `family` when given, else a family drawn by FAMILIES' weights);
    `scale` multiplies extents and nest sizes (the GPU campaign's larger programs);
    `hostile_names`: the same program with its loops, buffers, scalar parameters and symbolic sizes
    named as the code generator's own temporaries and derived names, Python's and Triton's names
    (HOSTILE_LOOP_NAMES, HOSTILE_BUFFER_NAMES, HOSTILE_SCALAR_NAMES, HOSTILE_SIZE_NAMES)."""
    rng = random.Random(seed)
    if family is None:
        family = rng.choices(list(FAMILIES), weights=list(FAMILIES.values()))[0]
        if random.Random(f"loaded_integers {seed}").random() < LOADED_INTEGERS_SHARE:
            family = "loaded_integers"
        elif random.Random(f"gluon {seed}").random() < GLUON_SHARE:
            family = "gluon"
    if family == "gluon":
        return generate_gluon(seed, scale)
    state = rng.getstate()

    def names():
        return random.Random(seed * 7919 + 17) if hostile_names else None

    builder = ProgramBuilder(rng, family, scale, names())
    FAMILY_BUILDERS[family](builder)
    if _unbound_symbols(builder):
        # a size no parameter has as a whole dimension cannot be bound at launch: same draws, static sizes
        rng.setstate(state)
        builder = ProgramBuilder(rng, family, scale, names())
        builder.symbolic_rate = 0.0
        FAMILY_BUILDERS[family](builder)
    return builder.render(f"fuzz_{seed}", seed)


def _unbound_symbols(builder: ProgramBuilder) -> list[str]:
    whole = {d.text for b in builder.params if b.role != "scalar" for d in b.dims}
    return [s for s in builder.symbols if s not in whole]


# --- the Gluon backend's family ---------------------------------------------------------------------
GLUON_MAPS = ("{x} * T.float32({c})", "{x} + T.float32({c})", "T.max({x}, T.float32({c}))",
              "T.exp({x} * T.float32(0.25))", "T.sqrt(T.abs({x}) + T.float32(1))", "{x} * {x} * T.float32(0.125)",
              "T.min({x}, T.float32({c})) - {x}")


def _gluon_value(rng: random.Random, x: str) -> str:
    for _ in range(rng.randint(1, 3)):
        x = rng.choice(GLUON_MAPS).format(x=f"({x})", c=rng.choice([0.5, -1.5, 2.0, 0.25, 3.0]))
    return x


def generate_gluon(seed: int, scale: int = 1) -> Program:
    """A thread-bound schedule the Gluon backend compiles (docs/writing-a-backend.md): tiles that
    divide the loops, one threadIdx extent per kernel, power-of-two tile loops (the backend's
    layouts are linear over bits: docs/bank-conflicts.md). `map`: a row per program, columns in
    1, 2 or 4 chunks of a warp-multiple; `staged`: a transpose through a shared tile (the CUDA schedule of
    examples/shared_memory.py), with an elementwise map on the way. float16 or float32 inputs,
    computed in float32 (bounded maps: |x| stays small)."""
    rng = random.Random(f"gluon program {seed}")
    dtype = rng.choice(["float32", "float32", "float16"])
    load = (lambda text: f'T.Cast("float32", {text})') if dtype == "float16" else (lambda text: text)
    if rng.random() < 0.5:
        rows, threads, chunks = rng.randint(1, 6 * scale), rng.choice([32, 64]), rng.choice([1, 2, 4])
        cols = threads * chunks
        signature = f'X: T.Buffer(({rows}, {cols}), "{dtype}"), Y: T.Buffer(({rows}, {cols}), "float32")'
        value = _gluon_value(rng, load("X[v0, v1]"))
        body = [f'for b in T.thread_binding({rows}, thread="blockIdx.x"):',
                f"    for c in range({chunks}):",
                f'        for t in T.thread_binding({threads}, thread="threadIdx.x"):',
                '            with T.sblock("Y"):',
                f"                v0 = T.axis.spatial({rows}, b)",
                f"                v1 = T.axis.spatial({cols}, c * {threads} + t)",
                f"                Y[v0, v1] = {value}"]
        form = "map"
    else:
        tile, row_tiles, col_tiles = 32, rng.randint(1, 2 * scale), rng.randint(1, scale + 1)
        rows, cols = tile * row_tiles, tile * col_tiles
        signature = f'X: T.Buffer(({rows}, {cols}), "{dtype}"), Y: T.Buffer(({cols}, {rows}), "float32")'
        value = _gluon_value(rng, load("X_shared[vi, vj]"))
        body = [f'X_shared = T.sblock_alloc_buffer(({rows}, {cols}), "{dtype}", scope="shared")',
                f'for j0 in T.thread_binding({col_tiles}, thread="blockIdx.y"):',
                f'    for i0 in T.thread_binding({row_tiles}, thread="blockIdx.x"):',
                f"        for a0 in range({tile}):",
                f'            for a1 in T.thread_binding({tile}, thread="threadIdx.x"):',
                '                with T.sblock("X_shared"):',
                f"                    v0 = T.axis.spatial({rows}, i0 * {tile} + a0)",
                f"                    v1 = T.axis.spatial({cols}, j0 * {tile} + a1)",
                "                    X_shared[v0, v1] = X[v0, v1]",
                f"        for j1 in range({tile}):",
                f'            for i1 in T.thread_binding({tile}, thread="threadIdx.x"):',
                '                with T.sblock("Y"):',
                f"                    vi = T.axis.spatial({rows}, i0 * {tile} + i1)",
                f"                    vj = T.axis.spatial({cols}, j0 * {tile} + j1)",
                f"                    Y[vj, vi] = {value}"]
        form = "staged"
    name = f"fuzz_{seed}"
    header = [f'"""tir-triton fuzz program: seed {seed}, family gluon ({form}), for the Gluon backend."""',
              "from tvm.script import tirx as T", "", "SIZES = {}", "BACKEND = \"gluon\"", "", ""]
    text = "\n".join(header + ["@T.prim_func(s_tir=True)", f"def {name}({signature}):"]
                     + ["    " + line for line in body]) + "\n"
    return Program(seed, "gluon", name, text, {}, backend="gluon")
