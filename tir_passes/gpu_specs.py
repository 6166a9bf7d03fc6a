"""The GPUs the tiling model knows: what bounds a tile's size on each of them, and the ceilings a
roofline of their measured kernels is drawn against (triton_codegen/report)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FrontendError


@dataclass(frozen=True)
class GpuSpec:
    name: str
    compute_capability: int       # 80 = sm_80
    multiprocessors: int
    registers_per_sm: int         # 32-bit registers
    shared_memory_per_block: int  # bytes usable by one program (opt-in maximum)
    memory_bandwidth_gbs: float   # datasheet HBM/GDDR bandwidth
    # roofline ceilings, where known: a device-to-device copy as measured (read + write bytes; what a
    # bandwidth-bound kernel can reach, below the datasheet) and the dense fp16 tensor-core peak
    copy_bandwidth_gbs: float | None = None
    fp16_tensor_tflops: float | None = None

    def tile_element_budget(self, element_bytes: int, num_warps: int) -> int:
        """Elements one program may hold in registers: about a quarter of its registers."""
        registers = num_warps * 32 * 255 // 4
        return max(256, registers * 4 // max(element_bytes, 4))


GPUS = {
    "A10G": GpuSpec("A10G", 86, 80, 65536, 99 * 1024, 600.0),
    "A100": GpuSpec("A100", 80, 108, 65536, 163 * 1024, 2039.0, fp16_tensor_tflops=312.0),
    "H100": GpuSpec("H100", 90, 132, 65536, 227 * 1024, 3350.0, fp16_tensor_tflops=989.4),
    # copy measured on the H200 the benchmarks ran on (docs/benchmarks.md)
    "H200": GpuSpec("H200", 90, 132, 65536, 227 * 1024, 4800.0, copy_bandwidth_gbs=4270.0, fp16_tensor_tflops=989.4),
}


def gpu_spec(name: str) -> GpuSpec:
    try:
        return GPUS[name.upper()]
    except KeyError:
        raise FrontendError(f"unknown GPU '{name}'; known: {', '.join(GPUS)}") from None
