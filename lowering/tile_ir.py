"""TileProgram: the small tile-level IR between S-TIR and Triton source.

Frozen dataclasses, so values compare and hash by structure (the code generator uses that for
common-subexpression naming). Every expression knows its `dims`: the tile axes it varies over,
as an ordered subset of its kernel's axes (an empty tuple is a scalar). Broadcasting between
values of different dims is explicit in the printer and in the generated code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


# --- expressions ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Const:
    value: object  # int, float or bool
    dtype: str
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scalar:
    """A scalar by name: a kernel argument (shape variable, scalar parameter) or a loop index."""
    name: str
    dtype: str
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Arange:
    """`tl.arange(0, BLOCK)` laid along one tile axis."""
    dim: str
    block: str
    dtype: str = "int32"

    @property
    def dims(self) -> tuple[str, ...]:
        return (self.dim,)


@dataclass(frozen=True)
class Unary:
    op: str  # one of lowering/ops.py UNARY_OPS: not, bitnot, abs, floor, round, exp, log1p, isnan, ...
    x: "Expr"
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Binary:
    op: str  # one of lowering/ops.py BINARY_OPS: + - * / // % floordiv floormod fmod pow min max < and & << ...
    a: "Expr"
    b: "Expr"
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Where:
    cond: "Expr"
    a: "Expr"
    b: "Expr"
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Cast:
    x: "Expr"
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class RangeCheck:
    """`0 <= index < extent` for an index read from memory. Unless `assumed` (proven only by a
    `T.assume`, so unchecked) it is also one of the access's mask conjuncts: an index out of
    range reads zero, a store through one is dropped. A debug build asserts it instead."""

    cond: "Expr"
    message: str  # the access, its TVMScript line and the range, for the assertion
    assumed: bool


@dataclass(frozen=True)
class TileAccess:
    """What a load or store touches, when it is a rectangle of its buffer (lowering/rewrites/tile_access.py
    decides): along buffer axis p, `origin[p] + arange(BLOCK)` of the tile axis `axes[p]`, or the
    single index `origin[p]` where `axes[p]` is None. The access's mask conjuncts that only say
    "inside the buffer" are implied by any access that drops out-of-bounds elements (a tensor
    descriptor); `residual` holds the others."""

    origin: tuple["Expr", ...]      # per buffer axis: a scalar expression (no tile axes)
    axes: tuple[str | None, ...]    # per buffer axis: the tile axis along it, or None
    residual: tuple["Expr", ...] = ()

    @property
    def tile_axes(self) -> tuple[str, ...]:
        """The tile axes in buffer-axis order."""
        return tuple(axis for axis in self.axes if axis is not None)

    @property
    def inner_axis_tiled(self) -> bool:
        """The buffer's last axis is a tile axis: the tile's rows are runs of adjacent elements
        when that axis's stride is 1 (the launcher checks the stride)."""
        return self.axes[-1] is not None


@dataclass(frozen=True)
class Load:
    buffer: str
    offset: "Expr"
    mask: tuple["Expr", ...]  # conjuncts; empty means unmasked
    dtype: str
    dims: tuple[str, ...]
    checks: tuple[RangeCheck, ...] = ()
    tile: TileAccess | None = None  # set by lowering/rewrites/tile_access.py when the access is a rectangle


class HeldInRegisters:
    """A value a lowering state keeps under `name` (an accumulator, a scan's carry)."""

    name: str
    dtype: str
    dims: tuple[str, ...]

    @property
    def reg(self) -> "Reg":
        return Reg(self.name, self.dtype, self.dims)


@dataclass(frozen=True)
class Reg:
    """A value held in registers under a kernel-local name (accumulators, fused intermediates)."""

    name: str
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Reduce:
    kind: str  # sum, prod, max, min
    x: "Expr"
    axes: tuple[str, ...]
    dtype: str
    dims: tuple[str, ...]
    # a float max/min is NaN when an element is (torch.amax's meaning); False where no NaN can be
    # observed through it (reductions.nan_unobservable): the printer then skips the extra reduction
    propagate_nan: bool = True


@dataclass(frozen=True)
class Scan:
    """Inclusive scan of `x` along one tile axis (its dims are x's)."""

    kind: str  # sum, prod, max, min
    x: "Expr"
    axis: str
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Dot:
    """acc + a @ b over one reduction axis; `m`, `k`, `n` name the tile axes."""

    a: "Expr"
    b: "Expr"
    acc: "Expr"
    m: str
    k: str
    n: str
    precision: str  # float32 inputs: ieee, tf32, or bf16 (operands rounded to bfloat16); 16-bit inputs: ieee
    dtype: str
    dims: tuple[str, ...]


Expr = Const | Scalar | Arange | Unary | Binary | Where | Cast | Load | Reg | Reduce | Scan | Dot


# --- generated functions -------------------------------------------------------------------
@dataclass(frozen=True)
class SelectCombine:
    """The combine function of a selection reduction (arg-max, arg-min) over tuples
    (key, payloads..., position): the better key wins (the larger for max, the smaller for min)
    and brings its payloads; of equal keys, the smaller position wins ("first") or the larger
    ("last"). It is a maximum under a total order, hence commutative and associative."""

    kind: str                        # max, min
    tie: str                         # first, last
    key_dtype: str
    payload_dtypes: tuple[str, ...]
    position_dtype: str

    @property
    def name(self) -> str:
        """Deterministic, and distinct for distinct functions (dtype names have no underscore)."""
        dtypes = "_".join((self.key_dtype,) + self.payload_dtypes)
        return f"select_{self.kind}_{self.tie}_{dtypes}" + ("_pos64" if self.position_dtype == "int64" else "")

    @property
    def dtypes(self) -> tuple[str, ...]:
        return (self.key_dtype,) + self.payload_dtypes + (self.position_dtype,)


@dataclass(frozen=True)
class SumsCombine:
    """`count` float sums of one axis (`axis`, of the operands' dims) as one tl.reduce of the tuple
    (lowering/rewrites/sums_together.py): the registers `names` of a CombineAssign whose `dims` are its operands'."""
    count: int
    axis: int
    dtype: str
    name = property(lambda self: f"_tir_sums{self.count}_{self.axis}")
    dtypes = property(lambda self: (self.dtype,) * self.count)
    helpers = property(lambda self: (self.name, f"_tir_add{self.count}", "_NUMPY_REDUCTIONS"))


# --- statements ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class CombineAssign:
    """`names = combine(state, update)`: registers a SelectCombine updates together, or SumsCombine's sums."""
    names: tuple[str, ...]
    combine: SelectCombine | SumsCombine
    state: tuple[Expr, ...]
    update: tuple[Expr, ...]
    dims: tuple[str, ...]

    @property
    def dtypes(self) -> tuple[str, ...]:
        return self.combine.dtypes


@dataclass(frozen=True)
class Store:
    buffer: str
    offset: Expr
    value: Expr
    mask: tuple[Expr, ...]
    checks: tuple[RangeCheck, ...] = ()
    tile: TileAccess | None = None  # set by lowering/rewrites/tile_access.py when the access is a rectangle


@dataclass(frozen=True)
class Prefetch:
    """A row load of a walked loop issued `len(slots)` iterations ahead (lowering/rewrites/prefetch_loads.py):
    before the loop, slot k holds the load at iteration start + k; at the top of each iteration the body's
    register `name` takes slot 0, the slots shift down and the last takes `ahead`, the load at iteration
    var + len(slots). Every row index is clamped to the walk's last iteration, under the load's own mask."""

    name: str                 # the register the body reads: this iteration's tile
    slots: tuple[str, ...]    # the registers holding the next iterations' tiles, nearest first
    first: tuple[Load, ...]   # the loads before the loop, one per slot
    ahead: Load               # the load in the loop


@dataclass(frozen=True)
class Loop:
    var: str
    start: Expr
    stop: Expr
    body: tuple["Stmt", ...]
    # every program enters the TIR loop these iterations walk (static, positive extent), though a
    # window's bounds may be empty here: an invariant load in it is valid before it (hoist_loads.py)
    entered: bool = False
    # Tiling's prefetch of a row walk (tir_passes/contracts/prefetch_record.py): iterations ahead, the buffers
    prefetch_distance: int = 0
    prefetch_buffers: tuple[str, ...] = ()
    prefetched: tuple[Prefetch, ...] = ()   # the loads issued ahead (prefetch_loads.py), in first-use order
    sums_together: bool = False   # Tiling's record: independent sums of one iteration as one reduction


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Barrier:
    """Every lane of the program waits here until the stores before it are visible to all lanes."""

    reason: str


Stmt = Assign | CombineAssign | Store | Loop | Comment | Barrier


# --- kernels and programs ------------------------------------------------------------------
@dataclass(frozen=True)
class BufferArg:
    name: str
    dtype: str
    ndim: int


@dataclass(frozen=True)
class ScalarArg:
    """A scalar parameter or size of the PrimFunc that a kernel reads: `name` is the TIR name (what
    the launcher looks it up by), `param` the kernel's parameter (python_name of it, as every
    Scalar in the kernel's body names it)."""
    name: str
    dtype: str
    param: str


@dataclass(frozen=True)
class GridAxis:
    """One factor of the launch grid: `count` programs along a loop; `var` names its index."""

    var: str
    count: Expr  # a scalar expression of scalar arguments and block sizes
    longest_first: bool = False   # programs take its tiles last-first (tile_contract.KernelTile.longest_first)


@dataclass(frozen=True)
class TileDim:
    name: str
    block: str        # constexpr name
    default: int      # the tiling pass's block size
    extent: Expr | None   # extent before the split (None: an unsplit tile loop)
    even: bool        # extent is a multiple of every allowed block size: no mask needed
    index: Expr | None = None   # the axis's positions: start + arange(BLOCK)
    tail: Expr | None = None    # index < extent, unless even
    hoisted: bool = False       # index depends on program ids only (computed once per program)
    min_block: int = 1          # a whole-extent tile keeps its block size in every config


@dataclass(frozen=True)
class TileKernel:
    name: str
    source_blocks: tuple[str, ...]
    buffers: tuple[BufferArg, ...]
    scalars: tuple[ScalarArg, ...]
    dims: tuple[TileDim, ...]
    grid: tuple[GridAxis, ...]
    group_m: int | None
    num_warps: int
    num_stages: int
    body: tuple[Stmt, ...]
    int64_buffers: tuple[str, ...] = ()
    debug: bool = False  # assert the range checks of loads and stores (tl.device_assert)
    pins: tuple[tuple[str, int, str], ...] = ()   # deterministic: (BLOCK_* or num_warps, value, why) no config changes
    floors: tuple[tuple[str, int, str], ...] = ()  # deterministic: (BLOCK_* or num_warps, minimum, why) kept at least
    # deterministic: compiled as the program's arithmetic (no FMA contraction, integer sizes not
    # specialized on their values, one variant): docs/determinism.md, "What Triton would choose"
    deterministic: bool = False
    dot_min_block: int = 16   # the backend's tl.dot minimum Tiling recorded (tile.limits): configs keep dot tiles at it
    persistent: bool = False   # the body walks tiles pid, pid + programs, ... (tile_contract.KernelTile)
    programs_per_sm: int = 0   # the default launch of a persistent kernel (0: a program a tile)

    @property
    def block_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for dim in self.dims:
            sizes.setdefault(dim.block, dim.default)
        return sizes


@dataclass(frozen=True)
class ParamSpec:
    """A PrimFunc parameter as the launcher checks it, in the PrimFunc's order. Shape entries are
    ints, shape-variable names, or derived dimensions: nested tuples (op, a, b) with op one of
    + - * // % min max (floor division and modulo, as TIR's floordiv and floormod)."""

    name: str
    kind: str  # buffer or scalar
    dtype: str
    shape: tuple[int | str | tuple, ...] = ()
    written: bool = False
    read: bool = True  # the result depends on the values passed in (lowering/rewrites/param_reads.py)


@dataclass(frozen=True)
class ScratchBuffer:
    name: str
    dtype: str
    shape: tuple[Expr, ...]


@dataclass(frozen=True)
class TileProgram:
    name: str
    params: tuple[ParamSpec, ...]
    shape_vars: tuple[str, ...]
    scratch: tuple[ScratchBuffer, ...]
    kernels: tuple[TileKernel, ...]
    source_hash: str
    passes: tuple[str, ...] = field(default=())
    combines: tuple[SelectCombine, ...] = ()   # generated functions the kernels call
    deterministic: bool = False                # Tiling's promise: every reduction order is pinned
    float32_matmul_precision: str = "highest"  # PyTorch's name of how fp32 tl.dots compute (matmul_precision.py)
