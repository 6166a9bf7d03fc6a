"""How a kernel's `@triton.jit` and launch are specialized: a deterministic kernel (compile(deterministic=True))
is compiled as the program's arithmetic, the same code for every batch (docs/determinism.md)."""

from __future__ import annotations

from lowering.tile_ir import TileKernel


def unspecialized_scalars(kernel: TileKernel) -> list[str]:
    """A deterministic kernel's integer arguments (sizes), which Triton must not specialize on their
    value: a size of 1 would compile as a constant and a multiple of 16 with wider vectors, so
    another batch would run other code, whose masks and layouts (hence tl.sum's tree) may differ."""
    if not kernel.deterministic:
        return []
    return [s.param for s in kernel.scalars if s.dtype.startswith(("int", "uint"))]


def jit_decorator(kernel: TileKernel) -> str:
    options = ["debug=True"] if kernel.debug else []  # debug: device_assert is live
    unspecialized = unspecialized_scalars(kernel)
    if unspecialized:
        options.append(f"do_not_specialize={unspecialized!r}")
    return f"@triton.jit({', '.join(options)})" if options else "@triton.jit"
