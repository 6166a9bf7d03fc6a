"""Which loads and stores of a kernel go through tensor descriptors: the kernel's `_tma` variant.

On sm_90 a tensor descriptor moves a whole tile with one TMA copy, which handles the bounds
itself (out-of-bounds elements read as zero and are not written), so a tile needs neither a
pointer per element nor a mask. A kernel whose plan below is not empty is emitted twice: the
pointer kernel (the sm_80 path and the fallback) and `<name>_tma`, which takes one host-side
descriptor (triton.tools.tensor_descriptor.TensorDescriptor) per planned access; the launcher
picks one at run time (runtime_support.launch_variant: capability, strides, alignment).

What an access is comes from the lowering (Load.tile / Store.tile, lowering/rewrites/tile_access.py);
how it is made is decided here, once. An access goes through a descriptor when:
- it is a rectangle of its buffer with at least two tile axes (every tl.dot operand is one;
  a single row stays a vector load, which already streams at the copy bandwidth) whose last
  buffer axis is a tile axis (TMA copies rows of adjacent elements; the launcher checks that
  stride is 1);
- its buffer is not bool (no TMA element type) and has at most 5 axes (TMA's limit);
- its rows provably start at a multiple of 16 bytes (`X[.., j + 1]` does not: on the H200 such a
  copy is an illegal instruction), for every access that would share its descriptor;
- a store's mask says only "inside the buffer" (a load applies any other conjunct to the loaded
  tile with tl.where), and the kernel is not a plain contraction (tl.dot, none reading another's
  result): there its output tile is stored with masked pointer stores from the accumulator's
  registers, since a TMA store stages the whole tile in shared memory beside the operand stages
  (contracts/gemm_price.CONTRACTION_OUTPUT_STORE, which the tile size model reads too: measured
  77.9 µs at 128×256 tiles against 103 at 128×128 with the staged tile, 3000×5000×1000 fp16);
- the kernel does not both read and write the buffer: a TMA store is asynchronous and TMA loads
  read through another memory proxy, so a read after a write in one program would need fences;
- the kernel is not a deterministic one whose float sums or scans walk loaded tiles (a reduction,
  layout or scan pin): a tile a TMA copy fills is read from shared memory into another register
  layout than a pointer load's (H200, rows of 700 fp32: 4 elements per thread against 1), so
  tl.sum's tree would follow the variant, and the launcher picks it by whether the tiles divide
  the tensor, that is by the batch (docs/determinism.md). A tl.dot kernel keeps its variant: its
  operands reach the MMA through shared memory in either, and its sums are over the MMA's tiles.

Where every tile divides its tensor the pointer kernel needs no masks either, and which variant
runs then is decided here too, per kernel (`DescriptorPlan.divided`), from what was measured on
an H200: the pointer kernel for a loop of independent contractions (2026-11-30: matmul 4096³
216 vs 270 µs with descriptors, transpose 4096² fp32 38 vs 71 µs), descriptors where a loop's
contraction reads another one's result (attention's P·V reads Q·Kᵀ: 2026-12-01, b4h32s4096d128
fp16, descriptors 4-20% faster: 2186 vs 2255 µs, causal 1234 vs 1321). Such a loop keeps a
whole dot result live in registers beside the accumulator; the copy engine spares it the
pointer tiles and their address arithmetic. Not where that loop's dots are TF32 (fp32 operands):
fp32 attention b4h32s4096d128 under TF32 ran its pointer kernel 5-7% faster in every suite run
that timed both, on the H200 (2026-12-02, five runs: 13566-13692 µs against 14477-14584) and on an
H100 at two tile configs (2026-12-07, six runs: 13248-13430 against 14029-14142, then 9283-9332
against 9742-9776): pointers there. Nothing else was measured (fp32 dots in IEEE precision, 8-bit
operands), so they keep the 16-bit rule. The hardware model does not price the two (it
models neither the address arithmetic nor the register pressure): a measured rule, not a price.

Host-side descriptors rather than tl.make_tensor_descriptor: device-side ones need a global
scratch allocator (triton.set_allocator), process-wide state that a standalone module should not
install, and every program would write its descriptors to memory first; host-side ones are
built once per launch from the config's block sizes, and Triton 3.6 and 3.9 take them alike
(in compiled mode and in the interpreter).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lowering.tile_ir import Assign, Binary, Const, Dot, Load, Loop, Reg, Scalar, Store, TileAccess, TileKernel
from tir_passes.contracts import gemm_price
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.names import python_name

MAX_RANK = 5           # TMA describes tensors of at most 5 dimensions
TMA_ALIGNMENT = 16     # bytes: strides, base addresses and (measured) the rows' start along the last axis
NO_TMA_DTYPES = ("bool",)
VARIANT_SUFFIX = "_tma"
# a deterministic sum over loaded tiles: tile_contract's PIN_REDUCTION, PIN_LAYOUT and PIN_SCAN (the
# runtime imports this module without TVM, so not from there; test_determinism_codegen checks them)
LOADED_TILE_ORDER_PINS = ("reduction", "layout", "scan")


@dataclass(frozen=True)
class Descriptor:
    """A kernel argument describing `buffer` in blocks of `blocks` (per buffer axis: the block
    size's constexpr name, or None for one element)."""

    param: str
    buffer: str
    blocks: tuple[str | None, ...]


POINTERS, DESCRIPTORS = "pointers", "descriptors"


@dataclass(frozen=True)
class DescriptorPlan:
    kernel: str                               # the pointer kernel's name
    descriptors: tuple[Descriptor, ...]
    divided: str = POINTERS                   # the variant that runs when every tile divides its tensor
    why: str = "no loop's contraction reads another's result: unmasked pointers ran faster"
    stores: str = DESCRIPTORS                 # POINTERS: a plain contraction's stores stay masked pointer stores

    @property
    def variant(self) -> str:
        return self.kernel + VARIANT_SUFFIX

    def for_access(self, buffer: str, tile: TileAccess | None, blocks: dict[str, str]) -> Descriptor | None:
        """The descriptor an access uses, or None (it stays a pointer access)."""
        if tile is None:
            return None
        wanted = _block_names(tile, blocks)
        return next((d for d in self.descriptors if d.buffer == buffer and d.blocks == wanted), None)


def plan_descriptors(kernel: TileKernel) -> DescriptorPlan | None:
    """The kernel's descriptors, in the order of their first access; None when there are none."""
    if any(why in LOADED_TILE_ORDER_PINS for _, _, why in kernel.pins):
        return None
    dtypes = {buf.name: buf.dtype for buf in kernel.buffers}
    chained = _chained_loop(kernel.body)
    stores_on_pointers = chained is None and bool(_nodes(kernel.body, Dot)) and \
        gemm_price.CONTRACTION_OUTPUT_STORE == POINTERS
    accesses = _in_program_order(kernel.body)
    loaded = {a.buffer for a in accesses if isinstance(a, Load)}
    read_and_written = loaded & {a.buffer for a in accesses if isinstance(a, Store)}
    blocks = {dim.name: dim.block for dim in kernel.dims}
    wanted: list[tuple[str, tuple[str | None, ...]]] = []
    unaligned = set()   # a descriptor serves every access with its buffer and blocks: all must be aligned
    for access in accesses:
        if stores_on_pointers and isinstance(access, Store):
            continue
        if _takes_a_descriptor(access, dtypes, read_and_written):
            key = (access.buffer, _block_names(access.tile, blocks))
            if key not in wanted:
                wanted.append(key)
            if not _row_start_aligned(access.tile, blocks, element_bytes(dtypes[access.buffer])):
                unaligned.add(key)
    wanted = [key for key in wanted if key not in unaligned]
    if not wanted:
        return None
    descriptors = tuple(Descriptor(_param_name(buffer, wanted[:index]), buffer, names)
                        for index, (buffer, names) in enumerate(wanted))
    if chained is None:
        return DescriptorPlan(kernel.name, descriptors, stores=POINTERS if stores_on_pointers else DESCRIPTORS)
    if _all_tf32(chained):
        return DescriptorPlan(kernel.name, descriptors, POINTERS,
                              f"loop {chained.var}: its chained contractions are TF32 (measured: pointers faster)")
    return DescriptorPlan(kernel.name, descriptors, DESCRIPTORS,
                          f"loop {chained.var}: a contraction reads another's result (measured: descriptors faster)")


def _chained_loop(body: tuple) -> Loop | None:
    """The first loop whose body has a tl.dot reading, through registers assigned in that body, the
    result of another tl.dot of it."""
    for stmt in body:
        if isinstance(stmt, Loop):
            if _chains(stmt.body):
                return stmt
            inner = _chained_loop(stmt.body)
            if inner is not None:
                return inner
    return None


def _all_tf32(loop: Loop) -> bool:
    """Every tl.dot of the loop multiplies fp32 operands rounded to TF32 (the lowering casts both
    operands of a dot to one type, so its precision says what both are)."""
    return all(dot.precision == "tf32" for dot in _nodes(loop.body, Dot))


def _chains(body: tuple) -> bool:
    from_dots: set[str] = set()   # registers holding (something computed from) a dot's result
    for stmt in body:
        if not isinstance(stmt, Assign):
            continue
        dots = _nodes(stmt.value, Dot)
        if any(_reads_any(operand, from_dots) for dot in dots for operand in (dot.a, dot.b)):
            return True
        if dots or _reads_any(stmt.value, from_dots):
            from_dots.add(stmt.name)
    return False


def _reads_any(expr, names: set[str]) -> bool:
    return any(reg.name in names for reg in _nodes(expr, Reg))


def _nodes(node, kind) -> list:
    if isinstance(node, tuple):
        return [found for item in node for found in _nodes(item, kind)]
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return []
    found = [n for f in dataclasses.fields(node) for n in _nodes(getattr(node, f.name), kind)]
    return [node, *found] if isinstance(node, kind) else found


def _takes_a_descriptor(access: Load | Store, dtypes: dict[str, str], read_and_written: set[str]) -> bool:
    tile = access.tile
    if tile is None or access.checks or len(tile.tile_axes) < 2 or not tile.inner_axis_tiled:
        return False
    if dtypes[access.buffer] in NO_TMA_DTYPES or len(tile.axes) > MAX_RANK or access.buffer in read_and_written:
        return False
    return isinstance(access, Load) or not tile.residual


def _row_start_aligned(tile: TileAccess, blocks: dict[str, str], size: int) -> bool:
    """The tile's rows start at a multiple of 16 bytes along the buffer's last axis: a TMA copy
    whose inner coordinate is not one is an illegal instruction on the H200 (measured 2026-11-30:
    fp32 rows started 4 or 8 bytes in fault, 16 bytes in run). Proven from the origin's form: a sum
    of multiples of the inner axis's BLOCK (whose rows the launcher checks are 16 bytes or more,
    and which is a power of two) and of constants that are multiples of 16 bytes."""
    inner_block = blocks[tile.axes[-1]]
    return _multiple_of_16_bytes(tile.origin[-1], inner_block, size)


def _multiple_of_16_bytes(expr, inner_block: str, size: int) -> bool:
    if isinstance(expr, Const):
        return int(expr.value) * size % TMA_ALIGNMENT == 0
    if isinstance(expr, Scalar):
        return expr.name == inner_block
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        return _multiple_of_16_bytes(expr.a, inner_block, size) and _multiple_of_16_bytes(expr.b, inner_block, size)
    if isinstance(expr, Binary) and expr.op == "*":
        return _multiple_of_16_bytes(expr.a, inner_block, size) or _multiple_of_16_bytes(expr.b, inner_block, size)
    return False


def _block_names(tile: TileAccess, blocks: dict[str, str]) -> tuple[str | None, ...]:
    return tuple(blocks[axis] if axis is not None else None for axis in tile.axes)


def _param_name(buffer: str, earlier: list) -> str:
    count = sum(1 for name, _ in earlier if name == buffer)
    return f"{python_name(buffer)}_desc" + (f"{count}" if count else "")


def _in_program_order(node) -> list[Load | Store]:
    """Every load and store under `node`, operands before the access that uses them."""
    if isinstance(node, tuple):
        return [access for item in node for access in _in_program_order(item)]
    if not dataclasses.is_dataclass(node) or isinstance(node, TileAccess):
        return []
    found = [access for f in dataclasses.fields(node) for access in _in_program_order(getattr(node, f.name))]
    if isinstance(node, (Load, Store)):
        found.append(node)
    return found
