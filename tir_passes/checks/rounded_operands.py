"""Which buffers of a program carry a rounding to a narrower float type, and to which: the tolerance the
numerics check compares them at.

Rule (docs/verification.md): a value computed from operands the program rounds to a narrower float type (a
Cast from a wider float to a narrower one, such as attention's `f32(f16(weights))` before the product with V)
is compared at that narrower type's tolerance, whatever type it is stored in. Why: the rounded operand is
exact only up to one unit of the narrow type, and which unit depends on the value before rounding; a pass
that legitimately reassociates or rescales that value (OnlineSoftmax rounds `exp(s - m_running)` and rescales
the sum later, where the two-pass program rounds `exp(s - m_final)`) moves each rounded operand by up to that
unit. So the fp32 `acc` of fp16-rounded weights differs from TVM's build by about 1e-3 relative: within
fp16's tolerance, the precision the program chose for it, and beyond fp32's. Widening casts (`f32(Q_fp16)`)
round nothing and change no tolerance. The absolute part of that tolerance is scaled by the buffer's largest
element (numerics.py, `_magnitude`): a rounded operand's unit is relative to its own size, and a sum of rounded
terms keeps that absolute error where they cancel (a backward whose saved statistics are drawn at random, not
made by a forward: sums of exponentials in the thousands, results near zero).
Assumes: nothing of the program's form: every block's stores, loads and casts are walked, in order, until
no buffer's rounding changes (a value flows from a buffer to the buffers whose blocks read it).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx


def rounded_buffers(func: tirx.PrimFunc) -> dict[str, str]:
    """{buffer name: the narrowest float type its value was rounded to on the way}, for buffers with one."""
    blocks = _blocks(func)
    rounded: dict = {}
    changed = True
    while changed:
        changed = False
        for block in blocks:
            narrow = _narrowest([*_narrowing_casts(block), *(rounded.get(b) for b in _reads(block))])
            for written in _writes(block):
                best = _narrowest([rounded.get(written), narrow])
                if best is not None and best != rounded.get(written):
                    rounded[written], changed = best, True
    return rounded


def _blocks(func: tirx.PrimFunc) -> list:
    """The blocks that compute (those holding no other block: not the root, not an outer block)."""
    found: list = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, found.append))
    return [block for block in found if not _holds_blocks(block)]


def _holds_blocks(block) -> bool:
    inner: list = []
    tvm_ffi.structural_walk(block.body, (s_tir.SBlock, inner.append))
    return bool(inner)


def _parts(block) -> list:
    return [block.body] + ([block.init] if block.init is not None else [])


def _narrowing_casts(block) -> list[str]:
    """The narrower types the block rounds a value to before computing with it (not the cast that is a
    store's whole value: that rounds the result to its own buffer's type, which is its tolerance anyway)."""
    casts: list = []
    for part in _parts(block):
        tvm_ffi.structural_walk(part, (tirx.Cast, casts.append))
    stored = [store.value for store in _stores(block)]
    return [str(c.ty.dtype) for c in casts if _narrows(str(c.value.ty.dtype), str(c.ty.dtype))
            and not any(c.same_as(value) for value in stored)]


def _stores(block) -> list:
    stores: list = []
    for part in _parts(block):
        tvm_ffi.structural_walk(part, (tirx.BufferStore, stores.append))
    return stores


def _reads(block) -> list[str]:
    loads: list = []
    for part in _parts(block):
        tvm_ffi.structural_walk(part, (tvm.ir.TensorLoad, loads.append))
    return [load.source.name for load in loads]


def _writes(block) -> list[str]:
    stores: list = []
    tvm_ffi.structural_walk(block.body, (tirx.BufferStore, stores.append))
    return [store.buffer.name for store in stores]


def _narrows(source: str, target: str) -> bool:
    return _is_float(source) and _is_float(target) and _bits(target) < _bits(source)


def _narrowest(dtypes: list) -> str | None:
    floats = [d for d in dtypes if d is not None]
    return min(floats, key=_bits) if floats else None


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _bits(dtype: str) -> int:
    return int("".join(ch for ch in dtype if ch.isdigit()) or 0)
