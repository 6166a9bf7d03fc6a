"""The blocks of a TVMScript text read as Python (`ast`): which block is a commutative
self-update, and rewrites of its update and of a contraction's operands that keep the meaning.

A block's update is the store after its `T.init()`. It is *order-free* when it is one store
`X[I] = X[I] op t` (or `t op X[I]`) with op in +, *, or `T.max(X[I], t)` / `T.min` (either
argument order): its elements may arrive in any order (exact for max, min and integer sums; a
float sum's additions move, as every tiled reduction moves them). Anything else (an arg-max's
selection, whose ties go to the first element in loop order; lets; a second store) keeps the
order its loops give it. This reading is the test's own, independent of the passes' (it is how
the rewrite families decide where reordering a reduction keeps the meaning).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_IDENT = r"[A-Za-z_]\w*"
_COMMUTATIVE_CALLS = ("max", "min")


@dataclass(frozen=True)
class Update:
    """A block's update store: its line's span in the text, the target's and the value's source."""

    start: int
    end: int
    indent: str
    target: str
    value: str


def block_body(text: str, header_end: int) -> tuple[int, int]:
    """The span of the block whose `T.axis.remap` line ends at `header_end`: the lines after it
    indented at least as deep as that line."""
    line_start = text.rfind("\n", 0, header_end) + 1
    indent = len(text[line_start:header_end]) - len(text[line_start:header_end].lstrip())
    position = header_end + 1
    end = position
    for line in text[position:].splitlines(keepends=True):
        stripped = line.strip()
        if stripped and len(line) - len(line.lstrip()) < indent:
            break
        end += len(line)
    return position, end


def block_update(text: str, start: int, end: int) -> Update | None:
    """The one store of a block's body after its `T.init()` (None: lets, conditions, several stores)."""
    lines = text[start:end].splitlines(keepends=True)
    statements, position, skip_below = [], start, None
    for line in lines:
        depth = len(line) - len(line.lstrip())
        if skip_below is not None and depth > skip_below:
            position += len(line)
            continue
        skip_below = None
        if line.strip() == "with T.init():":
            skip_below = depth
        elif line.strip():
            statements.append((position, line))
        position += len(line)
    if len(statements) != 1:
        return None
    offset, line = statements[0]
    store = re.match(rf"( *)({_IDENT}\[[^\n]*?\]) = ([^\n]*)$", line.rstrip("\n"))
    if store is None or _expr(store.group(2)) is None or _expr(store.group(3)) is None:
        return None
    return Update(offset, offset + len(line.rstrip("\n")), store.group(1), store.group(2), store.group(3))


def _expr(source: str):
    try:
        return ast.parse(source, mode="eval").body
    except SyntaxError:
        return None


def _same(node, source: str) -> bool:
    return ast.dump(node) == ast.dump(_expr(source))


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.attr if node.func.value.id == "T" else None
    return None


def self_operands(update: Update) -> tuple[str, str] | None:
    """(the stored element's source, the other operand's source) of a commutative self-update;
    None for any other update."""
    value = _expr(update.value)
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        sides = (value.left, value.right)
    elif _call_name(value) in _COMMUTATIVE_CALLS and len(value.args) == 2 and not value.keywords:
        sides = tuple(value.args)
    else:
        return None
    sources = [ast.get_source_segment(update.value, side) for side in sides]
    for index, side in enumerate(sides):
        if _same(side, update.target):
            return sources[index], sources[1 - index]
    return None


def is_order_free(text: str, header_end: int) -> bool:
    update = block_update(text, *block_body(text, header_end))
    return update is not None and self_operands(update) is not None


def updates(text: str) -> list[Update]:
    """The update store of every block that has a `T.init()` (a reduction), in text order."""
    found = []
    for match in re.finditer(r"T\.axis\.remap\(\"[SR]+\", \[[\w, ]+\]\)$", text, flags=re.M):
        start, end = block_body(text, match.end())
        if "with T.init():" in text[start:end]:
            update = block_update(text, start, end)
            if update is not None:
                found.append(update)
    return found


def rewrite_updates(text: str, rewrite) -> str | None:
    """Every reduction's update store replaced by `rewrite(update)` (None: that one stays)."""
    out, position, changed = [], 0, False
    for update in updates(text):
        new_value = rewrite(update)
        if new_value is None or new_value == update.value:
            continue
        out.append(text[position:update.start])
        out.append(f"{update.indent}{update.target} = {new_value}")
        position, changed = update.end, True
    out.append(text[position:])
    return "".join(out) if changed else None


def update_commuted(text: str) -> str | None:
    """Every commutative self-update's operands swapped: `C = C + t` as `C = t + C`, `T.max(M, t)`
    as `T.max(t, M)`. Exact (+, *, max and min commute; no NaN in the inputs)."""

    def rewrite(update: Update) -> str | None:
        operands = self_operands(update)
        if operands is None:
            return None
        value = _expr(update.value)
        old, term = operands
        if isinstance(value, ast.BinOp):
            op = "+" if isinstance(value.op, ast.Add) else "*"
            return f"{_wrapped(term)} {op} {old}"
        return f"T.{_call_name(value)}({term}, {old})"

    return rewrite_updates(text, rewrite)


def _wrapped(source: str) -> str:
    """`source` safe as the left operand of + or *."""
    node = _expr(source)
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.UnaryOp)) and not (
            isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod))):
        return f"({source})"
    return source


def factors_commuted(text: str) -> str | None:
    """Every sum of products `C = C + a * b` as `C = C + b * a` (the contraction's factors in the
    other order; exact, multiplication commutes)."""

    def rewrite(update: Update) -> str | None:
        operands = self_operands(update)
        value = _expr(update.value)
        if operands is None or not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
            return None
        old, term = operands
        product = _expr(term)
        if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
            return None
        a, b = (ast.get_source_segment(term, side) for side in (product.left, product.right))
        swapped = f"{_factor(b)} * {_factor(a)}"
        return f"{old} + {swapped}" if _same(value.left, update.target) else f"{swapped} + {old}"

    return rewrite_updates(text, rewrite)


def _factor(source: str) -> str:
    """`source` safe as a factor of *."""
    node = _expr(source)
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.UnaryOp)):
        return f"({source})"
    return source
