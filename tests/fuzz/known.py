"""Bugs already reported: each file in tests/fuzz/found/ that is still open (it has an XFAIL)
gives its failure's SIGNATURE, a regular expression over the fuzzer's `outcome: detail`. A fuzz
failure that matches one is known: listed, and not failing CI (test_found.py keeps the file
itself honest: it must still fail that way)."""

from __future__ import annotations

import ast
import os
import re

FOUND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "found")


def module_constant(path: str, name: str, default=None):
    """A literal module-level constant of a Python file, read without running the file."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    return default


def known_failures(folder: str = FOUND) -> dict[str, str]:
    """found file -> the regular expression (its SIGNATURE) that `kind: detail` of its failure matches."""
    known = {}
    for filename in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        signature = module_constant(os.path.join(folder, filename), "SIGNATURE") if filename.endswith(".py") else None
        if signature and module_constant(os.path.join(folder, filename), "XFAIL"):
            known[filename] = signature
    return known


def known_as(kind: str, detail: str, known: dict[str, str]) -> str | None:
    """The found file whose SIGNATURE matches this failure, or None."""
    for filename, pattern in known.items():
        if re.search(pattern, f"{kind}: {detail}", re.DOTALL):
            return filename
    return None
