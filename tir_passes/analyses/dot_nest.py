"""What the GEMM price needs of a contraction nest (contracts/gemm_price.DotNest): how many
contractions walk its K loop, how many distinct operand tiles they read along M and along N, and
how many M×N tiles leave the kernel.

Two operands are one tile when they load the same buffer at the same indices once each block's
variables are replaced by the loop variables they are bound to (SwiGLU's `X[vi, vk]` in the gate's
block and in the up projection's: the kernel loads it once per K step for both tl.dots).
"""

from __future__ import annotations

import dataclasses

import tvm
import tvm_ffi
from tvm import tirx

from tir_passes.analyses.nest import (block_accesses, bound_iter_var, contraction_operands, realizes_under, uses_var,
                                     vars_of)
from tir_passes.contracts.gemm_price import DotNest
from tir_passes.infra.dtypes import element_bytes


def dot_nest(m_loop: tirx.For, k_loop: tirx.For) -> DotNest:
    """The DotNest of the contractions under `k_loop`, whose M tile axis is `m_loop`; the outputs
    counted over the blocks under `m_loop` (the kernel's tile of rows)."""
    a_tiles: list[str] = []
    b_tiles: list[str] = []
    dots = 0
    m_name = m_loop.loop_var.name
    for realize in realizes_under(k_loop.body):
        operands = contraction_operands(realize.block)
        if operands is None:
            continue
        dots += 1
        for operand in operands:
            key, names = _loop_key(operand.value, realize)
            side = a_tiles if m_name in names else b_tiles
            if key not in side:
                side.append(key)
    return DotNest(max(1, dots), max(1, len(a_tiles)), max(1, len(b_tiles)), _outputs(m_loop))


def _loop_key(value, realize) -> tuple[str, set[str]]:
    """The operand's text with block variables replaced by their bindings, and the loop variables it names."""
    bound = {iv.var.__chandle__(): binding for iv, binding in zip(realize.block.iter_vars, realize.iter_values)}
    rebound = tvm_ffi.structural_map(value, (tvm.ir.Var, lambda var: bound.get(var.__chandle__(), var)))
    return str(rebound), {v.name for v in vars_of(rebound)}


def _outputs(m_loop: tirx.For) -> int:
    """Buffers written under the loop that no other block there reads: the tiles the kernel stores
    (SwiGLU's Y; its G and U are read by Y's block and stay in registers)."""
    blocks = [realize.block for realize in realizes_under(m_loop)]
    written = {a.buffer.name: block for block in blocks for a in block_accesses(block) if a.is_store}
    read_elsewhere = {a.buffer.name for block in blocks for a in block_accesses(block)
                      if not a.is_store and written.get(a.buffer.name) is not block}
    return max(1, sum(1 for name in written if name not in read_elsewhere))


def operand_staging(nest: DotNest, a, b, realize, m_loop: tirx.For, n_loop: tirx.For) -> DotNest:
    """The nest with how its operand tiles reach the MMA (DotNest.staged_bytes): the bytes each
    side's operand is loaded at, when a cast in registers makes them other than the dot's dtype
    (an fp32 gradient in an fp16 dot), and which side is the MMA's B operand: the one along the
    output's columns (drives_output_columns), `n_loop`'s side unless only `m_loop` drives them."""
    b_side = "a" if drives_output_columns(realize, m_loop) and not drives_output_columns(realize, n_loop) else "b"
    return dataclasses.replace(nest, a_load_bytes=_load_bytes(a), b_load_bytes=_load_bytes(b), mma_b_side=b_side)


def _load_bytes(operand) -> int:
    """The element bytes of the one buffer the operand loads (0: not a single load)."""
    loads: list = []
    tvm_ffi.structural_walk(operand.value, (tvm.ir.TensorLoad, loads.append))
    return element_bytes(str(loads[0].source.dtype)) if len(loads) == 1 else 0


def drives_output_columns(realize, loop: tirx.For) -> bool:
    """The loop drives the last index of the contraction's store: the output's columns, which are
    the MMA's N (the lowering orders tl.dot's operands to compute the output as it is laid out, a
    transposed product as tl.dot(b, a)); the other spatial axis is the MMA's rows (wgmma's M)."""
    store = realize.block.body
    if not isinstance(store, tirx.BufferStore) or not store.indices:
        return False
    iv = bound_iter_var(realize, loop.loop_var)
    return iv is not None and uses_var(store.indices[-1], iv.var)
