"""The shared-layout contract: BankConflictFreeTiling's decision for one staged buffer, in one
typed form, stored in the IR as the staging block's annotation "bank.decision".

The pass writes it (and nothing else does); the dump shows it; the Gluon backend reads it as it
is and turns it into the kernel's shared layout; the bank-conflict model evaluates addresses
with the same `address` function the backend's layout realizes. Nobody re-derives a layout from
the decision's text.

Layout kinds (the staged tile is row-major over its last axis, "the row"):

  unchanged  address = row-major offset
  padded     every row is followed by `pad` unused elements (TVM: storage_align; Gluon:
             PaddedSharedLayout with interval = row length)
  swizzled   chunks of `vec` elements of a row are XOR-permuted by the row's phase,
             (row // per_phase) % max_phase (Gluon: SwizzledSharedLayout; TVM cannot build it)
  nvmma      the tensor-core operand layout: rows cut into blocks of `swizzle_bytes`, 16-byte
             chunks XOR-permuted within a block (Gluon: NVMMASharedLayout), read by wgmma
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tvm import s_tir

from tir_passes.errors import TirTritonError
from tir_passes.infra.dtypes import DTYPES, element_bytes

KEY = "bank.decision"
UNCHANGED, PADDED, SWIZZLED, NVMMA = "unchanged", "padded", "swizzled", "nvmma"
KINDS = (UNCHANGED, PADDED, SWIZZLED, NVMMA)
NVMMA_SWIZZLES = (0, 32, 64, 128)   # bytes; what NVMMASharedLayout and wgmma support



class SharedLayoutError(TirTritonError):
    """A "bank.decision" annotation is malformed (only BankConflictFreeTiling writes it)."""

    def __init__(self, where: str, message: str):
        super().__init__(f"shared-layout decision at {where} is malformed: {message} "
                         "(BankConflictFreeTiling writes this annotation)")


@dataclass(frozen=True)
class Counts:
    """What the bank-conflict model counts over the buffer's accesses, per warp, weighted by how
    often each access runs."""

    wavefronts: int = 0
    conflicts: int = 0
    worst: int = 0       # the most wavefronts one request takes


@dataclass(frozen=True)
class SharedLayoutDecision:
    buffer: str
    dtype: str
    tile: tuple[int, ...]          # the staged tile's shape, as TVM compacts the buffer
    kind: str = UNCHANGED
    pad: int = 0                   # padded: elements after every row
    vec: int = 1                   # swizzled: elements per chunk moved together
    per_phase: int = 1             # swizzled: consecutive rows that share a phase
    max_phase: int = 1             # swizzled: distinct phases
    swizzle_bytes: int = 0         # nvmma: bytes per swizzled block of a row
    vector: int = 1                # elements per lane of the widest access: the alignment a layout keeps
    before: Counts = field(default_factory=Counts)   # the unchanged layout
    after: Counts = field(default_factory=Counts)    # this layout
    why: str = ""

    @property
    def element_bytes(self) -> int:
        return element_bytes(self.dtype)

    @property
    def row(self) -> int:
        return self.tile[-1]

    @property
    def rows(self) -> int:
        return math.prod(self.tile[:-1])

    @property
    def allocated_elements(self) -> int:
        return self.rows * (self.row + self.pad)

    def address(self, index: tuple[int, ...]) -> int:
        """The element offset of a tile index in shared memory under this layout."""
        row = 0
        for extent, i in zip(self.tile[:-1], index[:-1]):
            row = row * extent + i
        col = index[-1]
        if self.kind == PADDED:
            return row * (self.row + self.pad) + col
        if self.kind == SWIZZLED:
            phase = (row // self.per_phase) % self.max_phase
            return row * self.row + ((col // self.vec) ^ phase) * self.vec + col % self.vec
        if self.kind == NVMMA and self.swizzle_bytes:
            width = self.swizzle_bytes // self.element_bytes        # elements per swizzled block
            chunk = 16 // self.element_bytes                        # elements per 16-byte chunk
            per_phase = max(1, 128 // self.swizzle_bytes)
            max_phase = self.swizzle_bytes // 16
            block, inner = divmod(col, width)
            phase = (row // per_phase) % max_phase
            return block * self.rows * width + row * width + ((inner // chunk) ^ phase) * chunk + inner % chunk
        return row * self.row + col

    def describe(self) -> str:
        if self.kind == PADDED:
            return f"rows padded by {self.pad} element(s)"
        if self.kind == SWIZZLED:
            return f"XOR swizzle (vec {self.vec}, per_phase {self.per_phase}, max_phase {self.max_phase})"
        if self.kind == NVMMA:
            return f"tensor-core operand layout ({self.swizzle_bytes}-byte swizzle)"
        return "unchanged"

    # --- the annotation ----------------------------------------------------------------------
    def to_annotation(self) -> dict:
        value = {"buffer": self.buffer, "dtype": self.dtype, "tile": list(self.tile), "kind": self.kind,
                 "vector": self.vector, "before": _counts_value(self.before), "after": _counts_value(self.after),
                 "why": self.why}
        if self.kind == PADDED:
            value["pad"] = self.pad
        if self.kind == SWIZZLED:
            value.update(vec=self.vec, per_phase=self.per_phase, max_phase=self.max_phase)
        if self.kind == NVMMA:
            value["swizzle_bytes"] = self.swizzle_bytes
        return value

    @staticmethod
    def from_annotation(raw, where: str) -> "SharedLayoutDecision":
        if not hasattr(raw, "items"):
            raise SharedLayoutError(where, f'annotation "{KEY}" must be a dict, not {raw!r}')
        fields = dict(raw.items())
        kind = _text(fields.get("kind"), where, "kind")
        if kind not in KINDS:
            raise SharedLayoutError(where, f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        dtype = _text(fields.get("dtype"), where, "dtype")
        if dtype not in DTYPES or dtype == "bool":
            raise SharedLayoutError(where, f"dtype {dtype!r} has no shared layout here")
        tile = tuple(_positive(t, where, "tile extent") for t in fields.get("tile", ()))
        if len(tile) < 2:
            raise SharedLayoutError(where, f"a staged tile has at least two axes, not {list(tile)}")
        decision = SharedLayoutDecision(
            _text(fields.get("buffer"), where, "buffer"), dtype, tile, kind,
            pad=_positive(fields.get("pad", 1), where, "pad") if kind == PADDED else 0,
            vec=_power_of_two(fields.get("vec", 1), where, "vec"),
            per_phase=_power_of_two(fields.get("per_phase", 1), where, "per_phase"),
            max_phase=_power_of_two(fields.get("max_phase", 1), where, "max_phase"),
            swizzle_bytes=int(fields.get("swizzle_bytes", 0)),
            vector=_power_of_two(fields.get("vector", 1), where, "vector"),
            before=_counts(fields.get("before"), where), after=_counts(fields.get("after"), where),
            why=_text(fields.get("why", ""), where, "why"))
        if kind == NVMMA and decision.swizzle_bytes not in NVMMA_SWIZZLES:
            raise SharedLayoutError(where, f"swizzle_bytes must be one of {NVMMA_SWIZZLES}, not {decision.swizzle_bytes}")  # noqa: E501
        if kind == PADDED and decision.pad % decision.vector:
            raise SharedLayoutError(
                where,
                f"a padding of {decision.pad} breaks the {decision.vector}-element alignment of the vector accesses",
            )
        return decision


def _counts_value(counts: Counts) -> dict:
    return {"wavefronts": counts.wavefronts, "conflicts": counts.conflicts, "worst": counts.worst}


def _counts(raw, where: str) -> Counts:
    if raw is None:
        return Counts()
    fields = dict(raw.items())
    return Counts(*(int(fields.get(key, 0)) for key in ("wavefronts", "conflicts", "worst")))


def _text(value, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise SharedLayoutError(where, f"{what} must be a string, not {value!r}")
    return str(value)


def _positive(value, where: str, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise SharedLayoutError(where, f"{what} must be a positive integer, not {value!r}")
    return number


def _power_of_two(value, where: str, what: str) -> int:
    number = _positive(value, where, what)
    if number & (number - 1):
        raise SharedLayoutError(where, f"{what} must be a power of two, not {number}")
    return number


def decision_of(block: s_tir.SBlock) -> SharedLayoutDecision | None:
    """The decision the staging block carries, or None when the pass left it alone."""
    raw = block.annotations.get(KEY) if block.annotations else None
    if raw is None:
        return None
    return SharedLayoutDecision.from_annotation(raw, f"block {block.name_hint}")
