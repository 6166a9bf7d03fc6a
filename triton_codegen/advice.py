"""Performance advice: what in the program costs speed, and what to write instead.

Read from decisions already made, never re-derived and never parsed from text:
  fp32-ieee-dot      a tl.dot (tile.dot) whose operands are fp32 under float32_matmul_precision
                     "highest": IEEE products on CUDA cores, an order of magnitude below the tensor cores
  not-a-dot          a contraction Tiling did not make a tl.dot (tile.not_dot, with its reason)
  global-round-trip  an intermediate the lowering gave a scratch tensor (TileProgram.scratch):
                     written by one kernel, read back from global memory by another
  register-spill     a kernel holding a whole tile along an axis (a reduction kept whole in registers)
                     whose default config needs more registers per thread than the GPU has, by the
                     hardware model's estimate (hardware_model.estimate_resources)
`compile()` puts them on `kernel.advice`; the CLI's `compile` prints them and the report lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lowering.matmul_precision import HIGHEST
from lowering.tile_ir import Const, TileProgram
from tir_passes.analyses.nest import contraction_operands, operands_dtype, realizes_under
from tir_passes.contracts.gpu_specs import GpuSpec
from tir_passes.contracts.tile_contract import (NOT_DOT_EXTRA_AXES, NOT_DOT_MISSING_AXIS, NOT_DOT_SERIAL_K,
                                                NOT_DOT_SMALL_TILE, dot_mark, not_dot_mark)
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import top_level_statements

from .configs import config_space
from .hardware_model import REGISTER_LIMIT, estimate_resources, summarize

FP32_IEEE_DOT, NOT_A_DOT, GLOBAL_ROUND_TRIP, REGISTER_SPILL = (
    "fp32-ieee-dot", "not-a-dot", "global-round-trip", "register-spill")
ADVICE_KINDS = (FP32_IEEE_DOT, NOT_A_DOT, GLOBAL_ROUND_TRIP, REGISTER_SPILL)


@dataclass(frozen=True)
class Advice:
    kind: str      # one of ADVICE_KINDS
    kernel: str    # the Triton kernel it is about
    subject: str   # the block, buffer or axis
    cost: str      # what costs speed
    instead: str   # what to write (or choose) instead

    def __str__(self) -> str:
        return f"{self.kernel}: {self.subject}: {self.cost}. Instead: {self.instead}"


_NOT_A_DOT_INSTEAD = {
    NOT_DOT_SERIAL_K: "give contractions that share a kernel the same reduction extent and make them independent "
                      "(neither reads the other's result): adjacent, their K loops become one and each is a tl.dot",
    NOT_DOT_MISSING_AXIS: "a matrix-vector product is bound by memory, not the tensor cores: batch several vectors "
                          "into a matrix when there are several, else this is as fast as it gets",
    NOT_DOT_EXTRA_AXES: "keep one row, one column and one reduction axis per contraction block; put batch axes "
                        "outermost, where they become program ids",
    NOT_DOT_SMALL_TILE: "tl.dot needs 16 rows, columns and reduction steps: pad a smaller dimension to 16",
}


def _dot_advice(program: TileProgram, statements, names: dict[int, str], spec: GpuSpec) -> list[Advice]:
    found = []
    for index, stmt in enumerate(statements):
        for realize in realizes_under(stmt):
            block = realize.block
            not_dot = not_dot_mark(block)
            if not_dot is not None:
                found.append(Advice(NOT_A_DOT, names[index], f"block {block.name_hint}",
                                    f"a contraction computed as sums of products, not a tl.dot ({not_dot.reason}: "
                                    f"{not_dot.detail})", _NOT_A_DOT_INSTEAD[not_dot.reason]))
            operands = contraction_operands(block)
            if (dot_mark(block) is not None and operands is not None and operands_dtype(*operands) == "float32"
                    and program.float32_matmul_precision == HIGHEST):
                found.append(Advice(
                    FP32_IEEE_DOT, names[index], f"block {block.name_hint}",
                    "a tl.dot of fp32 operands in IEEE fp32 (float32_matmul_precision='highest') runs on CUDA "
                    f"cores{_peaks(spec)}",
                    "compile with float32_matmul_precision='high' (TF32) or 'medium' (bf16 operands), as "
                    "torch.set_float32_matmul_precision does, or give the operands a 16-bit dtype (T.Cast each "
                    "factor to float16 or bfloat16)"))
    return found


def _peaks(spec: GpuSpec) -> str:
    if spec.fp32_tflops and spec.tf32_tensor_tflops:
        return f": {spec.name} {spec.fp32_tflops:g} TFLOP/s against {spec.tf32_tensor_tflops:g} for TF32"
    return ", not the tensor cores"


def _scratch_bytes(scratch) -> str:
    if all(isinstance(d, Const) for d in scratch.shape):
        return f"{math.prod(int(d.value) for d in scratch.shape) * element_bytes(scratch.dtype):,} bytes"
    return "its size"


def _round_trip_advice(program: TileProgram) -> list[Advice]:
    found = []
    for scratch in program.scratch:
        kernels = [k.name for k in program.kernels if any(b.name == scratch.name for b in k.buffers)]
        if len(kernels) < 2:
            continue   # written and read in one kernel (through memory with a sync): the spill advice's matter
        found.append(Advice(
            GLOBAL_ROUND_TRIP, kernels[0], f"buffer {scratch.name}",
            f"written to global memory and read back by {', '.join(kernels[1:])}: {_scratch_bytes(scratch)} each way, "
            "and a kernel launch",
            "let the consumer read only the element of the shared axes it computes (not a neighbour or another "
            "row), read the intermediate from one later nest only, or keep its rows small enough for registers: "
            "fusion.decisions in the dump says which held it back"))
    return found


def _spill_advice(program: TileProgram) -> list[Advice]:
    found = []
    summaries = summarize(program)
    for kernel in program.kernels:
        whole = [d for d in kernel.dims if d.min_block > 1 and d.min_block == d.default]
        if not whole:
            continue
        config = config_space(kernel)[0]
        registers = estimate_resources(summaries[kernel.name], config).registers
        if registers <= REGISTER_LIMIT:
            continue
        widest = max(whole, key=lambda d: d.default)
        found.append(Advice(
            REGISTER_SPILL, kernel.name, f"axis {widest.name}",
            f"a whole row of {widest.default} elements is held in registers: about {registers} registers per thread "
            f"at {config['num_warps']} warps, past the {REGISTER_LIMIT} a thread has, so it spills to local memory",
            "write the reduction so its row can be stepped in tiles (a running max with rescaled sums, as "
            "softmax's online form, or a sum that needs no second pass over the row), or fewer values per row"))
    return found


def program_advice(program: TileProgram, func, spec: GpuSpec) -> tuple[Advice, ...]:
    """The advice for a compiled program; `func` is the pipeline's final PrimFunc (the tiling contract)."""
    statements = top_level_statements(func)
    names = {index: kernel.name for index, kernel in enumerate(program.kernels)}
    names.update({index: f"kernel {index}" for index in range(len(statements)) if index not in names})
    return tuple(_dot_advice(program, statements, names, spec) + _round_trip_advice(program) + _spill_advice(program))
