"""Register layouts from thread bindings, and shared layouts from BankConflictFreeTiling's decision.

A block's box (ir.Box) is covered by its tile loops: thread-bound loops, and serial, vectorized
or unrolled loops each thread runs. With power-of-two extents, flipping one bit of a loop
variable moves the block's iteration variables by a fixed step, so the map from (register index,
lane id, warp id) to box index is linear over bits: exactly Gluon's DistributedLinearLayout.
Lanes are the thread ids in CUDA's order (threadIdx.x fastest, then y, z); registers take the
vectorized loops' bits first (consecutive registers are the vector), then the other loops'
innermost first. The layout is checked on every point of the loop space (or a sample of it when
the space is very large; numpy evaluates all points at once), so a schedule that does not map
threads linearly is refused by name.
"""

from __future__ import annotations

import itertools

import numpy as np
from tvm import tirx

from tir_passes.errors import UnsupportedConstructError
from tir_passes.contracts.shared_layout import NVMMA, PADDED, SWIZZLED, SharedLayoutDecision

from .ir import BlockedLayout, LinearLayout

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_EXHAUSTIVE = 1 << 20


def evaluator(expr):
    """A Python function of {var handle: int} computing an integer TIR expression; the values may be
    numpy integer arrays, to evaluate many points at once."""
    if isinstance(expr, tirx.IntImm):
        value = int(expr.value)
        return lambda env: value
    if isinstance(expr, tirx.Var):
        key = expr.__chandle__()
        return lambda env: env[key]
    ops = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
           tirx.FloorDiv: lambda a, b: a // b, tirx.FloorMod: lambda a, b: a % b,
           tirx.Min: np.minimum, tirx.Max: np.maximum}
    op = ops.get(type(expr))
    if op is None:
        raise UnsupportedConstructError(f"the index `{expr}` is not an affine expression of loop variables "
                                        "(+, -, *, floordiv, floormod) that the Gluon backend can lay out")
    a, b = evaluator(expr.a), evaluator(expr.b)
    return lambda env: op(a(env), b(env))


def log2(n: int) -> int:
    return n.bit_length() - 1


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class LoopSpace:
    """The tile loops of one block: which bits are registers, lanes and warps."""

    def __init__(self, loops: list[tirx.For], thread_extents: dict[str, int], where: str):
        self.loops = loops
        self.where = where
        self.thread_extents = thread_extents
        for loop in loops:
            extent = int(loop.extent.value)
            if not is_power_of_two(extent):
                raise UnsupportedConstructError(f"{where}: loop {loop.loop_var.name} has extent {extent}; the Gluon "
                                                "backend needs power-of-two tile loops (split by a power of two)")
            tag = _thread_tag(loop)
            if tag is not None and extent != thread_extents[tag]:
                raise UnsupportedConstructError(f"{where}: loop {loop.loop_var.name} binds {extent} of the kernel's "
                                                f"{thread_extents[tag]} {tag}; every stage must use all threads")

    @property
    def threads(self) -> int:
        count = 1
        for extent in self.thread_extents.values():
            count *= extent
        return count

    def _registers(self) -> list[tuple[tirx.For, int]]:
        """(loop, bit) for each register bit: vectorized loops first, then inner loops first."""
        own = [loop for loop in reversed(self.loops) if _thread_tag(loop) is None]
        ordered = [loop for loop in own if loop.kind == tirx.ForKind.VECTORIZED] + \
                  [loop for loop in own if loop.kind != tirx.ForKind.VECTORIZED]
        return [(loop, bit) for loop in ordered for bit in range(log2(int(loop.extent.value)))]

    def _thread_point(self, thread: int) -> dict:
        """Loop values of the thread-bound loops for one linear thread id."""
        values, rest = {}, thread
        by_tag = {_thread_tag(loop): loop for loop in self.loops if _thread_tag(loop) is not None}
        for tag in THREAD_TAGS:
            extent = self.thread_extents.get(tag, 1)
            rest, value = divmod(rest, extent)
            if tag in by_tag:
                values[by_tag[tag].loop_var.__chandle__()] = value
        return values

    def _zero(self) -> dict:
        return {loop.loop_var.__chandle__(): 0 for loop in self.loops}

    def layout(self, coords, shape: tuple[int, ...]) -> LinearLayout:
        """The linear layout of `coords` (loop values -> box index) over these loops."""
        def at(values: dict) -> tuple[int, ...]:
            return tuple(int(c) for c in coords({**self._zero(), **values}))

        reg = tuple(at({loop.loop_var.__chandle__(): 1 << bit}) for loop, bit in self._registers())
        thread_bits = [at(self._thread_point(1 << bit)) for bit in range(log2(self.threads))]
        layout = LinearLayout(reg, tuple(thread_bits[:5]), tuple(thread_bits[5:]), shape)
        self._check_linear(layout, lambda values: coords({**self._zero(), **values}))
        return layout

    def _check_linear(self, layout: LinearLayout, at) -> None:
        """Every point of the loop space (`at` maps loop values, as arrays, to box indices)."""
        registers = self._registers()
        total_bits = len(registers) + log2(self.threads)
        points = np.arange(1 << total_bits, dtype=np.int64)
        if len(points) > _EXHAUSTIVE:
            points = np.random.default_rng(0).choice(points, _EXHAUSTIVE, replace=False)
        values = {}
        for bit, (loop, loop_bit) in enumerate(registers):
            key = loop.loop_var.__chandle__()
            values[key] = values.get(key, 0) | ((points >> bit & 1) << loop_bit)
        values.update(self._thread_point(points >> len(registers)))
        expected = [np.zeros_like(points) for _ in layout.shape]
        for bit, basis in enumerate(list(layout.reg) + list(layout.lane) + list(layout.warp)):
            on = points >> bit & 1
            expected = [e ^ (on * b) for e, b in zip(expected, basis)]
        if not all(np.array_equal(np.broadcast_to(got, points.shape), want) for got, want in zip(at(values), expected)):
            raise UnsupportedConstructError(f"{self.where}: the thread bindings do not map threads to the block's "
                                            "tile linearly (a loop split that is not a power of two, or an index "
                                            "that carries between loops); the Gluon backend needs a linear layout")


def _thread_tag(loop: tirx.For) -> str | None:
    if loop.kind == tirx.ForKind.THREAD_BINDING and loop.thread_binding is not None:
        tag = str(loop.thread_binding.thread_tag)
        return tag if tag in THREAD_TAGS else None
    return None


def thread_tag(loop: tirx.For) -> str | None:
    return _thread_tag(loop)


# --- blocked layouts (what gl.dot_fma needs for its accumulator) ------------------------------------
def blocked_bases(layout: BlockedLayout, shape: tuple[int, ...]) -> tuple[set, list, list]:
    """(register bases as a set, lane bases, warp bases) of a BlockedLayout over `shape`."""
    rank = len(shape)

    def unit(dim: int, value: int) -> tuple[int, ...]:
        return tuple(value if d == dim else 0 for d in range(rank))

    reg, lane, warp = [], [], []
    for dim in layout.order:
        reg += [unit(dim, 1 << b) for b in range(log2(layout.size_per_thread[dim]))]
    for dim in layout.order:
        step = layout.size_per_thread[dim]
        lane += [unit(dim, step << b) if step << b < shape[dim] else unit(dim, 0)
                 for b in range(log2(layout.threads_per_warp[dim]))]
    for dim in layout.order:
        step = layout.size_per_thread[dim] * layout.threads_per_warp[dim]
        warp += [unit(dim, step << b) if step << b < shape[dim] else unit(dim, 0)
                 for b in range(log2(layout.warps_per_cta[dim]))]
    for dim in layout.order:
        covered = layout.size_per_thread[dim] * layout.threads_per_warp[dim] * layout.warps_per_cta[dim]
        reg += [unit(dim, covered << b) for b in range(log2(max(1, shape[dim] // covered)))]
    return set(reg), lane, warp


def as_blocked(layout: LinearLayout) -> BlockedLayout | None:
    """The BlockedLayout equal to a linear layout, or None when there is none."""
    rank = len(layout.shape)

    def along(bases, dim: int) -> list[int]:
        return [b[dim] for b in bases if b[dim] and sum(1 for x in b if x) == 1]

    def first(bases, dim: int) -> int:
        return next((i for i, b in enumerate(bases) if b[dim]), len(bases))

    tpw = tuple(1 << len(along(layout.lane, d)) for d in range(rank))
    wpc = tuple(1 << len(along(layout.warp, d)) for d in range(rank))
    spt = tuple(min(along(layout.lane, d) or [max(1, min(along(layout.warp, d) or [1]) // tpw[d])]) for d in range(rank))  # noqa: E501
    order = tuple(
        sorted(range(rank), key=lambda d: (first(layout.lane, d), first(layout.warp, d), first(layout.reg, d)))
    )
    candidate = BlockedLayout(spt, tpw, wpc, order)
    reg, lane, warp = blocked_bases(candidate, layout.shape)
    if reg == set(layout.reg) and lane == list(layout.lane) and warp == list(layout.warp):
        return candidate
    return None


# --- shared layouts ----------------------------------------------------------------------------------
def shared_layout_source(decision: SharedLayoutDecision) -> str:
    """The Gluon constructor of the decided layout (works on Triton 3.6 and 3.9)."""
    rank = len(decision.tile)
    order = list(range(rank - 1, -1, -1))
    if decision.kind == PADDED:
        # positional: the third field is block_bases on 3.6 and cga_layout on 3.9
        return (
            f"gl.PaddedSharedLayout.with_identity_for([[{decision.row}, {decision.pad}]], "
            f"{list(decision.tile)}, {order})"
        )
    if decision.kind == SWIZZLED:
        return f"gl.SwizzledSharedLayout({decision.vec}, {decision.per_phase}, {decision.max_phase}, {order})"
    if decision.kind == NVMMA:
        return (
            f"gl.NVMMASharedLayout(swizzle_byte_width={decision.swizzle_bytes}, "
            f"element_bitwidth={decision.element_bytes * 8}, rank={rank})"
        )
    return f"gl.SwizzledSharedLayout(1, 1, 1, {order})"


def layout_source(layout) -> str:
    from .ir import MmaLayout

    if isinstance(layout, LinearLayout):
        return (
            f"gl.DistributedLinearLayout({_lists(layout.reg)}, {_lists(layout.lane)}, {_lists(layout.warp)}, [], "
            f"{list(layout.shape)})"
        )
    if isinstance(layout, BlockedLayout):
        return (
            f"gl.BlockedLayout({list(layout.size_per_thread)}, {list(layout.threads_per_warp)}, "
            f"{list(layout.warps_per_cta)}, {list(layout.order)})"
        )
    if isinstance(layout, MmaLayout):
        return (
            f"gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta={list(layout.warps_per_cta)}, "
            f"instr_shape={list(layout.instr_shape)})"
        )
    raise TypeError(layout)


def _lists(bases) -> str:
    return "[" + ", ".join(str(list(b)) for b in bases) + "]"


def box_points(extents: tuple[int, ...]):
    return itertools.product(*(range(e) for e in extents))
