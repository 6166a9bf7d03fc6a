"""Rewrite families of a reduction's start and of its loops (TVMScript text): the T.init of a
commutative self-update as a fill nest of its own before it (NumPy's `C = zeros(...)`, then
`C += ...`), and a reduction loop split by hand into two (`for ko, ki in T.grid(K // 2, 2)`, the
block reading `vko * 2 + vki`). Both keep the result bit for bit: the fill runs before the
element's first update, and the split loops visit the same points in the same order
(CanonicalInits and CanonicalSplitAxes bring them back, docs/canonical-forms.md)."""

from __future__ import annotations

import re

from .text import IDENT, split_args
from .updates import block_body, is_order_free

_HEADER = re.compile(r"^( *)for ([\w, ]+) in T\.grid\(([^\n]*)\):\n( *)with T\.sblock\(\"(\w+)\"\):\n"
                     r"( *)([\w, ]+) = T\.axis\.remap\(\"([SR]+)\", \[([\w, ]+)\]\)$", flags=re.M)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def _grid_nests(text: str):
    """(match, loop names, extents, block variable names, kinds) of every T.grid nest around one
    block whose T.axis.remap binds the loops in their order."""
    for match in _HEADER.finditer(text):
        loops, extents = _names(match.group(2)), split_args(match.group(3))
        bound, kinds, remapped = _names(match.group(7)), match.group(8), _names(match.group(9))
        if remapped == loops and len(kinds) == len(loops) == len(bound) == len(extents):
            yield match, loops, extents, bound, kinds


def init_as_fill_nest(text: str) -> str | None:
    """The first commutative self-update whose T.init is one store of the element at exactly its
    spatial variables: the init as a nest of the spatial loops before the reduction's nest."""
    for match, loops, extents, bound, kinds in _grid_nests(text):
        if not is_order_free(text, match.end()):
            continue
        start, end = block_body(text, match.end())
        init = re.match(rf"( *)with T\.init\(\):\n( *)({IDENT})\[([^\n]*?)\] = ([^\n]*)\n", text[start:end])
        if init is None:
            continue
        buffer, indices, value = init.group(3), _names(init.group(4)), init.group(5)
        spatial = [k for k, kind in enumerate(kinds) if kind == "S"]
        if sorted(indices) != sorted(bound[k] for k in spatial) or re.search(rf"(?<![.\w]){buffer}\[", value):
            continue
        indent = match.group(1)
        fill = (f"{indent}for {', '.join(loops[k] for k in spatial)} in T.grid({', '.join(extents[k] for k in spatial)}):\n"
                f"{indent}    with T.sblock(\"{match.group(5)}_fill\"):\n"
                f"{indent}        {', '.join(bound[k] for k in spatial)} = T.axis.remap(\"{'S' * len(spatial)}\", "
                f"[{', '.join(loops[k] for k in spatial)}])\n"
                f"{indent}        {buffer}[{init.group(4)}] = {value}\n")
        return text[:match.start()] + fill + text[match.start():start] + text[start + init.end():]
    return None


def reduction_split_by_hand(text: str) -> str | None:
    """The last reduction loop of the first nest with a constant even extent (at least 4) as two
    loops, `k_o` over half of it and `k_i` over 2, the block reading `(vk_o * 2 + vk_i)` for vk."""
    for match, loops, extents, bound, kinds in _grid_nests(text):
        candidates = [k for k, kind in enumerate(kinds) if kind == "R" and extents[k].strip().isdigit()
                      and int(extents[k]) % 2 == 0 and int(extents[k]) >= 4]
        if not candidates:
            continue
        k = candidates[-1]
        var = bound[k]
        start, end = block_body(text, match.end())
        body = re.sub(rf"(?<![.\w]){var}\b", f"({var}_o * 2 + {var}_i)", text[start:end])
        loops = loops[:k] + [f"{loops[k]}_o", f"{loops[k]}_i"] + loops[k + 1:]
        extents = extents[:k] + [str(int(extents[k]) // 2), "2"] + extents[k + 1:]
        bound = bound[:k] + [f"{var}_o", f"{var}_i"] + bound[k + 1:]
        kinds = kinds[:k] + "RR" + kinds[k + 1:]
        header = (f"{match.group(1)}for {', '.join(loops)} in T.grid({', '.join(e.strip() for e in extents)}):\n"
                  f"{match.group(4)}with T.sblock(\"{match.group(5)}\"):\n"
                  f"{match.group(6)}{', '.join(bound)} = T.axis.remap(\"{kinds}\", [{', '.join(loops)}])")
        return text[:match.start()] + header + text[match.end():start] + body + text[end:]
    return None
