"""GluonProgram: the small typed IR between thread-bound S-TIR and a Gluon module.

A kernel is its grid (the blockIdx loops), the shared tiles it allocates (with the layout
BankConflictFreeTiling decided), and a body of statements over *boxes*: a box is the tile of a
block's iteration variables that one step of the kernel covers, laid out over the threads as the
schedule's thread bindings say (a register layout). Expressions are lowering/tile_ir.py's, with
`Reg` naming a tensor the statement computed before (an index, a load) and `Scalar` a program
id, a sequential loop's variable or a constant parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir_passes.contracts.shared_layout import SharedLayoutDecision


# --- layouts ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearLayout:
    """gl.DistributedLinearLayout: the box index each register, lane and warp bit selects."""

    reg: tuple[tuple[int, ...], ...]
    lane: tuple[tuple[int, ...], ...]
    warp: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]


@dataclass(frozen=True)
class BlockedLayout:
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]


@dataclass(frozen=True)
class MmaLayout:
    """The accumulator of warpgroup_mma (NVMMADistributedLayout version 3): the backend's choice."""

    warps_per_cta: tuple[int, ...]
    instr_shape: tuple[int, ...]


Layout = LinearLayout | BlockedLayout | MmaLayout


# --- boxes and statements --------------------------------------------------------------------------
@dataclass(frozen=True)
class Box:
    """The block's iteration variables that vary in one step (`dims`, with their extents) and the
    scalar offset of each (an Expr of program ids and sequential loop variables), over a layout."""

    block: str
    dims: tuple[str, ...]
    extents: tuple[int, ...]
    offsets: tuple[object, ...]
    layout: Layout
    line: str | None = None            # the block's TVMScript line


@dataclass(frozen=True)
class GlobalLoad:
    name: str                           # the tensor it defines
    buffer: str
    indices: tuple[object, ...]         # Exprs over the box
    masked: tuple[int, ...]             # the axes whose bound is not proven
    dtype: str


@dataclass(frozen=True)
class SharedLoad:
    name: str
    buffer: str
    permutation: tuple[int, ...]        # box dim of each tile axis (identity: the tile is the box)


@dataclass(frozen=True)
class Compute:
    """Evaluate `value` over the box and write it to a global buffer (indices per axis) or to a
    shared tile (the whole tile, `permutation` as for SharedLoad)."""

    box: Box
    loads: tuple[GlobalLoad | SharedLoad, ...]
    value: object
    buffer: str
    shared: bool
    indices: tuple[object, ...] = ()
    masked: tuple[int, ...] = ()
    permutation: tuple[int, ...] = ()


@dataclass(frozen=True)
class InitAccumulator:
    name: str
    box: Box                            # over (m, n)
    value: object                       # a Const
    dtype: str


@dataclass(frozen=True)
class Contract:
    """acc[m, n] += a[m, k] * b[k, n] over two whole shared tiles (a: m x k, b: k x n)."""

    accumulator: str
    a: str
    b: str
    instruction: str                    # "wgmma" (tensor cores, NVMMA operands) or "fma" (CUDA cores)
    line: str | None = None


@dataclass(frozen=True)
class StoreAccumulator:
    accumulator: str
    buffer: str
    box: Box
    indices: tuple[object, ...]
    masked: tuple[int, ...]


@dataclass(frozen=True)
class Loop:
    """A sequential loop around several statements (the k loop of a matmul)."""

    var: str
    extent: int
    body: tuple


@dataclass(frozen=True)
class SharedTile:
    name: str
    dtype: str
    shape: tuple[int, ...]
    decision: SharedLayoutDecision


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                            # buffer (scalars are refused for now)
    dtype: str
    shape: tuple[int, ...]
    written: bool
    read: bool


@dataclass(frozen=True)
class GluonKernelIR:
    name: str
    grid: tuple[tuple[str, int], ...]    # (variable, extent) for program ids 0, 1, 2
    num_warps: int
    shared: tuple[SharedTile, ...]
    accumulators: tuple[tuple[str, Box], ...]
    body: tuple
    buffers: tuple[str, ...]             # global buffers the kernel takes, in parameter order


@dataclass(frozen=True)
class GluonProgram:
    name: str
    params: tuple[Param, ...]
    kernels: tuple[GluonKernelIR, ...]
    source_hash: str
    passes: tuple[str, ...]
