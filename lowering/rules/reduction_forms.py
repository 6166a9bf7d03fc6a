"""What a reduction block computes, read off its body: independent folds, or selections.

TIR runs a reduction block as a left fold in loop order: for each element its body (stores, and
`tirx.Bind` lets that scope over the rest of the body) runs in sequence, and `T.init` gives each
output its start value (an output without one accumulates into what it holds). The body is
executed symbolically here into one update per output: the value it ends with, over the outputs'
old values and the element. Each update is then one of

  combiner  `Y = Y (+ | max | min) rhs`, either operand order, where rhs reads no output; a key
            (below) without payloads is a max or min combiner too;
  key       an output updated by T.max/T.min, or by a Select between its old value and the
            element's key `e` under a comparison of the two, reading no other output;
  payload   an output updated by a Select between its old value and a new value that reads no
            output, under a condition that compares a key's old value with that key's `e`.
A key with payloads is a selection (arg-max, arg-min): the element with the better key wins and
brings its payloads. Each payload's condition is evaluated for an old key above, equal to and
below the element's: it must keep the old state in one of the strict cases and not in the other
(the key's direction), and the equal case is the tie rule: keep the old state (the first element
wins) or take the new one (the last wins). A tie clause comparing a payload's old value with its
new value (topi's `idx < k`) is decided by the fold: when the payload's new values grow strictly
in fold order and its T.init value is below all of them, the old value is always the smaller one
(and conversely when they fall; lowering/rules/fold_order.py says which element comes first). Anything
else that reads another output is refused, naming the block and its line.

Under an OnlineSoftmax mark (tir_passes/contracts/online_contract.py) two more forms are read: the max
block's `M_prev = M` (the maximum before the element, kind "previous") and a sum rescaled by a
factor, `Y = Y * F + t`, whose F reads no output of the block.

NaN keys: every comparison with NaN is false, so what a sequential fold keeps depends on where
the NaNs fall; the lowering skips NaN keys (docs/lowering.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import UnsupportedConstructError
from tir_passes.analyses.nest import is_self_load, rescaled_old
from tir_passes.contracts.online_contract import online_rescale, online_shift
from tir_passes.infra.reduction_kinds import MAX, MIN, PROD, SUM, combiner_nodes

from lowering.rules.fold_order import old_versus_new

FIRST, LAST = "first", "last"
_FOLDS = combiner_nodes(tirx, (SUM, PROD, MAX, MIN))
_TESTS = {tirx.GT: lambda s: s > 0, tirx.GE: lambda s: s >= 0, tirx.LT: lambda s: s < 0,
          tirx.LE: lambda s: s <= 0, tirx.EQ: lambda s: s == 0, tirx.NE: lambda s: s != 0}
_ABOVE, _EQUAL, _BELOW = 1, 0, -1   # the sign of (old key - element's key)
SUPPORTED = ("supported: outputs folded on their own (`Y = Y + v`, T.max, T.min, reading no other output) and "
             "selections (arg-max/arg-min): a key updated by T.max/T.min or by a Select of its old value and the "
             "element's key under a comparison of the two, and payloads updated by a Select between their old "
             "value and the element's value under that comparison")


@dataclass(frozen=True)
class Update:
    """One output: its store, the value the body leaves in it (over the outputs' old values and
    the element), and its T.init value (None: it starts from what the output holds)."""

    store: tirx.BufferStore
    value: object
    init: object | None

    @property
    def name(self) -> str:
        return self.store.buffer.name

    def is_old(self, expr) -> bool:
        return is_self_load(expr, self.store)


@dataclass(frozen=True)
class Combiner:
    update: Update
    kind: str     # sum, max, min; previous (an online max's value before the element)
    rhs: object   # the element's contribution; for previous, the old value of the maximum it follows
    scale: object = None   # an online sum's rescale factor F: `Y = Y * F + rhs`
    reset: object = None   # ... or `Y = if_then_else(reset, 0, Y * F) + rhs` (OnlineSoftmax's -inf reset)


@dataclass(frozen=True)
class Payload:
    update: Update
    new: object   # the value a winning element brings


@dataclass(frozen=True)
class Selection:
    key: Update
    kind: str                     # max | min: the larger or the smaller key wins
    element: object               # the element's key
    payloads: tuple[Payload, ...]
    tie: str                      # first | last: which of two equal keys wins, in fold order

    @property
    def updates(self) -> tuple[Update, ...]:
        return (self.key,) + tuple(p.update for p in self.payloads)


@dataclass(frozen=True)
class ReductionForm:
    combiners: tuple[Combiner, ...]
    selections: tuple[Selection, ...]


# --- the body, executed symbolically ---------------------------------------------------------
def _sequence(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [leaf for child in stmt.seq for leaf in _sequence(child)]
    return [stmt]


def _same_indices(a: tirx.BufferStore, b: tirx.BufferStore) -> bool:
    return len(a.indices) == len(b.indices) and all(
        tvm_ffi.structural_equal(x, y) for x, y in zip(a.indices, b.indices)
    )


def _resolve(expr, bound: dict[int, object], updates: dict[str, Update]):
    """`expr` with let-bound variables replaced by their values and loads of outputs stored
    earlier in the body replaced by what was stored."""

    def var(v):
        return bound.get(v.__chandle__(), v)

    def load(node):
        update = updates.get(node.source.name)
        return update.value if update is not None and update.is_old(node) else node

    return tvm_ffi.structural_map(expr, [(tirx.Var, var), (tvm.ir.TensorLoad, load)])


def block_updates(block: s_tir.SBlock, where: str) -> list[Update]:
    """Each output's update, in the order of the outputs' first stores."""
    bound: dict[int, object] = {}
    updates: dict[str, Update] = {}
    for stmt in _sequence(block.body):
        if isinstance(stmt, tirx.Bind):
            bound[stmt.var.__chandle__()] = _resolve(stmt.value, bound, updates)
        elif isinstance(stmt, tirx.BufferStore):
            earlier = updates.get(stmt.buffer.name)
            if earlier is not None and not _same_indices(earlier.store, stmt):
                raise UnsupportedConstructError(
                    f"{where}: reduction block '{block.name_hint}' stores {stmt.buffer.name} at two different indices"
                )
            updates[stmt.buffer.name] = Update(stmt, _resolve(stmt.value, bound, updates), None)
        else:
            raise UnsupportedConstructError(
                f"{where}: reduction block '{block.name_hint}' has a "
                f"{type(stmt).__name__} in its body; a reduction body is stores and lets"
            )
    inits = _init_stores(block, updates, where)
    return [Update(u.store, u.value, inits[name].value if name in inits else None) for name, u in updates.items()]


def _init_stores(block: s_tir.SBlock, updates: dict[str, Update], where: str) -> dict[str, tirx.BufferStore]:
    stores: dict[str, tirx.BufferStore] = {}
    for stmt in _sequence(block.init) if block.init is not None else []:
        update = updates.get(stmt.buffer.name) if isinstance(stmt, tirx.BufferStore) else None
        if update is None or not _same_indices(update.store, stmt):
            raise UnsupportedConstructError(
                f"{where}: T.init of '{block.name_hint}' must store start values of the "
                f"outputs the block updates, at their indices ({', '.join(updates)})"
            )
        stores[stmt.buffer.name] = stmt
    return stores


# --- classification ------------------------------------------------------------------------------
def _reads(expr, names) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: found.append(load.source.name in names)))
    return any(found)


def _compared(atom, update: Update, element) -> int | None:
    """1 when `atom` compares (old value OP element), -1 for (element OP old value), else None."""
    if type(atom) not in _TESTS:
        return None
    if update.is_old(atom.a) and tvm_ffi.structural_equal(atom.b, element):
        return 1
    if update.is_old(atom.b) and tvm_ffi.structural_equal(atom.a, element):
        return -1
    return None


def _truth(cond, sign: int, key: Update, element, other_atom) -> bool | None:
    """`cond` when the old key compares to the element's key with `sign`, in three-valued logic:
    None when it depends on something unknown. Comparisons that are not about the key go to
    `other_atom` (tie clauses)."""
    if isinstance(cond, (tirx.And, tirx.Or)):
        a, b = (_truth(side, sign, key, element, other_atom) for side in (cond.a, cond.b))
        decisive = isinstance(cond, tirx.Or)  # True decides an Or, False an And
        if decisive in (a, b):
            return decisive
        return None if None in (a, b) else not decisive
    if isinstance(cond, tirx.Not):
        inner = _truth(cond.a, sign, key, element, other_atom)
        return None if inner is None else not inner
    side = _compared(cond, key, element)
    if side is not None:
        return _TESTS[type(cond)](side * sign)
    return other_atom(cond)


def _keeps_old(cond, keep_when_true: bool, key: Update, element, other_atom=lambda atom: None) -> dict | None:
    """{sign: whether the update keeps its old value} for the three cases, or None if unknown."""
    table = {}
    for sign in (_ABOVE, _EQUAL, _BELOW):
        truth = _truth(cond, sign, key, element, other_atom)
        if truth is None:
            return None
        table[sign] = truth == keep_when_true
    return table


def _direction(table: dict) -> str | None:
    if table[_ABOVE] != table[_BELOW]:
        return "max" if table[_ABOVE] else "min"
    return None


def _select_parts(update: Update, outputs) -> tuple[object, bool, object] | None:
    """(condition, whether it keeps the old value when true, new value) of `Select` between the
    update's old value and a new value that reads no output."""
    parts = _selection_of(update.value)
    if parts is None:
        return None
    condition, true_value, false_value = parts
    if update.is_old(true_value) and not _reads(false_value, outputs):
        return condition, True, false_value
    if update.is_old(false_value) and not _reads(true_value, outputs):
        return condition, False, true_value
    return None


def _selection_of(value) -> tuple | None:
    """(condition, true value, false value) of a Select or a T.if_then_else: between the old value,
    which is in bounds, and a new value, the two mean the same (the support check sees the user's
    program, before CanonicalMasks)."""
    if isinstance(value, tirx.Select):
        return value.condition, value.true_value, value.false_value
    if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name.endswith("if_then_else"):
        return tuple(value.args)
    return None


def _combiner(update: Update, outputs) -> Combiner | None:
    value = update.value
    kind = _FOLDS.get(type(value))
    if kind is not None:
        for old, rhs in ((value.a, value.b), (value.b, value.a)):
            if update.is_old(old) and not _reads(rhs, outputs):
                return Combiner(update, kind, rhs)
        return None
    parts = _select_parts(update, outputs)
    if parts is None:
        return None
    cond, keep_when_true, element = parts
    table = _keeps_old(cond, keep_when_true, update, element)
    direction = _direction(table) if table is not None else None
    return Combiner(update, direction, element) if direction is not None else None


def _online_combiner(block: s_tir.SBlock, update: Update, updates: list[Update], outputs) -> Combiner | None:
    """The forms only an OnlineSoftmax mark allows (online_contract.py): the max block's copy of
    the maximum before the element, and a sum rescaled by a factor `Y = Y * F + t`, or restarted
    where the maximum was -inf: `Y = if_then_else(reset, 0, Y * F) + t`."""
    shift, rescale = online_shift(block), online_rescale(block)
    if shift is not None and update.name == shift.previous:
        followed = next((u for u in updates if u.name == shift.shift), None)
        if followed is not None and followed.is_old(update.value):
            return Combiner(update, "previous", update.value)
    value = update.value
    if rescale is not None and isinstance(value, tirx.Add):
        for scaled, rhs in ((value.a, value.b), (value.b, value.a)):
            rescaled = rescaled_old(scaled, update.store)
            if rescaled is None or _reads(rhs, outputs) or any(_reads(e, outputs) for e in rescaled if e is not None):
                continue
            return Combiner(update, "sum", rhs, *rescaled)
    return None


def reduction_form(block: s_tir.SBlock, where: str) -> ReductionForm:
    updates = block_updates(block, where)
    outputs = {u.name for u in updates}
    combiners = [
        c
        for c in (_online_combiner(block, u, updates, outputs) or _combiner(u, outputs) for u in updates)
        if c is not None
    ]
    keys = [c for c in combiners if c.kind in ("max", "min")]
    groups: dict[str, tuple[Combiner, list]] = {}
    for update in updates:
        if any(c.update is update for c in combiners):
            continue
        parts = _select_parts(update, outputs)
        key = _key_of(parts[0], keys) if parts is not None else None
        if key is None:
            raise _unsupported_update(block, update, outputs, where)
        groups.setdefault(key.update.name, (key, []))[1].append((update, *parts))
    selections = tuple(_selection(key, payloads, block, where) for key, payloads in groups.values())
    return ReductionForm(tuple(c for c in combiners if c.update.name not in groups), selections)


def _unsupported_update(block: s_tir.SBlock, update: Update, outputs, where: str) -> UnsupportedConstructError:
    head = f"{where}: reduction block '{block.name_hint}' updates {update.name} with `{_short(update.value)}`"
    if not _reads(update.value, outputs - {update.name}):
        return UnsupportedConstructError(f"{head}; supported combiners are +, *, T.max and T.min of the old value")
    return UnsupportedConstructError(
        f"{head}, which couples it to other outputs in a way tir-triton cannot lower; " + SUPPORTED
    )


def _short(expr) -> str:
    text = " ".join(str(expr).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _atoms(cond) -> list:
    if isinstance(cond, (tirx.And, tirx.Or)):
        return _atoms(cond.a) + _atoms(cond.b)
    if isinstance(cond, tirx.Not):
        return _atoms(cond.a)
    return [cond]


def _key_of(cond, keys: list[Combiner]) -> Combiner | None:
    """The one key whose old value the condition compares with that key's element."""
    found = [k for k in keys if any(_compared(atom, k.update, k.rhs) is not None for atom in _atoms(cond))]
    return found[0] if len(found) == 1 else None


def _selection(key: Combiner, members: list, block: s_tir.SBlock, where: str) -> Selection:
    payloads = tuple(Payload(update, new) for update, _, _, new in members)
    ties = []
    for update, cond, keep_when_true, _ in members:
        table = _keeps_old(cond, keep_when_true, key.update, key.rhs, lambda atom: _tie_clause(atom, payloads, block))
        if table is None or _direction(table) != key.kind:
            raise UnsupportedConstructError(
                f"{where}: reduction block '{block.name_hint}' updates {update.name} under `{_short(cond)}`, which does "  # noqa: E501
                f"not keep the element with the {key.kind} {key.update.name} (it must keep the old value for a better "
                "old key and take the new one for a worse; a tie may be decided by the comparison or by a clause such "
                "as `idx < k` whose value the fold fixes); " + SUPPORTED
            )
        ties.append(FIRST if table[_EQUAL] else LAST)
    if len(set(ties)) > 1:
        raise UnsupportedConstructError(
            f"{where}: reduction block '{block.name_hint}': the payloads of "
            f"{key.update.name} send ties to different elements"
        )
    return Selection(key.update, key.kind, key.rhs, payloads, ties[0])


def _tie_clause(atom, payloads: tuple[Payload, ...], block: s_tir.SBlock) -> bool | None:
    """The value of a comparison between a payload's old and new value, when the fold fixes it."""
    for payload in payloads:
        side = _compared(atom, payload.update, payload.new)
        if side is not None:
            relation = old_versus_new(payload.new, payload.update.init, block)
            return None if relation is None else _TESTS[type(atom)](side * relation)
    return None
