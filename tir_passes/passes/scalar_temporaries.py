"""ScalarTemporaries: a buffer that one block uses as a scratch scalar becomes a let (`T.bind`).

`better = T.sblock_alloc_buffer((1,), "bool", scope="local")`, then `better[0] = val[vi] <
A[vi, vj]` and `idx[vi] = T.Select(better[0], vj, idx[vi])` in an arg-max's body, is the let
`better = T.bind(val[vi] < A[vi, vj])` written with memory. Every element of such a buffer is
stored before it is read in each run of the block, so its value never crosses an iteration: the
two forms are one computation, and the let is the one later passes and the lowering read (a
reduction body is stores and lets: a store to `better` made it an output of the reduction, coupled
to the others, and the program was refused).

Why: one way of writing each computation (docs/canonical-forms.md), before any decision.
Assumes: HoistAllocations ran (a `T.alloc_buffer` at the function's top level is a root
allocation). A buffer qualifies when it is allocated by the block, or by the root and touched by
no other block; it is no parameter; every access to it is in the block's body (not its T.init),
at constant indices, in statements of the body's straight-line sequence; and each load follows a
store of the same element earlier in that sequence. Anything else is left as written.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.infra.pass_util import replace_block, root_block, s_tir_pass, with_root_block


def _key(var) -> int:
    return var.__chandle__()


def _statements(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [inner for s in stmt.seq for inner in _statements(s)]
    return [stmt]


def _constant_indices(indices) -> tuple[int, ...] | None:
    values = [int(i.value) for i in indices if isinstance(i, tirx.IntImm)]
    return tuple(values) if len(values) == len(indices) else None


def _accesses(node, key: int) -> list:
    """Every load and store of the buffer `key` in `node`."""
    found: list = []
    tvm_ffi.structural_walk(node, [(tvm.ir.TensorLoad, lambda l: found.append(l) if _key(l.source) == key else None),
                                   (tirx.BufferStore, lambda s: found.append(s) if _key(s.buffer) == key else None)])
    return found


def _loads(node, key: int) -> list:
    return [a for a in _accesses(node, key) if isinstance(a, tvm.ir.TensorLoad)]


def _is_scalar_temporary(block: s_tir.SBlock, key: int) -> bool:
    if block.init is not None and _accesses(block.init, key):
        return False
    stored: set[tuple[int, ...]] = set()
    for stmt in _statements(block.body):
        if not isinstance(stmt, (tirx.BufferStore, tirx.Bind)):
            if _accesses(stmt, key):
                return False
            continue
        for load in _loads(stmt.value, key) + (_loads(stmt.indices, key) if isinstance(stmt, tirx.BufferStore) else []):
            if _constant_indices(load.indices) not in stored:
                return False
        if isinstance(stmt, tirx.BufferStore) and _key(stmt.buffer) == key:
            element = _constant_indices(stmt.indices)
            if element is None:
                return False
            stored.add(element)
    return bool(stored)


def _as_lets(block: s_tir.SBlock, buffer) -> s_tir.SBlock:
    """The block with each store to `buffer` a let and each load the latest let of its element."""
    key, latest, body = _key(buffer), {}, []
    single = all(int(d) == 1 for d in buffer.shape)
    for stmt in _statements(block.body):
        def current(load):
            return latest[_constant_indices(load.indices)] if _key(load.source) == key else load

        stmt = tvm_ffi.structural_map(stmt, (tvm.ir.TensorLoad, current))
        if isinstance(stmt, tirx.BufferStore) and _key(stmt.buffer) == key:
            element = _constant_indices(stmt.indices)
            name = buffer.name if single else "_".join([buffer.name, *(str(i) for i in element)])
            var = tirx.Var(name, stmt.value.ty.dtype)
            latest[element] = var
            stmt = tirx.Bind(var, stmt.value)
        body.append(stmt)
    regions = {"reads": [r for r in block.reads if _key(r.source) != key],
               "writes": [w for w in block.writes if _key(w.source) != key],
               "alloc_buffers": [b for b in block.alloc_buffers if _key(b) != key]}
    return replace_block(block, body=body[0] if len(body) == 1 else tirx.SeqStmt(body), **regions)


def _blocks_touching(func: tirx.PrimFunc, key: int) -> list[s_tir.SBlock]:
    blocks: list = []

    def visit(block: s_tir.SBlock) -> None:
        own = block.body if block.name_hint == "root" else block
        if block.name_hint != "root" and (_accesses(own, key) or any(_key(r.source) == key for r in
                                                                     list(block.reads) + list(block.writes))):
            blocks.append(block)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return blocks


def _rewriting(user: s_tir.SBlock, buffer):
    return lambda block: _as_lets(block, buffer) if block.same_as(user) else block


def scalar_temporaries(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def rewrite(block: s_tir.SBlock) -> s_tir.SBlock:
        for buffer in list(block.alloc_buffers):
            if block.name_hint != "root" and _is_scalar_temporary(block, _key(buffer)):
                block = _as_lets(block, buffer)
        return block

    func = func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rewrite)))
    root = root_block(func)
    for buffer in list(root.alloc_buffers):
        users = _blocks_touching(func, _key(buffer))
        if len(users) != 1 or not _is_scalar_temporary(users[0], _key(buffer)):
            continue
        body = tvm_ffi.structural_map(root.body, (s_tir.SBlock, _rewriting(users[0], buffer)))
        root = replace_block(root, body=body, alloc_buffers=[b for b in root.alloc_buffers if _key(b) != _key(buffer)])
        func = with_root_block(func, root)
    return func


def ScalarTemporaries():
    return s_tir_pass("ScalarTemporaries", scalar_temporaries)
