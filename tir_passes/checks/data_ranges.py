"""The values the numerics check may draw for each integer buffer parameter of a program.

TVM's llvm build runs the program as written, with no check of an index and no guard around a
division: random integers that the program says it never sees (through `T.assume`), that index
outside a buffer, or that divide by zero make the reference crash or read garbage, and the check
would blame whatever it compared next. So integer data respect the program (docs/verification.md,
"Data that respect the program"):

- every `T.assume` bound on a loaded value (`T.assume(0 <= ids[i] and ids[i] < V)`, either side,
  conjunctions) narrows that buffer's values;
- every index that is linear in one loaded value (`table[ids[i], j]`, `table[ids[i] * D + j]`,
  `table[ids[i] + 1, j]`, a cast around the load) is solved for the load: the values keep the
  index inside its dimension for every value of the other variables (their loop and block
  ranges);
- a buffer loaded as the divisor of a division or modulo draws no zero (nor can a small value
  be INT_MIN, so INT_MIN / -1 never arises from drawn data).

A range is one interval [low, high) per buffer (every use narrows it). A buffer that no index
narrows draws inside its assumed bounds and the default small range (-8..8, or 0..15 unsigned).
What cannot be solved this way (an index of two loaded values, a computed divisor) may still
crash the reference: that is reported as the program's undefined behaviour on the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx

from tir_passes.analyses.assumptions import is_assumption

DEFAULT_SIGNED = (-8, 9)
DEFAULT_UNSIGNED = (0, 16)


@dataclass(frozen=True)
class ValueRange:
    """[low, high) of a buffer's values (None: unbounded on that side); `indexes`: some index
    narrows it (the whole range is drawn, not only its small part); `nonzero`: a divisor."""

    low: int | None = None
    high: int | None = None
    indexes: bool = False
    nonzero: bool = False

    def narrowed(self, low: int | None, high: int | None, indexes: bool = False) -> "ValueRange":
        new_low = low if self.low is None else (self.low if low is None else max(low, self.low))
        new_high = high if self.high is None else (self.high if high is None else min(high, self.high))
        return ValueRange(new_low, new_high, self.indexes or indexes, self.nonzero)

    @property
    def constrained(self) -> bool:
        """Narrowed by an index or an assumption (so the all-negative data set keeps its values)."""
        return self.low is not None or self.high is not None

    def bounds(self, dtype: str) -> tuple[int, int]:
        """The [low, high) data are drawn from."""
        default = DEFAULT_UNSIGNED if dtype.startswith("uint") else DEFAULT_SIGNED
        info = _integer_limits(dtype)
        if self.indexes and self.low is not None and self.high is not None:
            low, high = self.low, self.high
        else:
            low = default[0] if self.low is None else max(self.low, default[0])
            high = default[1] if self.high is None else min(self.high, default[1])
            if low >= high:  # the assumed range lies outside the small one: its first values
                low, high = (self.low, self.low + 17) if self.low is not None else (self.high - 17, self.high)
        return max(low, info[0]), min(high, info[1] + 1)


def _integer_limits(dtype: str) -> tuple[int, int]:
    bits = int(dtype[4:] if dtype.startswith("uint") else dtype[3:])
    if dtype.startswith("uint"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def value_ranges(func: tirx.PrimFunc) -> dict[str, ValueRange]:
    """Integer buffer parameter -> the values it may hold, for each parameter the program narrows."""
    integral = {p.name for p in func.params if tirx.is_buffer_var(p) and str(p.dtype).startswith(("int", "uint"))}
    ranges: dict[str, ValueRange] = {}

    def narrow(name: str, low: int | None, high: int | None, indexes: bool = False) -> None:
        ranges[name] = ranges.get(name, ValueRange()).narrowed(low, high, indexes)

    analyzer = _bound_variables(func)
    for name, low, high in _index_solutions(func, integral, analyzer):
        narrow(name, low, high, indexes=True)
    for fact in _assumed_conditions(func):
        for name, low, high in _value_bounds(fact):
            if name in integral:
                narrow(name, low, high)
    for name in _divisors(func, integral):
        old = ranges.get(name, ValueRange())
        ranges[name] = ValueRange(old.low, old.high, old.indexes, True)
    return dict(sorted(ranges.items()))


def _bound_variables(func: tirx.PrimFunc):
    """An analyzer that knows every loop variable's and block variable's static range."""
    analyzer = sym.Analyzer()

    def loop(node: tirx.For) -> None:
        if isinstance(node.min, tirx.IntImm) and isinstance(node.extent, tirx.IntImm) and node.extent.value > 0:
            analyzer.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))

    def block(node) -> None:
        for iv in node.iter_vars:
            dom = iv.dom
            if isinstance(dom.min, tirx.IntImm) and isinstance(dom.extent, tirx.IntImm) and dom.extent.value > 0:
                analyzer.bind(iv.var, dom)

    from tvm import s_tir

    tvm_ffi.structural_walk(func.body, [(tirx.For, loop), (s_tir.SBlock, block)])
    return analyzer


def _accesses(func: tirx.PrimFunc) -> list:
    found: list = []
    tvm_ffi.structural_walk(func.body, [((tirx.BufferStore, tvm.ir.TensorLoad), found.append)])
    return found


def _loaded_names(expr, integral: set[str]) -> list[str]:
    names: list[str] = []

    def note(load) -> None:
        if load.source.name in integral and load.source.name not in names:
            names.append(load.source.name)

    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, note))
    return names


def _index_solutions(func: tirx.PrimFunc, integral: set[str], analyzer) -> list[tuple[str, int, int]]:
    """(buffer, low, high) keeping each index that is linear in one loaded value inside its dimension."""
    solutions = []
    for node in _accesses(func):
        buf = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        for index, extent in zip(node.indices, buf.shape):
            names = _loaded_names(index, integral)
            if len(names) != 1 or not isinstance(extent, tirx.IntImm):
                continue
            solved = _solve(index, names[0], int(extent.value), analyzer)
            if solved is not None:
                solutions.append((names[0], *solved))
    return solutions


def _solve(index, name: str, extent: int, analyzer) -> tuple[int, int] | None:
    """[low, high) of the loaded value x with 0 <= a * x + rest < extent for every rest."""
    expr, variables = _with_value_variables(index, name)
    if not variables:
        return None
    coefficients = sym.detect_linear_equation(analyzer.simplify(expr), variables)
    if len(coefficients) != len(variables) + 1 or not all(isinstance(c, tirx.IntImm) for c in coefficients[:-1]):
        return None
    a = sum(int(c.value) for c in coefficients[:-1])   # a cast of a small value is the value
    rest = analyzer.const_int_bound(coefficients[-1])
    if a == 0 or abs(rest.min_value) > 1 << 40 or abs(rest.max_value) > 1 << 40:
        return None
    low_total, high_total = -rest.min_value, extent - 1 - rest.max_value   # a * x must lie in here
    if a > 0:
        return _ceil_div(low_total, a), high_total // a + 1
    return _ceil_div(high_total, a), low_total // a + 1


def _with_value_variables(index, name: str):
    """`index` with each load of `name` a variable (a cast load a variable of the cast's type)."""
    made: dict[str, tirx.Var] = {}

    def variable(dtype: str) -> tirx.Var:
        return made.setdefault(dtype, tirx.Var(f"x_{dtype}", dtype))

    def load(node):
        return variable(node.ty.dtype) if node.source.name == name else node

    def cast(node):
        if any(node.value.same_as(v) for v in made.values()):
            return variable(node.ty.dtype)
        return node

    expr = tvm_ffi.structural_map(index, [(tvm.ir.TensorLoad, load), (tirx.Cast, cast)])
    return expr, [v for v in made.values() if _uses(expr, v)]


def _ceil_div(p: int, q: int) -> int:
    return -(-p // q)


def _uses(expr, var) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return any(v.same_as(var) for v in found)


def _divisors(func: tirx.PrimFunc, integral: set[str]) -> list[str]:
    """Buffers loaded (perhaps cast) as the divisor of an integer division or modulo."""
    names: list[str] = []

    def note(node) -> None:
        divisor = node.b.value if isinstance(node.b, tirx.Cast) else node.b
        name = divisor.source.name if isinstance(divisor, tvm.ir.TensorLoad) else None
        if name in integral and name not in names:
            names.append(name)

    kinds = tuple(k for k in (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod) if k is not None)
    tvm_ffi.structural_walk(func.body, (kinds, note))
    return names


def _assumed_conditions(func: tirx.PrimFunc) -> list:
    statements: list = []
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, statements.append))
    return [stmt.value.args[0] for stmt in statements if is_assumption(stmt)]


_MIRRORED = {tirx.LT: tirx.GT, tirx.LE: tirx.GE, tirx.GT: tirx.LT, tirx.GE: tirx.LE}


def _value_bounds(fact) -> list[tuple[str, int | None, int | None]]:
    """(buffer, low, high) for each conjunct `load < c`, `c <= load`, ... of `fact` (None: no bound)."""
    if isinstance(fact, tirx.And):
        return _value_bounds(fact.a) + _value_bounds(fact.b)
    if type(fact) not in _MIRRORED:
        return []
    load, bound, op = fact.a, fact.b, type(fact)
    if isinstance(_uncast(bound), tvm.ir.TensorLoad):  # `c < load` reads as `load > c`
        load, bound, op = bound, load, _MIRRORED[op]
    load = _uncast(load)
    if not (isinstance(load, tvm.ir.TensorLoad) and isinstance(bound, tirx.IntImm)):
        return []
    c = int(bound.value)
    low, high = {tirx.LT: (None, c), tirx.LE: (None, c + 1), tirx.GT: (c + 1, None), tirx.GE: (c, None)}[op]
    return [(load.source.name, low, high)]


def _uncast(expr):
    return expr.value if isinstance(expr, tirx.Cast) else expr
