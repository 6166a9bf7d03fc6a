"""The GPUs the tiling model knows: what bounds a tile's size on each of them, the ceilings a
roofline of their measured kernels is drawn against (triton_codegen/report), and what the
hardware model (triton_codegen/hardware_model.py) needs to predict a kernel's time: the
multiprocessor's limits (warps, programs, registers, shared memory) and the peaks.

Figures are the vendors' datasheets (SXM parts) unless a comment says measured or estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.errors import FrontendError

# a device copy reaches about this fraction of the datasheet bandwidth (4.27 of 4.8 TB/s measured
# on the H200): the model's stand-in where no copy was measured
COPY_FRACTION = 0.89


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
    # the multiprocessor's limits, for occupancy
    max_warps_per_sm: int = 64
    max_programs_per_sm: int = 32            # resident thread blocks
    shared_memory_per_sm: int | None = None  # bytes; None: the per-block maximum plus the 1 KiB reserve
    # the other peaks (dense); fp32 is the CUDA cores' FMA rate, not a tensor-core rate
    bf16_tensor_tflops: float | None = None
    tf32_tensor_tflops: float | None = None
    fp32_tflops: float | None = None
    l2_bandwidth_gbs: float | None = None    # estimated (see the table), never measured here
    # the quarter-rate pipes (10^12 instructions per second, the whole GPU): the multi-function unit
    # (ex2, rsqrt, a division's reciprocal) and the conversion pipe (float <-> int, narrowing, rounding),
    # each 16 per clock per SM on sm_80 and sm_90 (triton_codegen/vector_work.py)
    special_function_tops: float | None = None
    conversion_tops: float | None = None
    # the backend's limits the passes size and refuse by (backend_limits.py): the backend's, passed in
    limits: BackendLimits = BackendLimits()

    def tile_element_budget(self, element_bytes: int, num_warps: int) -> int:
        """Elements one program may hold in registers: about a quarter of its registers."""
        registers = num_warps * 32 * 255 // 4
        return max(256, registers * 4 // max(element_bytes, 4))

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * 32

    @property
    def model_copy_bandwidth_gbs(self) -> float:
        """What a bandwidth-bound kernel reaches: measured where known, else a share of the datasheet."""
        return self.copy_bandwidth_gbs or COPY_FRACTION * self.memory_bandwidth_gbs

    @property
    def model_shared_memory_per_sm(self) -> int:
        return self.shared_memory_per_sm or self.shared_memory_per_block + 1024

    def dot_tflops(self, operand_dtype: str, precision: str) -> float | None:
        """The peak a tl.dot of these operands runs against (None: not in the table)."""
        if operand_dtype in ("float16", "int8", "uint8"):
            return self.fp16_tensor_tflops
        if operand_dtype == "bfloat16" or (operand_dtype == "float32" and precision == "bf16"):
            return self.bf16_tensor_tflops or self.fp16_tensor_tflops
        if operand_dtype == "float32":
            return self.tf32_tensor_tflops if precision == "tf32" else self.fp32_tflops
        if operand_dtype == "float64" and self.fp32_tflops:
            return self.fp32_tflops / 2
        return None


GPUS = {
    # the A10's datasheet (the A10G is its cloud variant; its clocks may differ); sm_86 holds 48 warps
    "A10G": GpuSpec("A10G", 86, 80, 65536, 99 * 1024, 600.0, fp16_tensor_tflops=125.0,
                    max_warps_per_sm=48, max_programs_per_sm=16, shared_memory_per_sm=100 * 1024,
                    bf16_tensor_tflops=125.0, tf32_tensor_tflops=62.5, fp32_tflops=31.2, l2_bandwidth_gbs=2000.0),
    "A100": GpuSpec("A100", 80, 108, 65536, 163 * 1024, 2039.0, fp16_tensor_tflops=312.0,
                    shared_memory_per_sm=164 * 1024, bf16_tensor_tflops=312.0, tf32_tensor_tflops=156.0,
                    fp32_tflops=19.5, l2_bandwidth_gbs=5000.0, special_function_tops=2.44, conversion_tops=2.44),
    "H100": GpuSpec("H100", 90, 132, 65536, 227 * 1024, 3350.0, fp16_tensor_tflops=989.4,
                    shared_memory_per_sm=228 * 1024, bf16_tensor_tflops=989.4, tf32_tensor_tflops=494.7,
                    fp32_tflops=66.9, l2_bandwidth_gbs=12000.0, special_function_tops=3.87, conversion_tops=3.87),
    # the quarter-rate pipes: 132 SMs x 16 a clock x 1.83 GHz (the clock of the fp16 tensor peak),
    # FlashAttention-3's 3.9 TFLOPS of exponentials on the H100 SXM5
    # copy measured on the H200 the benchmarks ran on (docs/benchmarks.md); its L2 is the H100's chip:
    # the 4096³ fp16 matmul's operand tiles (2.1 GB in 216 µs) need at least 9.9 TB/s from it
    "H200": GpuSpec("H200", 90, 132, 65536, 227 * 1024, 4800.0, copy_bandwidth_gbs=4270.0,
                    fp16_tensor_tflops=989.4, shared_memory_per_sm=228 * 1024, bf16_tensor_tflops=989.4,
                    tf32_tensor_tflops=494.7, fp32_tflops=66.9, l2_bandwidth_gbs=12000.0,
                    special_function_tops=3.87, conversion_tops=3.87),
}

# compute capability -> the table's GPU of that generation, for devices the table does not name
_BY_CAPABILITY = {86: "A10G", 80: "A100", 90: "H100"}


def gpu_spec(name: str, limits: BackendLimits | None = None) -> GpuSpec:
    """The table's GPU called `name`, under the backend's `limits` (None: the default limits)."""
    try:
        spec = GPUS[name.upper()]
    except KeyError:
        raise FrontendError(f"unknown GPU '{name}'; known: {', '.join(GPUS)}") from None
    return spec if limits is None or limits == spec.limits else replace(spec, limits=limits)


def gpu_for_device(device_name: str, compute_capability: int | None = None) -> GpuSpec | None:
    """The table's entry for a device as the driver names it ("NVIDIA H200"), else one of the same
    compute capability, else None."""
    words = device_name.upper().replace("-", " ").split()
    for name, spec in GPUS.items():
        if name in words or any(word.startswith(name) for word in words):
            return spec
    fallback = _BY_CAPABILITY.get(compute_capability or 0)
    return GPUS[fallback] if fallback else None


# words in a driver's device name that make it another part than the table's entry of that name (the
# SXM boards): fewer multiprocessors, other clocks and memory
_OTHER_PARTS = ("PCIE", "NVL")


def gpu_of_part(device_name: str) -> GpuSpec | None:
    """The table's entry where the device is that very part ("NVIDIA H100 80GB HBM3"), else None: a
    variant the table lacks ("NVIDIA H100 PCIe", "NVIDIA H100 NVL") or another GPU. For prices that
    must be the device's own (the benchmark suite's model column), where gpu_for_device's nearest
    entry would not do."""
    words = device_name.upper().replace("-", " ").split()
    return None if any(word in _OTHER_PARTS for word in words) else gpu_for_device(device_name)
