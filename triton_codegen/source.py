"""Lines of Python with managed indentation; nothing else in the code generator touches spaces."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class Source:
    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def line(self, text: str = "") -> None:
        self._lines.append("    " * self._depth + text if text else "")

    def lines(self, text: str) -> None:
        for line in text.splitlines():
            self.line(line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header)
        self._depth += 1
        start = len(self._lines)
        try:
            yield
        finally:
            if len(self._lines) == start:
                self.line("pass")
            self._depth -= 1

    def call(self, opening: str, arguments: list[str]) -> None:
        """`opening` (ending in `(`), one argument per line, then `)`."""
        self.line(opening)
        for argument in arguments:
            self.line(f"    {argument},")
        self.line(")")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
