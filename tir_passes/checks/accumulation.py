"""The accumulation rule for the reference: a reduction into a 16-bit float buffer accumulates in fp32.

The kernels accumulate every reduction into a float16 or bfloat16 buffer in fp32 and round once
when they store it, as torch's `sum` does (lowering/rules/exprs.py: accumulator_dtype). TVM's llvm
build of the same TIR rounds the accumulator to 16 bits at every step: on a long fp16 row sum the
two differ by more than fp16's tolerance, and the more exact one, the kernel, was refused.

`widen_accumulators` rewrites a PrimFunc before TVM builds it so that the build follows the
kernels' rule: every 16-bit float buffer that a reduction block (an SBlock with a reduction
iteration variable) stores to is retyped to fp32 throughout the function. The reduction block
computes its update in fp32 on the path from the accumulator to the store (its other terms are
computed in their own dtype, then widened, as the kernel does); every other store to the buffer
stores a 16-bit value (widened, exact), and every other read rounds to 16 bits, so a consumer sees
the value the kernel stores. A retyped parameter is passed as an fp32 copy and its result rounded
once to its dtype (`WidenedEntry`). Every stage is built the same way (numerics.build_llvm), so a
stage is compared with the input under one rule.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.infra.pass_util import replace_block

NARROW = ("float16", "bfloat16")
WIDE = "float32"
_ARITHMETIC = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Max, tirx.Min)
_COMPARISONS = (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)


def _key(var) -> int:
    return var.__chandle__()


def _dtype(buffer) -> str:
    return str(buffer.dtype)


def _is_reduction(block: s_tir.SBlock) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)


def _stored(stmt) -> list:
    stores: list = []
    if stmt is not None:
        tvm_ffi.structural_walk(stmt, (tirx.BufferStore, stores.append))
    return [s.buffer for s in stores]


def reduction_targets(func: tirx.PrimFunc) -> list:
    """The 16-bit float buffers some reduction block stores to, in order of first store."""
    targets: dict[int, object] = {}

    def visit(block: s_tir.SBlock) -> None:
        if _is_reduction(block):
            for buffer in _stored(block.init) + _stored(block.body):
                if _dtype(buffer) in NARROW:
                    targets.setdefault(_key(buffer), buffer)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return list(targets.values())


def _wide(expr):
    return expr if expr.ty.dtype == WIDE else tirx.Cast(WIDE, expr)


class _Widener:
    """The rewrite of one function, given the wide copy of each narrow accumulator buffer."""

    def __init__(self, wide: dict[int, object]):
        self.wide = wide

    def rounded_load(self, load):
        """A load outside its accumulation: the 16-bit value the kernel would have stored."""
        copy = self.wide.get(_key(load.source))
        if copy is None:
            return load
        return tirx.Cast(_dtype(load.source), tirx.BufferLoad(copy, list(load.indices)))

    def store(self, store: tirx.BufferStore) -> tirx.Stmt:
        copy = self.wide.get(_key(store.buffer))
        if copy is None:
            return store
        return tirx.BufferStore(copy, _wide(store.value), list(store.indices))

    def _reads_accumulator(self, expr, own: set[int]) -> bool:
        found: list = []
        tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(_key(load.source) in own)))
        return any(found)

    def widened(self, expr, own: set[int]):
        """`expr` computed in fp32 along every path from a load of the block's own accumulators."""
        if not self._reads_accumulator(expr, own):
            return self.outside(expr)
        if isinstance(expr, tvm.ir.TensorLoad) and _key(expr.source) in own:
            return tirx.BufferLoad(self.wide[_key(expr.source)], list(expr.indices))
        if isinstance(expr, _ARITHMETIC) and expr.ty.dtype in NARROW + (WIDE,):
            return type(expr)(self._float(expr.a, own), self._float(expr.b, own))
        if isinstance(expr, _COMPARISONS) and expr.a.ty.dtype in NARROW:
            return type(expr)(self._float(expr.a, own), self._float(expr.b, own))
        if isinstance(expr, tirx.Select):
            wide_value = expr.ty.dtype in NARROW
            pick = self._float if wide_value else self.widened
            return tirx.Select(self.widened(expr.condition, own), pick(expr.true_value, own),
                               pick(expr.false_value, own))
        if isinstance(expr, tirx.Cast) and expr.ty.dtype in NARROW:
            return self._float(expr.value, own)  # the accumulator is not rounded on its way
        # anything else reads the accumulator rounded, as an ordinary value
        return self.outside(expr)

    def _float(self, expr, own: set[int]):
        value = self.widened(expr, own)
        return _wide(value) if value.ty.dtype in NARROW else value

    def outside(self, expr):
        return tvm_ffi.structural_map(expr, (tvm.ir.TensorLoad, self.rounded_load))

    def reduction_block(self, block: s_tir.SBlock) -> s_tir.SBlock:
        if not _is_reduction(block):
            return block
        own = {_key(b) for b in _stored(block.init) + _stored(block.body) if _key(b) in self.wide}
        if not own:
            return block

        def accumulate(store: tirx.BufferStore) -> tirx.Stmt:
            if _key(store.buffer) not in own:
                return tirx.BufferStore(store.buffer, self.widened(store.value, own), list(store.indices))
            copy = self.wide[_key(store.buffer)]
            return tirx.BufferStore(copy, self._float(store.value, own), list(store.indices))

        body = tvm_ffi.structural_map(block.body, (tirx.BufferStore, accumulate))
        init = block.init and tvm_ffi.structural_map(block.init, (tirx.BufferStore, accumulate))
        return replace_block(block, body=body, init=init)


def widen_accumulators(func: tirx.PrimFunc) -> tuple[tirx.PrimFunc, dict[str, str]]:
    """(`func` accumulating its 16-bit reductions in fp32, {retyped parameter: its dtype})."""
    narrow = reduction_targets(func)
    if not narrow:
        return func, {}
    wide = {_key(b): tirx.decl_buffer(list(b.shape), WIDE, b.name, layout=None) for b in narrow}
    widener = _Widener(wide)
    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, widener.reduction_block))
    body = tvm_ffi.structural_map(body, [(tirx.BufferStore, widener.store), (tvm.ir.TensorLoad, widener.rounded_load)])
    retyped = func.with_body(body)
    renamed = tvm_ffi.structural_map(retyped, (tvm.ir.Var, lambda v: wide.get(_key(v), v)))
    params = {p.name: _dtype(p) for p in func.params if tirx.is_buffer_var(p) and _key(p) in wide}
    return renamed, params


class WidenedEntry:
    """A built function whose retyped parameters take fp32 copies: called with the original
    tensors, it runs on the copies and stores each result rounded once to its dtype."""

    def __init__(self, entry, func: tirx.PrimFunc, widened: dict[str, str]):
        self.entry = entry
        self.positions = {i: widened[p.name] for i, p in enumerate(func.params) if p.name in widened}

    def __call__(self, *args):
        args = list(args)
        originals = {i: args[i] for i in self.positions}
        for i in self.positions:
            args[i] = tvm.runtime.tensor(originals[i].numpy().astype(np.float32), originals[i].device)
        self.entry(*args)
        for i, dtype in self.positions.items():
            narrow = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
            originals[i].copyfrom(args[i].numpy().astype(narrow))
