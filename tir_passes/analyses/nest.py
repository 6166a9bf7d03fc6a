"""Questions about loop nests, blocks and accesses that several passes and the lowering ask.

One implementation of each, so that two stages asking the same question cannot disagree: the
variables of an expression, the block variable a loop drives, whether a loop walks a block's
spatial or reduction axes, a block's accesses, element sizes, power-of-two sizes, fresh names,
and whether a block is a contraction (`X += a * b`, what `tl.dot` computes).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

SPATIAL, REDUCE, MIXED = "spatial", "reduce", "mixed"
DOT_DTYPES = ("float16", "bfloat16", "float32")


# --- expressions -------------------------------------------------------------------------------
def vars_of(expr) -> list[tirx.Var]:
    """Every variable occurrence in an expression (or a list of them), in walk order."""
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return found


def uses_var(expr, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in vars_of(expr))


def is_zero(expr) -> bool:
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return isinstance(expr, (tirx.IntImm, tirx.FloatImm)) and expr.value == 0


def call_name(expr) -> str | None:
    """`if_then_else` for `T.if_then_else(...)`: the op name of an intrinsic call, else None."""
    if isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op):
        return expr.op.name.split(".")[-1]
    return None


def select_parts(expr) -> tuple | None:
    """(condition, then, else) of a T.if_then_else or a T.Select, else None."""
    if call_name(expr) == "if_then_else":
        return tuple(expr.args)
    if isinstance(expr, tirx.Select):
        return expr.condition, expr.true_value, expr.false_value
    return None


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def power_of_two_floor(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_2`, `base_3`, ... : the first not in `taken` (which it joins)."""
    name, suffix = base, 1
    while name in taken:
        suffix += 1
        name = f"{base}_{suffix}"
    taken.add(name)
    return name


def conjuncts(expr) -> list:
    """`a and b and ...` split into its parts; `True` gives none."""
    if isinstance(expr, tirx.IntImm) and int(expr.value) == 1:
        return []
    if isinstance(expr, tirx.And):
        return conjuncts(expr.a) + conjuncts(expr.b)
    return [expr]


# --- nests ---------------------------------------------------------------------------------------
def loop_chain(stmt) -> tuple[list[tirx.For], tirx.Stmt]:
    """The loops directly nested from `stmt` down, and the statement under the innermost one."""
    loops = []
    while isinstance(stmt, tirx.For):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def perfect_nest(stmt) -> tuple[list[tirx.For], s_tir.SBlockRealize] | None:
    """(loops, realize) when `stmt` is loops around exactly one block, else None."""
    loops, inner = loop_chain(stmt)
    if loops and isinstance(inner, s_tir.SBlockRealize):
        return loops, inner
    return None


def _walk_nest(stmt, on_loop, on_block, into_blocks: bool) -> None:
    """Visit loops (with the loops around them) and blocks (likewise) in program order, through
    sequences and both branches of `if`s; with `into_blocks`, also the loops inside block bodies."""

    def walk(node, loops):
        if isinstance(node, tirx.For):
            on_loop(node, loops)
            walk(node.body, loops + (node,))
        elif isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                walk(child, loops)
        elif isinstance(node, tirx.IfThenElse):
            walk(node.then_case, loops)
            if node.else_case is not None:
                walk(node.else_case, loops)
        elif isinstance(node, s_tir.SBlockRealize):
            on_block(node, loops)
            if into_blocks:
                walk(node.block.body, loops)

    walk(stmt, ())


def block_sites(stmt) -> list[tuple[s_tir.SBlockRealize, tuple[tirx.For, ...]]]:
    """(block, the loops of `stmt` around it) for every block, in program order."""
    found: list = []
    _walk_nest(stmt, lambda loop, loops: None, lambda realize, loops: found.append((realize, loops)), False)
    return found


def loop_sites(stmt, outer: tuple[tirx.For, ...] = ()) -> list[tuple[tirx.For, tuple[tirx.For, ...]]]:
    """(loop, the loops around it, starting with `outer`) for every loop, outermost first."""
    found: list = []
    _walk_nest(stmt, lambda loop, loops: found.append((loop, outer + loops)), lambda realize, loops: None, True)
    return found


def realizes_under(stmt) -> list[s_tir.SBlockRealize]:
    found: list = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, found.append), order="pre")
    return found


def blocks_under(stmt) -> list[s_tir.SBlock]:
    found: list = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, found.append), order="pre")
    return found


def loops_under(stmt) -> list[tirx.For]:
    found: list = []
    tvm_ffi.structural_walk(stmt, (tirx.For, found.append), order="pre")
    return found


def bound_iter_var(realize: s_tir.SBlockRealize, loop_var: tirx.Var) -> tirx.IterVar | None:
    """The block iteration variable whose binding mentions `loop_var` (the first, if several)."""
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if uses_var(value, loop_var):
            return iv
    return None


def loop_kind(loop: tirx.For, realize: s_tir.SBlockRealize) -> str:
    """SPATIAL or REDUCE when the loop drives only that kind of the block's axes, else MIXED
    (also when it drives none)."""
    kinds = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if uses_var(value, loop.loop_var):
            kinds.add(REDUCE if iv.iter_type == tirx.IterVar.CommReduce else SPATIAL)
    return kinds.pop() if len(kinds) == 1 else MIXED


def is_reduction_block(block: s_tir.SBlock) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)


def substitute_bindings(expr, realize: s_tir.SBlockRealize):
    """`expr` (over the block's variables) in terms of the loop variables that bind them."""
    binding = {iv.var.__chandle__(): value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: binding.get(v.__chandle__(), v)))


# --- accesses ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Access:
    buffer: object          # the buffer Var
    indices: tuple          # TIR index expressions over the block's variables
    is_store: bool
    node: object            # the BufferStore or TensorLoad

    @property
    def name(self) -> str:
        return self.buffer.name


def block_accesses(block: s_tir.SBlock, include_init: bool = False) -> list[Access]:
    """Every load and store in the block's body (and its T.init, when asked), in walk order;
    nested blocks are not entered."""
    found: list[Access] = []

    def store(node, visitor):
        found.append(Access(node.buffer, tuple(node.indices), True, node))
        visitor.default_visit(node)

    def load(node, visitor):
        found.append(Access(node.source, tuple(node.indices), False, node))
        visitor.default_visit(node)

    handlers = [(tirx.BufferStore, store), (tvm.ir.TensorLoad, load), (s_tir.SBlockRealize, lambda r, v: None)]
    tvm_ffi.structural_visit(block.body, handlers)
    if include_init and block.init is not None:
        tvm_ffi.structural_visit(block.init, handlers)
    return found


def written_buffers(block: s_tir.SBlock) -> list:
    names, found = set(), []
    for access in block_accesses(block):
        if access.is_store and access.name not in names:
            names.add(access.name)
            found.append(access.buffer)
    return found


def is_self_load(expr, store: tirx.BufferStore) -> bool:
    """`expr` loads exactly the element `store` writes (the old value in an update)."""
    return (isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(store.buffer)
            and len(expr.indices) == len(store.indices)
            and all(tvm_ffi.structural_equal(a, b) for a, b in zip(expr.indices, store.indices)))


# --- contractions ----------------------------------------------------------------------------------
def value_dtype(expr) -> str:
    return str(expr.source.dtype) if isinstance(expr, tvm.ir.TensorLoad) else str(expr.ty.dtype)


def exact_widening(cast: tirx.Cast) -> bool:
    """A cast that keeps every value: to a float type at least as wide as a float source."""
    source, target = value_dtype(cast.value), str(cast.ty.dtype)
    if source == target:
        return True
    return source in ("float16", "bfloat16") and target == "float32"


def _strip_padding(expr) -> tuple[object, tuple]:
    """The value under exact widening casts and zero padding (`T.if_then_else(inside, X[...], 0)`),
    and the padding conditions it sits under. A rounding cast (fp32 -> fp16) is part of the value."""
    guards: tuple = ()
    while True:
        if isinstance(expr, tirx.Cast) and exact_widening(expr):
            expr = expr.value
        elif call_name(expr) == "if_then_else" and is_zero(expr.args[2]):
            guards += (expr.args[0],)
            expr = expr.args[1]
        else:
            return expr, guards


@dataclass(frozen=True)
class Operand:
    """One operand of a contraction: a value (a load, or an expression computed in registers such
    as attention's weights), and the padding conditions it is read under."""

    value: object
    guards: tuple

    @property
    def dtype(self) -> str:
        return value_dtype(self.value)

    @property
    def var_names(self) -> set[str]:
        return {v.name for v in vars_of(self.value)}


def rescaled_old(expr, store: tirx.BufferStore) -> tuple[object, object] | None:
    """(F, reset) when `expr` is an online sum's old value as OnlineSoftmax writes it: `Y * F`, or
    `if_then_else(reset, 0, Y * F)` where the sum restarts (reset None for the first form)."""
    reset = None
    if call_name(expr) == "if_then_else" and is_zero(expr.args[1]):
        reset, expr = expr.args[0], expr.args[2]
    if not isinstance(expr, tirx.Mul):
        return None
    for old, factor in ((expr.a, expr.b), (expr.b, expr.a)):
        if is_self_load(old, store):
            return factor, reset
    return None


def contraction_term(block: s_tir.SBlock):
    """The term t of a sum block `X = X + t` with T.init, or of an online sum `X = X * F + t` (a
    block OnlineSoftmax marked, also restarting: rescaled_old; the lowering rescales the
    accumulator by F, tile by tile); else None."""
    from tir_passes.contracts.online_contract import online_rescale  # the contract module imports this one

    if block.init is None or not isinstance(block.body, tirx.BufferStore):
        return None
    store, value = block.body, block.body.value
    if not isinstance(value, tirx.Add):
        return None
    for old, term in ((value.a, value.b), (value.b, value.a)):
        if is_self_load(old, store):
            return term
        if online_rescale(block) is not None and rescaled_old(old, store) is not None:
            return term
    return None


def contraction_operands(block: s_tir.SBlock) -> tuple[Operand, Operand] | None:
    """(a, b) when the block sums products `a * b` (contraction_term), where a and b are values of a
    dtype tl.dot takes (loads, or expressions in registers; a load under a widening cast counts in
    its own dtype) and each has a spatial variable the other lacks (an (m, k) operand times a (k, n)
    one). None otherwise."""
    term = contraction_term(block)
    if term is None or str(block.body.buffer.dtype) not in DOT_DTYPES:
        return None  # tl.dot accumulates in fp32
    product, _ = _strip_padding(term)
    if not isinstance(product, tirx.Mul):
        return None
    a, b = (Operand(*_strip_padding(side)) for side in (product.a, product.b))
    if a.dtype not in DOT_DTYPES or b.dtype not in DOT_DTYPES:
        return None
    spatial = {iv.var.name for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar}
    a_vars, b_vars = a.var_names & spatial, b.var_names & spatial
    if not (a_vars - b_vars) or not (b_vars - a_vars):
        return None
    return a, b


def batched_along(realize: s_tir.SBlockRealize, loop: tirx.For) -> bool:
    """Whether both operands of a contraction block vary along `loop`: a batch axis of the product
    (decode attention's heads, each with its own keys), which no tl.dot takes as its M or N."""
    iv = bound_iter_var(realize, loop.loop_var)
    operands = contraction_operands(realize.block)
    return iv is not None and operands is not None and all(iv.var.name in side.var_names for side in operands)


def operands_dtype(a: Operand, b: Operand) -> str:
    """The dtype both operands of a tl.dot take: the wider one (widening is exact)."""
    return a.dtype if a.dtype == b.dtype else "float32"
