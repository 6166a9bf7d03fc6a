"""Shrink a failing program while it keeps failing the same way (greedy, on the Python AST).

Steps tried, smallest result first: drop a loop nest (one whose result no later nest needs),
replace an expression by one of its operands (`a + b` -> `a`, `T.exp(x)` -> `x`,
`T.if_then_else(c, a, b)` -> `a`), then drop parameters and allocations nothing uses. A step is
kept when the program still fails with the same signature (outcome and normalized first line).
Each try compiles and checks the program, so shrinking takes a minute or two.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from .generator import Program
from .runner import Outcome, run_program


def signature(outcome: Outcome) -> str:
    """What makes two failures the same: the outcome and its first line without names and numbers."""
    if outcome.kind == "miscompile":
        return outcome.kind
    first = outcome.detail.strip().splitlines()[0] if outcome.detail.strip() else ""
    first = re.sub(r"\(before/after dumps.*?\)", "", first)
    first = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "Q", first)
    first = re.sub(r"\b\w*\d\w*\b", "#", first)
    return f"{outcome.kind}: {first}"


def _function(tree: ast.Module) -> ast.FunctionDef:
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef))


def _is_call(node: ast.AST, *names: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "T" and node.func.attr in names)


def _operands(node: ast.expr) -> list[ast.expr]:
    """The sub-expressions `node` may be replaced by."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if _is_call(node, "if_then_else", "Select"):
        return node.args[1:]
    if _is_call(node, "Cast"):
        return node.args[1:]
    if _is_call(node, "init", "grid", "sblock", "match_buffer", "sblock_alloc_buffer", "where", "int32",
                "float32", "float16", "min_value", "max_value") or not isinstance(node, ast.Call):
        return []
    return [arg for arg in node.args if not isinstance(arg, ast.Constant)]


def _stored_values(func: ast.FunctionDef) -> list[ast.expr]:
    """Every expression node on the right of a buffer store, outermost first."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            found += [n for n in ast.walk(node.value) if isinstance(n, ast.expr)]
    return found


def _names_read(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _written(nest: ast.For) -> set[str]:
    return {node.targets[0].value.id for node in ast.walk(nest)
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)}


def candidates(source: str):
    """Smaller variants of `source`, the biggest cuts first."""
    tree = ast.parse(source)
    func = _function(tree)
    params = {a.arg for a in func.args.args}
    for index, stmt in enumerate(func.body):
        if not isinstance(stmt, ast.For):
            continue
        later = func.body[index + 1:]
        needed = _written(stmt) & _names_read(later)
        if all(name in params or name.endswith("_handle") or _is_param_buffer(func, name) for name in needed):
            yield _without(source, lambda f, i=index: f.body.pop(i))
    for position in range(len(_stored_values(func))):
        node = _stored_values(func)[position]
        for choice in range(len(_operands(node))):
            yield _rewritten(source, position, choice)
    yield from _unused_declarations(source)


def _is_param_buffer(func: ast.FunctionDef, name: str) -> bool:
    """`name` is bound by a T.match_buffer of a handle parameter."""
    return any(isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name
               and _is_call(s.value, "match_buffer") for s in func.body)


def _without(source: str, edit) -> str:
    tree = ast.parse(source)
    edit(_function(tree))
    return ast.unparse(tree) + "\n"


def _rewritten(source: str, position: int, choice: int) -> str:
    tree = ast.parse(source)
    func = _function(tree)
    target = _stored_values(func)[position]
    replacement = _operands(target)[choice]

    class Swap(ast.NodeTransformer):
        def generic_visit(self, node):
            if node is target:
                return replacement
            return super().generic_visit(node)

    Swap().visit(func)
    return ast.unparse(tree) + "\n"


def _unused_declarations(source: str):
    tree = ast.parse(source)
    func = _function(tree)
    nests = [s for s in func.body if isinstance(s, ast.For)]
    used = _names_read(nests)
    for index, stmt in enumerate(func.body):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id not in used \
                and _is_call(stmt.value, "match_buffer", "sblock_alloc_buffer"):
            handle = stmt.value.args[0].id if _is_call(stmt.value, "match_buffer") else None

            def drop(f, i=index, handle=handle):
                f.body.pop(i)
                if handle:
                    f.args.args = [a for a in f.args.args if a.arg != handle]

            yield _without(source, drop)
    for position, arg in enumerate(func.args.args):
        if arg.arg not in used and not arg.arg.endswith("_handle"):
            yield _without(source, lambda f, p=position: f.args.args.pop(p))


def shrink(program: Program, still_fails, *, max_tries: int = 300, log=print) -> Program:
    """The smallest variant of `program` found for which `still_fails(variant)` holds."""
    tries = 0
    improved = True
    while improved and tries < max_tries:
        improved = False
        for candidate in candidates(program.source):
            if tries >= max_tries:
                break
            tries += 1
            smaller = replace(program, source=candidate)
            if still_fails(smaller):
                log(f"shrink: {len(program.source)} -> {len(candidate)} characters ({tries} tries)")
                program = smaller
                improved = True
                break
    return program


def fails_like(outcome: Outcome, work_dir: str):
    """A still_fails for shrink: the variant fails with `outcome`'s signature."""
    wanted = signature(outcome)

    def still_fails(variant: Program) -> bool:
        result = run_program(variant, work_dir, verify=outcome.verified, timeout_s=60)
        return result.failed and signature(result) == wanted

    return still_fails
