"""Shared-memory bank-conflict model (an analysis, usable alone).

For a PrimFunc with `shared` buffers and thread bindings (a CUDA-style schedule), lower it the
way TVM's CUDA build does (flat shared buffers, launch threads, vectorized Ramps), then for every
shared load and store take the 32 lanes of the first warp (threadIdx.x fastest, then y, z; block
indices and serial loop variables at their first value) and count wavefronts:

- 32 banks of 4 bytes; each lane touches the 4-byte words its access covers (element width times
  vector width);
- a request is served in phases: all 32 lanes for accesses of up to 4 bytes per lane, half warps
  for 8 bytes, quarter warps for 16 bytes;
- a phase takes as many wavefronts as the most distinct words any one bank must deliver (lanes
  reading the same word share it: broadcast); the ideal is the phase's distinct words / 32.

`conflicts = wavefronts - ideal`, which is what Nsight Compute's
`l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum` counts per executed request.
Assumes: indices are affine enough to evaluate per lane; the first warp and first iteration are
representative (true for the affine tiles TVM schedules produce).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import sym, tirx

from tir_passes.infra.dtypes import element_bytes

BANKS, BANK_BYTES, WARP = 32, 4, 32


@dataclass(frozen=True)
class SharedAccess:
    kernel: str
    buffer: str
    kind: str          # load or store
    index: str         # the flat index as TIR prints it
    bytes_per_lane: int
    wavefronts: int
    ideal: int
    executions: int    # requests per warp: product of the enclosing serial loops' trip counts
    elements: tuple[int, ...] = ()   # per lane: the flat element index (first element of a vector)
    vector: int = 1                  # elements per lane (a Ramp's lanes)
    run: int = 1                     # consecutive elements one thread reaches over its own loops

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal

    def __str__(self) -> str:
        return (f"{self.kernel}: {self.kind} {self.buffer}[{self.index}] ({self.bytes_per_lane} B/lane): "
                f"{self.wavefronts} wavefront(s), ideal {self.ideal}, {self.conflicts} conflict(s) x {self.executions}")


def phase_lanes(bytes_per_lane: int) -> int:
    return WARP if bytes_per_lane <= 4 else max(1, WARP * 4 // bytes_per_lane)


def count_wavefronts(lane_addresses: list[int], bytes_per_lane: int) -> tuple[int, int]:
    """(wavefronts, ideal) for one warp-wide request; byte addresses of the first byte per lane."""
    per_phase = phase_lanes(bytes_per_lane)
    total = ideal = 0
    for start in range(0, len(lane_addresses), per_phase):
        words: set[int] = set()
        for address in lane_addresses[start:start + per_phase]:
            words.update(range(address // BANK_BYTES, (address + bytes_per_lane - 1) // BANK_BYTES + 1))
        by_bank: dict[int, set[int]] = {}
        for word in words:
            by_bank.setdefault(word % BANKS, set()).add(word)
        total += max(len(w) for w in by_bank.values())
        ideal += max(1, math.ceil(len(words) / BANKS))
    return total, ideal


def lower_for_cuda(mod: tvm.IRModule, arch: str = "sm_90") -> list[tirx.PrimFunc]:
    """The device kernels TVM's CUDA build would emit (no GPU needed)."""
    target = tvm.target.Target({"kind": "cuda", "arch": arch}, host="llvm")
    lowered = tirx.transform.BindTarget(target)(mod)
    passes, _, _ = tirx.get_tir_pipeline("s_tir")
    lowered = passes(lowered)
    return [
        f.with_attr("global_symbol", gv.name_hint)
        for gv, f in sorted(lowered.functions.items(), key=lambda kv: kv[0].name_hint)
        if f.attrs is not None and int(f.attrs.get("calling_conv", 0)) == 2
    ]


class _KernelWalker:
    def __init__(self, kernel: tirx.PrimFunc):
        self.name = str(kernel.attrs["global_symbol"])
        self.threads: dict[str, tuple[tirx.Var, int]] = {}
        self.blocks: list[tirx.Var] = []
        self.loops: list[tuple[tirx.Var, int, int]] = []  # (var, first value, trip count)
        self.shared: set = set()
        self.lets: dict[int, object] = {}
        self.accesses: list[SharedAccess] = []

    def walk(self, stmt) -> None:
        tvm_ffi.structural_visit(
            stmt,
            [
                (tirx.AttrStmt, self._attr),
                (tirx.AllocBuffer, self._alloc),
                (tirx.LetStmt, self._let),
                (tirx.For, self._for),
                (tirx.BufferStore, self._store),
                (tvm.ir.TensorLoad, self._load),
            ],
        )

    def _attr(self, node, visitor) -> None:
        if node.attr_key == "thread_extent":
            iv = node.node
            tag = str(iv.thread_tag)
            if tag.startswith("threadIdx"):
                self.threads[tag] = (iv.var, int(node.value))
            else:
                self.blocks.append(iv.var)
        visitor.default_visit(node)

    def _let(self, node, visitor) -> None:
        self.lets[node.var.__chandle__()] = self._expand(node.value)
        visitor.default_visit(node)

    def _expand(self, expr):
        """Substitute the values of enclosing let-bound variables (TVM's CSE introduces them)."""
        return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: self.lets.get(v.__chandle__(), v)))

    def _alloc(self, node, visitor) -> None:
        if node.buffer.scope().startswith("shared"):
            self.shared.add(node.buffer.name)
        visitor.default_visit(node)

    def _for(self, loop, visitor) -> None:
        trips = int(loop.extent.value) if isinstance(loop.extent, tirx.IntImm) else 1
        self.loops.append((loop.loop_var, int(loop.min.value) if isinstance(loop.min, tirx.IntImm) else 0, trips))
        visitor.default_visit(loop)
        self.loops.pop()

    def _store(self, store, visitor) -> None:
        if store.buffer.name in self.shared:
            self._record(store.buffer, store.indices, "store")
        visitor.default_visit(store)

    def _load(self, load, visitor) -> None:
        if load.source.name in self.shared:
            self._record(load.source, load.indices, "load")
        visitor.default_visit(load)

    def _lane_values(self, lane: int) -> dict:
        x = self.threads.get("threadIdx.x", (None, 1))
        y = self.threads.get("threadIdx.y", (None, 1))
        z = self.threads.get("threadIdx.z", (None, 1))
        tx, ty, tz = lane % x[1], (lane // x[1]) % y[1], lane // (x[1] * y[1])
        values = {v.__chandle__(): val for (v, _), val in ((x, tx), (y, ty), (z, tz)) if v is not None}
        values.update({v.__chandle__(): 0 for v in self.blocks})
        values.update({v.__chandle__(): first for v, first, _ in self.loops})
        return values

    def _record(self, buf, indices, kind: str) -> None:
        """One request per warp for a scalar or contiguous vector index; a strided vector (a column
        of a tile) is as many scalar requests as it has lanes, as the CUDA code TVM emits does."""
        index = indices[-1]
        ramp = isinstance(index, tirx.Ramp)
        stride = self._lane_value(index.stride, {}) if ramp else 1
        lanes = int(index.lanes) if ramp else 1
        elements = self._lane_elements(index.base if ramp else index)
        if elements is None or stride is None:
            return  # not evaluable per lane (data-dependent): no report
        executions = 1
        for _, _, trips in self.loops:
            executions *= trips
        parts = (
            [(elements, lanes)] if stride == 1 else [(tuple(e + k * stride for e in elements), 1) for k in range(lanes)]
        )
        elem = element_bytes(buf.dtype)
        run = self._run(index.base if ramp else index, lanes if stride == 1 else 1)
        for part, vector in parts:
            wavefronts, ideal = count_wavefronts([e * elem for e in part], elem * vector)
            self.accesses.append(
                SharedAccess(
                    self.name,
                    buf.name,
                    kind,
                    str(index),
                    elem * vector,
                    wavefronts,
                    ideal,
                    executions,
                    part,
                    vector,
                    run,
                )
            )

    def _run(self, expr, run: int) -> int:
        """Consecutive elements the first thread reaches: its vector, grown by every loop of its own
        whose step continues the run (a serial loop over a row, as a register layout holds it)."""
        base = self._lane_values(0)
        first = self._lane_value(expr, base)
        steps = []
        for var, start, trips in self.loops:
            moved = self._lane_value(expr, {**base, var.__chandle__(): start + 1}) if trips > 1 else None
            if first is not None and moved is not None:
                steps.append((moved - first, trips))
        grown = True
        while grown:
            grown = False
            for step, trips in steps:
                if step == run and trips & (trips - 1) == 0:
                    run, grown = run * trips, True
        return run

    def _lane_elements(self, expr) -> tuple[int, ...] | None:
        threads = 1
        for _, extent in self.threads.values():
            threads *= extent
        elements = []
        for lane in range(min(WARP, threads)):
            value = self._lane_value(expr, self._lane_values(lane))
            if value is None:
                return None
            elements.append(value)
        return tuple(elements)

    def _lane_value(self, expr, values: dict) -> int | None:
        bound = tvm_ffi.structural_map(
            self._expand(expr),
            (tirx.Var, lambda v: tirx.const(values[v.__chandle__()], v.ty.dtype) if v.__chandle__() in values else v),
        )
        value = sym.Analyzer().simplify(bound)
        return int(value.value) if isinstance(value, tirx.IntImm) else None


def analyze_kernel(kernel: tirx.PrimFunc) -> list[SharedAccess]:
    walker = _KernelWalker(kernel)
    walker.walk(kernel.body)
    return walker.accesses


def analyze(func_or_mod, arch: str = "sm_90") -> list[SharedAccess]:
    """Every shared access of the function's CUDA kernels, with its wavefronts and conflicts."""
    mod = func_or_mod if isinstance(func_or_mod, tvm.IRModule) else tvm.IRModule({"main": func_or_mod})
    accesses = []
    for kernel in lower_for_cuda(mod, arch):
        accesses += analyze_kernel(kernel)
    return accesses


def format_report(accesses: list[SharedAccess]) -> str:
    if not accesses:
        return "no shared-memory accesses (nothing is staged in shared memory)"
    return "\n".join(str(a) for a in accesses)


def tile_index(element: int, tile: tuple[int, ...]) -> tuple[int, ...]:
    """The index of a row-major tile's flat element."""
    index = []
    for extent in reversed(tile):
        element, i = divmod(element, extent)
        index.append(i)
    return tuple(reversed(index))


def wavefronts_under(access: SharedAccess, layout) -> tuple[int, int]:
    """(wavefronts, ideal) of an access recorded on the row-major tile, with the tile laid out as
    `layout` (a tir_passes.contracts.shared_layout.SharedLayoutDecision) says."""
    elem = access.bytes_per_lane // access.vector
    addresses = [layout.address(tile_index(element, layout.tile)) * elem for element in access.elements]
    return count_wavefronts(addresses, access.bytes_per_lane)


def tensor_core_reads(buffer: str, tile: tuple[int, ...], element_bytes: int) -> SharedAccess:
    """The request a warp makes to read a tensor-core operand fragment (ldmatrix.x4: each lane gives
    one 16-byte row of an 8x8 matrix; lanes 0-15 rows 0-15 of the first 16-byte column chunk, lanes
    16-31 the same rows of the next chunk), as a recorded access of the row-major tile."""
    chunk = 16 // element_bytes
    elements = tuple((lane % 16) * tile[-1] + (lane // 16) * chunk for lane in range(WARP))
    wavefronts, ideal = count_wavefronts([e * element_bytes for e in elements], 16)
    return SharedAccess("tensor core", buffer, "load", "ldmatrix.x4", 16, wavefronts, ideal, 1, elements, chunk)
