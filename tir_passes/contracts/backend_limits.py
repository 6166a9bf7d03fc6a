"""The backend's limits: what its kernels can hold, as the passes and the lowering assume it.

A backend owns its limits (triton_codegen/triton_backend.py: TRITON_LIMITS) and hands them to the
pipeline with the GPU spec (`default_pipeline(gpu, limits=...)` -> `gpu_spec(gpu, limits)`); the
passes that size or refuse by them (SplitReduction, OnlineSoftmax, LoopFusion, Tiling) read
`spec.limits`, never a module global. Tiling records the limits it tiled under in the root block
("tile.limits", tile_contract.write_limits), where the contract check and the lowering read them.
TVM-free: the hardware model and the config space run where there is no TVM.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class BackendLimits:
    dot_min_block: int = 16            # tl.dot needs every tile dimension to be at least 16
    max_row_tile: int = 16384          # the widest tile a program holds along one axis
    register_row_elements: int = 8192  # elements per shared-axis point a fused intermediate may keep
    default_num_warps: int = 4
    max_num_warps: int = 32            # warps of a program: a power of two, at most 32 (1024 threads)
    default_num_stages: int = 2

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "BackendLimits":
        """The limits a record names (unknown names refused, missing ones the defaults)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown backend limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{name: int(value) for name, value in values.items()})

    def row_fits_in_registers(self, row_elements: int | None, contraction: bool) -> bool:
        """Whether a program may keep a row of `row_elements` values of an intermediate in registers
        (None: symbolic, it may not); a contraction's row counts tl.dot's minimum of rows at once."""
        if row_elements is None:
            return False
        if contraction:
            row_elements *= self.dot_min_block
        return row_elements <= self.register_row_elements
