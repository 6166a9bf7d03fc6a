"""RoundOperandsOnce: round a wide input that contractions read as 16-bit operands once, in a nest of
its own, instead of in every program of every contraction that reads it.

Rewrite: where contraction blocks (`C[i, j] += f32(f16(X[i, k])) · f32(B[j, k])`, analyses/nest
`contraction_operands`) read an operand `Cast(float16 | bfloat16, X[v...])` of a function input X
that is wider (fp32), loaded at plain iteration variables, a nest

    for v...: X_float16[v...] = f16(X[v...])

is placed before the first of them and every such operand becomes `X_float16[v...]`. The values are
the same bit for bit (the same rounding of the same elements, once).

Why: a tl.dot takes its operands at their dtype. An fp32 operand rounded in the contraction is loaded
at 4 bytes by every program along the output's other axis, converted in registers, and, as the MMA's
B operand, staged in shared memory a second time after the conversion. Matmul's backward (dA = dC·Bᵀ,
dB = Aᵀ·dC with the fp32 gradient dC) ran 577.6 µs that way on the H200 and 416.7 µs with dC rounded
first by torch's `.half()` (30.0 µs of it), against cuBLAS's 383.8 (2026-12-02,
benchmarks/matmul_backward_variants_gpu.py, JSON benchmarks/results/2026-12-02-h200-matmul-backward-variants.json).

The price (each operand, all its contractions together): the conversions the contractions' programs
would do, `elements read × programs along the other output axis` (at the widest tile, 256: the
fewest programs), at ROUNDING_SECONDS_PER_CONVERSION, against the rounding nest's pass over X (its
bytes and the rounded bytes at the copy bandwidth, and a launch). Taken where the saving exceeds the
cost by CONFIDENCE; a decode step's fp32 activations (16 rows) are not worth their launch. The constant
is one measurement (fp16 at 4096³ on the H200: the saving it books as conversions also holds the halved
operand bytes and the second staging of wgmma's B operand); it is applied linearly to other sizes and to
bfloat16 without a measurement there, and only on sm_90: other GPUs keep the rounding in the dots.
A numerics copy (shape-reduced, pipeline._verify_reduced_numerics) replays the full-size decision
(rounding_record.replaying) rather than pricing its own small sizes. The record:
the root block's "rounding.decisions" (contracts/rounding_record.py), taken or refused, with why.

Assumes: HoistAllocations ran (the new buffer is a root allocation, like SplitReduction's partials);
runs after the fusion passes (the rounded copy is an intermediate between kernels by decision, not
one to fuse back) and before Tiling, which plans the nest as an elementwise kernel. Symbolic
extents: not priced, left alone.
"""

from __future__ import annotations

import math

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.nest import block_accesses, contraction_operands, realizes_under
from tir_passes.contracts.gemm_price import CONFIDENCE, LAUNCH_SECONDS
from tir_passes.contracts.gpu_specs import GpuSpec, gpu_spec
from tir_passes.contracts.rounding_record import OperandRounding, replayed, write_roundings
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import pointwise_nest, replace_block, root_block, s_tir_pass, static_int, \
    top_level_statements, with_root_block

NARROW = ("float16", "bfloat16")
WIDEST_TILE = 256   # the widest output tile the tile model offers (tile_sizes.candidates_wide): the fewest re-reads
# what one element rounded in a contraction's program costs the GPU, from the measurement above: the
# backward's two GEMMs saved 577.6 - (416.7 - 30.0) = 190.9 µs on 2 × 4096² elements × 16 programs each
ROUNDING_SECONDS_PER_CONVERSION = 190.9e-6 / (2 * 4096 * 4096 * 16)
MEASURED_ON = 90   # the price is one H200 (sm_90) measurement: other GPUs keep the rounding in the contractions


def _rounded_load(value, inputs: dict):
    """(X, dtype) when `value` is `Cast(narrow, X[v...])` of a wider input X at distinct plain variables."""
    if not isinstance(value, tirx.Cast) or not isinstance(value.value, tvm.ir.TensorLoad):
        return None
    load, dtype = value.value, str(value.ty.dtype)
    source = inputs.get(load.source.__chandle__())
    if source is None or dtype not in NARROW or element_bytes(str(source.dtype)) <= element_bytes(dtype):
        return None
    names = [index.name for index in load.indices if isinstance(index, tirx.Var)]
    if len(names) != len(load.indices) or len(set(names)) != len(names):
        return None
    return source, dtype


def _other_programs(block: s_tir.SBlock, operand) -> int | None:
    """Programs along the output axes the operand does not index (None: a symbolic extent)."""
    used = operand.var_names
    extent = 1
    for iv in block.iter_vars:
        if iv.iter_type == tirx.IterVar.DataPar and iv.var.name not in used:
            size = static_int(iv.dom.extent)
            if size is None:
                return None
            extent *= size
    return -(-extent // WIDEST_TILE)


def _read_elements(operand, block: s_tir.SBlock) -> int | None:
    extents = {iv.var.name: static_int(iv.dom.extent) for iv in block.iter_vars}
    sizes = [extents.get(index.name) for index in operand.value.value.indices]
    return None if any(size is None for size in sizes) else math.prod(sizes)


def _found(func: tirx.PrimFunc, inputs: dict) -> dict:
    """(X handle, dtype) -> {"source", "dtype", "readers": [(statement index, block name)], "conversions"}."""
    found: dict = {}
    for index, stmt in enumerate(top_level_statements(func)):
        for realize in realizes_under(stmt):
            operands = contraction_operands(realize.block)
            for operand in operands or ():
                match = _rounded_load(operand.value, inputs)
                if match is None:
                    continue
                source, dtype = match
                entry = found.setdefault((source.__chandle__(), dtype),
                                         {"source": source, "dtype": dtype, "readers": [], "conversions": 0})
                programs, elements = _other_programs(realize.block, operand), _read_elements(operand, realize.block)
                if any(static_int(dim) is None for dim in source.shape):
                    elements = None   # the rounding nest's pass over X could not be priced
                entry["readers"].append((index, realize.block.name_hint))
                entry["conversions"] = None if None in (programs, elements, entry["conversions"]) else \
                    entry["conversions"] + programs * elements
    return found


def _price(entry: dict, spec: GpuSpec) -> tuple[float, float]:
    source = entry["source"]
    elements = math.prod(static_int(dim) or 0 for dim in source.shape)
    moved = elements * (element_bytes(str(source.dtype)) + element_bytes(entry["dtype"]))
    cost = LAUNCH_SECONDS + moved / (spec.model_copy_bandwidth_gbs * 1e9)
    return (entry["conversions"] or 0) * ROUNDING_SECONDS_PER_CONVERSION, cost


def _fresh(base: str, taken: set[str]) -> str:
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(name)
    return name


def _rounding_nest(source, rounded, name: str) -> tirx.For:
    """`for v...: rounded[v...] = cast(source[v...])`, one spatial block over the input's shape."""
    return pointwise_nest(rounded, lambda at: tirx.Cast(str(rounded.dtype), tirx.BufferLoad(source, at)), [source],
                          name)


def _reading_rounded(stmt, source, dtype: str, rounded):
    """`stmt` with every `Cast(dtype, source[...])` a load of `rounded`, and its blocks' read regions to match."""
    def cast(node):
        if isinstance(node, tirx.Cast) and str(node.ty.dtype) == dtype and \
                isinstance(node.value, tvm.ir.TensorLoad) and node.value.source.same_as(source):
            return tirx.BufferLoad(rounded, list(node.value.indices))
        return node

    def block(node):
        if not isinstance(node, s_tir.SBlock):
            return node
        body = tvm_ffi.structural_map(node.body, (tirx.Cast, cast))
        if body.same_as(node.body):
            return node
        still = any(a.buffer.same_as(source) for a in block_accesses(replace_block(node, body=body), True))
        reads = [region for region in node.reads if still or not region.source.same_as(source)]
        reads += [tirx.BufferRegion(rounded, region.region) for region in node.reads if region.source.same_as(source)]
        return replace_block(node, body=body, reads=reads)

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, block))


def _refusal(entry: dict, source, saved: float, cost: float, copy: bool, spec: GpuSpec) -> str:
    if copy:
        return "not rounded at full size (this is its numerics copy)"
    if spec.compute_capability < MEASURED_ON:
        return f"not measured on sm_{spec.compute_capability} (the price is the H200's): rounded in the contractions"
    if entry["conversions"] is None:
        return "symbolic extents: not priced"
    return (f"rounded in the contractions: their {entry['conversions']} conversions ({saved * 1e6:.1f} us) "
            f"cost less than a pass over {source.name} ({cost * 1e6:.1f} us)")


def round_operands_once(func: tirx.PrimFunc, spec: GpuSpec) -> tirx.PrimFunc:
    written = {a.buffer.__chandle__() for realize in realizes_under(func.body) for a in block_accesses(realize.block)
               if a.is_store}
    inputs = {p.__chandle__(): p for p in func.params if tirx.is_buffer_var(p) and p.__chandle__() not in written}
    found = _found(func, inputs)
    if not found:
        return func
    root, stmts = root_block(func), top_level_statements(func)
    names = {p.name for p in func.params if tirx.is_buffer_var(p)} | {b.name for b in root.alloc_buffers}
    blocks = {realize.block.name_hint for realize in realizes_under(func.body)}
    plans, buffers, placed = [], [], {}
    replay = replayed(func)   # a numerics copy: the full-size program's decisions, not the copy's price
    for entry in found.values():
        source, dtype, readers = entry["source"], entry["dtype"], entry["readers"]
        saved, cost = _price(entry, spec)
        reader_names, conversions = tuple(name for _, name in readers), entry["conversions"] or 0
        take = (source.name, dtype) in replay if replay is not None else spec.compute_capability >= MEASURED_ON \
            and entry["conversions"] is not None and saved > cost * (1 + CONFIDENCE)
        if not take:
            plans.append(OperandRounding(source.name, dtype, "", reader_names, conversions, saved, cost, False,
                                         _refusal(entry, source, saved, cost, replay is not None, spec)))
            continue
        rounded = tirx.decl_buffer(source.shape, dtype, _fresh(f"{source.name}_{dtype}", names), layout=None)
        buffers.append(rounded)
        for index, _ in readers:
            stmts[index] = _reading_rounded(stmts[index], source, dtype, rounded)
        first = min(index for index, _ in readers)
        placed.setdefault(first, []).append(_rounding_nest(source, rounded, _fresh(f"{rounded.name}_rounding", blocks)))
        reason = ("rounded once, as the full-size program decided (this is its numerics copy)" if replay is not None
                  else f"rounded once: {conversions} conversions in the contractions ({saved * 1e6:.1f} us) "
                  f"against a pass over {source.name} ({cost * 1e6:.1f} us)")
        plans.append(OperandRounding(source.name, dtype, rounded.name, reader_names, conversions, saved, cost,
                                     True, reason))
    body = []
    for index, stmt in enumerate(stmts):
        body += placed.get(index, []) + [stmt]
    if buffers:
        func = with_root_block(func, replace_block(root, body=tirx.SeqStmt(body),
                                                   alloc_buffers=list(root.alloc_buffers) + buffers))
    return write_roundings(func, plans)


def RoundOperandsOnce(gpu: str = "H200", limits=None):
    spec = gpu_spec(gpu, limits)
    return s_tir_pass("RoundOperandsOnce", lambda func: round_operands_once(func, spec))
