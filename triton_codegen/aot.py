"""Compile generated kernels ahead of time for a real GPU architecture, on a machine with no GPU.

The interpreter accepts kernels that no GPU would (non-power-of-two aranges, tl.dot tiles under
16, too much shared memory); compiling to PTX/cubin for sm_90 and sm_80 catches those here.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.tile_ir import TileKernel

from .loader import import_module

_POINTER_TYPES = {"bool": "*i1", "int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64",
                  "uint8": "*u8", "uint16": "*u16", "uint32": "*u32", "uint64": "*u64", "float16": "*fp16",
                  "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64"}
_SCALAR_TYPES = {"int32": "i32", "int64": "i64", "float32": "fp32", "float64": "fp64", "bool": "i1"}


@dataclass(frozen=True)
class AotResult:
    kernel: str
    arch: int
    num_regs: int | None
    shared_bytes: int | None


def kernel_signature(kernel: TileKernel, config: dict[str, int], group_m: int | None):
    signature, constexprs = {}, {}
    for buf in kernel.buffers:
        signature[f"{buf.name}_ptr"] = _POINTER_TYPES[buf.dtype]
        for axis in range(buf.ndim):
            signature[f"{buf.name}_stride{axis}"] = "i64" if buf.name in kernel.int64_buffers else "i32"
    for scalar in kernel.scalars:
        signature[scalar.name] = _SCALAR_TYPES.get(scalar.dtype, "i32")
    for block in kernel.block_sizes:
        signature[block] = "constexpr"
        constexprs[block] = config[block]
    if group_m:
        signature["GROUP_M"] = "constexpr"
        constexprs["GROUP_M"] = group_m
    return signature, constexprs


def compile_ahead_of_time(module_file: str, kernel: TileKernel, config: dict[str, int], arch: int) -> AotResult:
    import triton
    from triton.backends.compiler import GPUTarget

    module = import_module(module_file, interpret=False)
    fn = getattr(module, kernel.name)
    signature, constexprs = kernel_signature(kernel, config, kernel.group_m)
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    metadata = compiled.metadata
    return AotResult(kernel.name, arch, getattr(metadata, "num_regs", None), getattr(metadata, "shared", None))
