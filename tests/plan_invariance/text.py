"""Text helpers of the rewrite families: calls, their arguments, brackets (TVMScript's text)."""

from __future__ import annotations

import re
from collections.abc import Callable

IDENT = r"[A-Za-z_]\w*"


def matching_paren(text: str, open_at: int) -> int:
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced parentheses")


def split_args(text: str) -> list[str]:
    args, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
    args.append(text[start:].strip())
    return args


def calls(text: str, name: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, arguments) of every call `name(...)`, outermost first."""
    found = []
    for match in re.finditer(re.escape(name) + r"\(", text):
        close = matching_paren(text, match.end() - 1)
        found.append((match.start(), close + 1, split_args(text[match.end():close])))
    return found


def replace_calls(text: str, name: str, rewrite: Callable[[list[str]], str | None]) -> str:
    """Every call `name(...)` rewritten (innermost calls inside the arguments first)."""
    out, position = [], 0
    for start, end, _ in calls(text, name):
        if start < position:
            continue   # nested in a call already rewritten
        close = end - 1
        inner = replace_calls(text[start + len(name) + 1:close], name, rewrite)
        replaced = rewrite(split_args(inner))
        out.append(text[position:start])
        out.append(replaced if replaced is not None else f"{name}({inner})")
        position = end
    out.append(text[position:])
    return "".join(out)


def matching_bracket(text: str, open_at: int) -> int:
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == "[":
            depth += 1
        elif text[index] == "]":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced brackets")
