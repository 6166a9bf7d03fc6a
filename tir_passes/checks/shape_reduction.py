"""A shape-reduced copy of a program, for numerics at real sizes in seconds.

TVM's llvm build of a 16384 x 8192 program runs for seconds per stage and data set, and Triton's
interpreter far longer; checking every stage at that size takes minutes. The checks that read the
whole IR (well-formed, round trip, purity, bounds, contract) stay at the real size; the numerics
and the kernel check run on a copy of the same program in which every large static size is
replaced, consistently, by a small one, and the same pipeline compiles that copy.

Which sizes: every integer constant above REDUCE_ABOVE in buffer shapes, loop extents, block
iteration domains and index expressions. Each distinct size S maps to a distinct small S' with the
same remainder modulo KEEP_MODULO (so a size that the tiles divide still divides, and a ragged one
stays ragged). Sizes that must keep a relation (a pooling window's input is 2 * output + 1) may
not survive an independent replacement: the copy is used only when it is well formed and passes
the bounds check; otherwise numerics run at full size, and say so.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

REDUCE_ABOVE = 128
KEEP_MODULO = 64
ELEMENTS_AT_FULL_SIZE = 1 << 18   # buffers up to this many elements in all are checked as they are


@dataclass(frozen=True)
class ReducedCopy:
    func: tirx.PrimFunc | None
    sizes: dict[int, int]          # real size -> the size the copy uses
    reason: str = ""               # why there is no copy (func is None)
    dims: dict[int, tuple[str, ...]] | None = None   # real size -> the parameter dims that have it ("A.shape[0]")

    def describe(self) -> str:
        if self.func is None and self.reason == "no size is reduced":
            return "full size (no smaller copy decides as it does)"
        if self.func is None:
            return f"full size ({self.reason})"
        return "reduced sizes " + ", ".join(f"{s}->{r}{self._where(s)}" for s, r in sorted(self.sizes.items()))

    def _where(self, size: int) -> str:
        dims = (self.dims or {}).get(size, ())
        return f" ({', '.join(dims)})" if dims else ""


def parameter_dims(func: tirx.PrimFunc) -> dict[int, tuple[str, ...]]:
    """Each static size of a buffer parameter -> the dims that have it, in parameter order."""
    found: dict[int, list[str]] = {}
    for param in func.params:
        if tirx.is_buffer_var(param):
            for axis, dim in enumerate(param.shape):
                if isinstance(dim, tirx.IntImm):
                    found.setdefault(int(dim.value), []).append(f"{param.name}.shape[{axis}]")
    return {size: tuple(dims) for size, dims in found.items()}


def buffer_elements(func: tirx.PrimFunc) -> list[tuple[object, int]] | None:
    """(parameter, element count) of every buffer parameter, or None when a size is symbolic."""
    counts = []
    for param in func.params:
        if not tirx.is_buffer_var(param):
            continue
        if not all(isinstance(dim, tirx.IntImm) for dim in param.shape):
            return None
        counts.append((param, math.prod(int(dim.value) for dim in param.shape)))
    return counts


def _static_elements(func: tirx.PrimFunc) -> int | None:
    counts = buffer_elements(func)
    return None if counts is None else sum(count for _, count in counts)


def _large_sizes(func: tirx.PrimFunc) -> list[int]:
    found: set[int] = set()

    def note(node):
        if node.ty.dtype.startswith("int") and int(node.value) > REDUCE_ABOVE:
            found.add(int(node.value))

    tvm_ffi.structural_walk(func.body, (tirx.IntImm, note))
    for param in func.params:
        if tirx.is_buffer_var(param):
            for dim in param.shape:
                if isinstance(dim, tirx.IntImm) and int(dim.value) > REDUCE_ABOVE:
                    found.add(int(dim.value))
    return sorted(found)


def size_map(sizes: list[int], base: int = KEEP_MODULO) -> dict[int, int]:
    """Distinct smaller sizes from `base` up with the same remainder modulo KEEP_MODULO, larger
    sizes staying larger; a size the rule would not make smaller stays as it is."""
    mapping: dict[int, int] = {}
    taken: set[int] = set()
    for size in sorted(sizes):
        small = base + size % KEEP_MODULO
        while small in taken or any(small <= mapping[s] for s in mapping if s < size):
            small += KEEP_MODULO
        mapping[size] = min(small, size)
        taken.add(mapping[size])
    return mapping


def is_order_preserving(mapping: dict[int, int]) -> bool:
    """Distinct sizes stay distinct and in order (so no relation between them changes sign)."""
    ordered = [mapping[s] for s in sorted(mapping)]
    return all(a < b for a, b in zip(ordered, ordered[1:]))


# bases of the larger copies tried when the smallest copy decides differently from the full size
ESCALATION_BASES = (256, 1024, 4096, 16384)
ELEMENTS_OF_A_LARGER_COPY = 1 << 22   # buffers of a larger copy, in all


def copy_with(func: tirx.PrimFunc, mapping: dict[int, int]) -> ReducedCopy:
    """`func` with `mapping` applied to its sizes, or the reason it cannot be."""
    mapping = {s: r for s, r in mapping.items() if s != r}
    if not mapping:
        return ReducedCopy(None, {}, "no size is reduced")
    try:
        copy = _with_sizes(func, mapping)
    except Exception as err:  # noqa: BLE001 - no copy: numerics run at full size, and say why
        return ReducedCopy(None, mapping, f"the sizes cannot be replaced ({type(err).__name__})")
    problem = _invalid(copy)
    return ReducedCopy(None, mapping, problem) if problem else ReducedCopy(copy, mapping, dims=parameter_dims(func))


def larger_mappings(func: tirx.PrimFunc) -> list[dict[int, int]]:
    """Size maps larger than the smallest, each within ELEMENTS_OF_A_LARGER_COPY elements and order
    preserving, cheapest first: for each base, one size raised to it alone, then all of them."""
    sizes = _large_sizes(func)
    smallest = size_map(sizes)
    found: list[dict[int, int]] = []
    for base in ESCALATION_BASES:
        raised = size_map(sizes, base)
        candidates = [smallest | {size: raised[size]} for size in sorted(sizes, reverse=True)] + [raised]
        for mapping in candidates:
            if (mapping != smallest and mapping not in found and is_order_preserving(mapping)
                    and _elements_with(func, mapping) <= ELEMENTS_OF_A_LARGER_COPY):
                found.append(mapping)
    return found


def _elements_with(func: tirx.PrimFunc, mapping: dict[int, int]) -> int:
    total = 0
    for param in func.params:
        if tirx.is_buffer_var(param):
            count = 1
            for dim in param.shape:
                value = int(dim.value) if isinstance(dim, tirx.IntImm) else 1 << 30
                count *= mapping.get(value, value)
            total += count
    return total


def _replace_sizes(expr_or_stmt, mapping: dict[int, int]):
    def replace(node):
        value = int(node.value)
        if value in mapping and node.ty.dtype.startswith("int"):
            return tirx.IntImm(node.ty.dtype, mapping[value])
        return node

    return tvm_ffi.structural_map(expr_or_stmt, (tirx.IntImm, replace))


def _reduced_buffer(buf, mapping: dict[int, int]):
    shape = [tirx.IntImm(d.ty.dtype, mapping[int(d.value)]) if isinstance(d, tirx.IntImm) and int(d.value) in mapping
             else d for d in buf.shape]
    return tirx.decl_buffer(shape, buf.dtype, buf.name, layout=None)


def reduced_copy(func: tirx.PrimFunc) -> ReducedCopy:
    """The copy to run numerics on, or the reason to run them at full size."""
    elements = _static_elements(func)
    if elements is not None and elements <= ELEMENTS_AT_FULL_SIZE:
        return ReducedCopy(None, {}, "small enough")
    sizes = _large_sizes(func)
    if not sizes:
        return ReducedCopy(None, {}, "no static size to reduce")
    return copy_with(func, size_map(sizes))


def _with_sizes(func: tirx.PrimFunc, mapping: dict[int, int]) -> tirx.PrimFunc:
    """`func` with its parameters' shapes and every size in its body replaced (intermediates'
    shapes are in their types, which the same replacement reaches)."""
    params = {p.__chandle__(): _reduced_buffer(p, mapping) for p in func.params if tirx.is_buffer_var(p)}
    body = tvm_ffi.structural_map(func.body, (tirx.Var, lambda v: params.get(v.__chandle__(), v)))
    body = _replace_sizes(body, mapping)
    return tirx.PrimFunc([params.get(p.__chandle__(), p) for p in func.params], body, func.ret_type, func.attrs)


def _invalid(copy: tirx.PrimFunc) -> str:
    from tvm import s_tir

    from tir_passes.checks.bounds import check_bounds

    module = tvm.IRModule({"main": copy})
    try:
        if not s_tir.analysis.verify_well_formed(module, assert_mode=False):
            return "the reduced copy is not well formed"
    except Exception:  # noqa: BLE001
        return "the reduced copy is not well formed"
    problems = check_bounds(module)
    if problems:
        return f"the reduced copy is not in bounds ({problems[0]}): the sizes are related"
    return ""
