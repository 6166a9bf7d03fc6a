"""Source text as highlighted HTML lines, and side-by-side diffs of those lines.

Pygments lexes a whole text at once (so a docstring over several lines stays one string) and the
tokens are then cut at line ends, because listings and diffs show code line by line. TVMScript
and the generated Triton module are Python; the tile program gets a small lexer of its own.
Every line is `markupsafe.Markup` built with escaping, so the template never sees raw source.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import zip_longest

from markupsafe import Markup
from pygments import lex
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES, Comment, Keyword, Name, Number, Operator, Punctuation, Text, Whitespace

CODE_CLASS = "code"     # the CSS class of every highlighted block
SIMILAR = 0.6           # lines of a replaced run at least this similar share a row of the diff
PAIRING_LIMIT = 40000   # line pairs compared in one replaced run; a larger run is paired in order
_PLAIN = ("", "w")      # plain text and whitespace: no span


class TileProgramLexer(RegexLexer):
    """lowering/printer.py's text of a TileProgram."""

    name = "tile program"
    tokens = {"root": [
        (r"#.*?$", Comment.Single),
        (r"\b(program|kernel|params|scratch|combine|grid|axis|blocks|warps|stages|over|extent|along|for|in|range|"
         r"sync|if|acc|grouped|by)\b", Keyword),
        (r"\b(b?float|u?int)\d+\b|\bbool\b", Keyword.Type),
        (r"\bBLOCK_\w+", Name.Constant),
        (r"\b(arange|where|exp|log|sqrt|dot|sum|prod|max|min|scan_\w+|cdiv)\b", Name.Builtin),
        (r"\b0x[0-9a-f]+\b|\b\d+(\.\d+)?(e[+-]?\d+)?\b|\binf\b", Number),
        (r"\w+", Name),
        (r"[-+*/%<>=&|@!~^]+", Operator),
        (r"[()\[\],:;{}.]", Punctuation),
        (r"\s+", Whitespace),
        (r".", Text),
    ]}


def python_lexer() -> PythonLexer:
    return PythonLexer(stripnl=False)   # keep leading blank lines: line numbers must match the text


def tile_program_lexer() -> TileProgramLexer:
    return TileProgramLexer(stripnl=False)


def highlight_css() -> str:
    return HtmlFormatter(style="default").get_style_defs(f".{CODE_CLASS}")


def _css_class(token) -> str:
    while token not in STANDARD_TYPES:
        token = token.parent
    return STANDARD_TYPES[token]


def highlighted_lines(text: str, lexer) -> list[Markup]:
    """One Markup per line of `text` (as `str.splitlines` counts them)."""
    lines: list[list[Markup]] = [[]]
    for token, value in lex(text, lexer):
        css = _css_class(token)
        for number, piece in enumerate(value.split("\n")):
            if number:
                lines.append([])
            if piece:
                lines[-1].append(Markup.escape(piece) if css in _PLAIN else
                                 Markup('<span class="{}">{}</span>').format(css, piece))
    return [Markup("").join(parts) for parts in lines[:len(text.splitlines())]]


@dataclass(frozen=True)
class DiffRow:
    kind: str                  # same | changed | removed | added | skipped
    left_number: int | None = None
    left: Markup = Markup("")
    right_number: int | None = None
    right: Markup = Markup("")
    skipped: int = 0           # unchanged lines not shown (kind "skipped")


@dataclass(frozen=True)
class SideBySide:
    rows: tuple[DiffRow, ...]
    added: int
    removed: int


def side_by_side(before: str, after: str, lexer, context: int = 3) -> SideBySide:
    """The changed lines of `after` against `before`, with `context` unchanged lines around each
    change and a count of the unchanged lines between."""
    old, new = before.splitlines(), after.splitlines()
    if old == new:
        return SideBySide((), 0, 0)
    left, right = highlighted_lines(before, lexer), highlighted_lines(after, lexer)
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    rows: list[DiffRow] = []
    shown = 0   # lines of `before` shown or counted so far
    for group in matcher.get_grouped_opcodes(context):
        if group[0][1] > shown:
            rows.append(DiffRow("skipped", skipped=group[0][1] - shown))
        for tag, i1, i2, j1, j2 in group:
            rows += _rows(tag, range(i1, i2), range(j1, j2), old, new, left, right)
        shown = group[-1][2]
    if shown < len(old):
        rows.append(DiffRow("skipped", skipped=len(old) - shown))
    added = sum(j2 - j1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("insert", "replace"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("delete", "replace"))
    return SideBySide(tuple(rows), added, removed)


def _rows(tag: str, olds: range, news: range, old: list[str], new: list[str], left: list[Markup],
          right: list[Markup]) -> list[DiffRow]:
    if tag == "equal":
        return [DiffRow("same", i + 1, left[i], j + 1, right[j]) for i, j in zip(olds, news)]
    rows = []
    for i, j in _paired(olds, news, old, new):
        kind = "changed" if i is not None and j is not None else "removed" if j is None else "added"
        rows.append(DiffRow(kind, None if i is None else i + 1, left[i] if i is not None else Markup(""),
                            None if j is None else j + 1, right[j] if j is not None else Markup("")))
    return rows


def _paired(olds: range, news: range, old: list[str], new: list[str]) -> list[tuple[int | None, int | None]]:
    """The rows of a replaced run: its most similar pair of lines (ignoring indentation, which
    moving a nest changes) shares a row, and so on recursively before and after that pair; lines
    with no similar partner share rows in order."""
    if not olds or not news or len(olds) * len(news) > PAIRING_LIMIT:
        return list(zip_longest(olds, news))
    matcher, best, best_ratio = SequenceMatcher(autojunk=False), None, SIMILAR
    for j in news:
        matcher.set_seq2(new[j].strip())
        for i in olds:
            matcher.set_seq1(old[i].strip())
            if (matcher.real_quick_ratio() > best_ratio and matcher.quick_ratio() > best_ratio
                    and matcher.ratio() > best_ratio):
                best, best_ratio = (i, j), matcher.ratio()
    if best is None:
        return list(zip_longest(olds, news))
    i, j = best
    return (_paired(range(olds.start, i), range(news.start, j), old, new) + [best]
            + _paired(range(i + 1, olds.stop), range(j + 1, news.stop), old, new))
