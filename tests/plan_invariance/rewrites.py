"""Meaning-preserving rewrites of an S-TIR program, on its TVMScript text: the ways users write
the same computation differently. Each family is a function text -> text (None: it does not apply
to this program); `rewrites(func)` applies every family that applies and parses each result back.

Families (REWRITES): renaming of loops, block variables, buffers, scalars, sizes and blocks (to
plain names, and to the code generator's and Python's own names); `T.Select` for
`T.if_then_else` and back (only where neither branch reads memory: Select evaluates both);
mirrored comparisons (`vj > vi` as `vi < vj`) and negated ones (`T.Not(vj <= vi)`); a large
negative constant for a masked -inf; `x * 0.25` as `x / 4`; loop order: the spatial loops of a
nest reversed or rotated, its reduction loops outside the spatial ones or right after the first
one, and, where the block is a commutative self-update (updates.py: the order its elements
arrive in does not matter), its reduction loops reversed or rotated; the update's operands
commuted (`C = t + C`) and a contraction's factors commuted (updates.py); where a contraction's
operands are widened (casts.py: a round trip, the cast on the product, the cast inside a padding
selection, the widening as a stage of its own); two independent neighbouring nests swapped; an
elementwise intermediate inlined into its readers; a reduction's T.init as a fill nest before it and a
reduction loop split by hand into two (starts.py). Each preserves the result exactly, except the
masked constant, which preserves it for every row that keeps an unmasked element, and the
reordered float sums, whose additions move as a tiled reduction moves them
(docs/canonical-forms.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import tvm

from .text import IDENT as _IDENT
from .casts import cast_inside_selection, cast_on_product, operand_cast_as_stage, operand_cast_round_trip
from .text import matching_bracket, replace_calls, split_args
from .starts import init_as_fill_nest, reduction_split_by_hand
from .updates import factors_commuted, is_order_free, update_commuted


def _strip_region_annotations(text: str) -> str:
    """Without T.reads / T.writes the parser infers them again from the rewritten body."""
    return "\n".join(line for line in text.splitlines() if not re.match(r"\s*T\.(reads|writes)\(", line)) + "\n"


def _nests(text: str) -> tuple[str, list[str], str]:
    """The function's text as (head, top-level nests, tail): a nest starts at a line of the root's
    indentation that opens a loop."""
    lines = text.splitlines(keepends=True)
    starts = [index for index, line in enumerate(lines) if re.match(r"    for ", line)]
    if not starts:
        return text, [], ""
    ends = starts[1:] + [len(lines)]
    nests = ["".join(lines[s:e]) for s, e in zip(starts, ends)]
    return "".join(lines[:starts[0]]), nests, ""


def _accessed(nest: str) -> tuple[set[str], set[str]]:
    """(read, written) buffer names of a nest's text."""
    written = set(re.findall(rf"^\s*({_IDENT})\[[^\n]*\] = ", nest, flags=re.M))
    touched = set(re.findall(rf"(?<![.\w])({_IDENT})\[", nest))
    reads = set()
    for line in nest.splitlines():
        store = re.match(rf"\s*({_IDENT})\[.*?\] = (.*)", line)
        body = store.group(2) if store else line
        reads |= set(re.findall(rf"(?<![.\w])({_IDENT})\[", body))
    return reads & touched, written


# --- the families ---------------------------------------------------------------------------------
def rename(text: str) -> str | None:
    """Every loop, block variable, intermediate and parameter buffer, scalar parameter, symbolic
    size and block gets a new name."""
    unique = _names(text)
    if not unique:
        return None
    return _renamed(text, unique, {name: f"n{index}_{len(name)}" for index, name in enumerate(unique)})


# the generated module's own names, Python's and Triton's (`range` and `T` are TVMScript's own)
HOSTILE = ("t", "tl", "pid", "rest", "mask_i", "dot", "acc", "triton", "torch", "math", "run", "grid", "meta",
           "self", "kernel", "A_ptr", "BLOCK_I", "num_warps", "s", "config", "PARAMS", "i_0", "x_tile", "numbers",
           "launch", "programs", "acc_C_1", "group", "offs", "r_i", "num_stages", "GROUP_M", "len", "os", "tune")


def hostile_rename(text: str) -> str | None:
    """Every name `rename` renames, named as the code generator's and Python's own names (HOSTILE)."""
    unique = _names(text)
    if not unique:
        return None
    words = set(re.findall(_IDENT, text)) - set(unique)
    free = [name for name in HOSTILE if name not in words]
    free += [f"{free[index % len(free)]}_{index}" for index in range(len(unique))]
    return _renamed(text, unique, dict(zip(unique, free)))


def _renamed(text: str, unique: list[str], mapping: dict[str, str]) -> str:
    longest_first = sorted(unique, key=len, reverse=True)
    pattern = re.compile(r"(?<![.\w])(" + "|".join(re.escape(n) for n in longest_first) + r")\b")
    return _rename_body(text, pattern, mapping)


def _names(text: str) -> list[str]:
    """The names `rename` renames, in order of first definition."""
    names: list[str] = []
    names += re.findall(rf"\(({_IDENT}): T\.Buffer", text) + re.findall(rf", ({_IDENT}): T\.Buffer", text)
    names += re.findall(rf"[(,] ?({_IDENT}): T\.(?:float|int|uint|bool)\w*\b(?!\()", text)
    names += re.findall(rf"^\s*({_IDENT}) = T\.(?:int32|int64)\(\)", text, flags=re.M)
    names += re.findall(rf"^\s*({_IDENT}) = T\.sblock_alloc_buffer", text, flags=re.M)
    names += re.findall(rf'T\.sblock\("({_IDENT})"\)', text)
    loops = re.findall(r"for ([\w, ]+) in (?:T\.grid|range|T\.serial)\(", text)
    for group in loops + re.findall(r"^\s*(.*?) = T\.axis\.remap", text, flags=re.M):
        names += [name.strip() for name in group.split(",")]
    for match in re.finditer(rf"^\s*({_IDENT}) = T\.axis\.\w+\(", text, flags=re.M):
        names.append(match.group(1))
    return [n for index, n in enumerate(names) if n and n not in names[:index] and n != "T"]


def _rename_body(text: str, pattern, mapping) -> str:
    """The function's own name stays (it names the kernels)."""
    head, sep, rest = text.partition("def ")
    name, paren, signature_and_body = rest.partition("(")
    return head + sep + name + paren + pattern.sub(lambda m: mapping[m.group(1)], signature_and_body)


def select_as_if_then_else(text: str) -> str | None:
    if "T.Select(" not in text:
        return None
    return text.replace("T.Select(", "T.if_then_else(")


def if_then_else_as_select(text: str) -> str | None:
    changed = []

    def rewrite(args: list[str]) -> str | None:
        if len(args) != 3 or "[" in args[1] or "[" in args[2]:
            return None
        changed.append(True)
        return f"T.Select({', '.join(args)})"

    result = replace_calls(text, "T.if_then_else", rewrite)
    return result if changed else None


_COMPARISON = re.compile(rf"(?<![.\w])({_IDENT}) (<=|>=|<|>) ({_IDENT})\b(?!\[|\()")
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
_NEGATION = {"<": ">=", ">": "<=", "<=": ">", ">=": "<"}


def mirrored_comparisons(text: str) -> str | None:
    """`a > b` as `b < a`, for comparisons of two names (block variables)."""
    result = _COMPARISON.sub(lambda m: f"{m.group(3)} {_MIRROR[m.group(2)]} {m.group(1)}", text)
    return result if result != text else None


def negated_comparisons(text: str) -> str | None:
    """`a > b` as `T.Not(a <= b)`."""
    result = _COMPARISON.sub(lambda m: f"T.Not({m.group(1)} {_NEGATION[m.group(2)]} {m.group(3)})", text)
    return result if result != text else None


def large_negative_mask(text: str) -> str | None:
    """A masked -inf (a selection's branch) as -1e30."""
    changed = []

    def rewrite(args: list[str]) -> str | None:
        if len(args) != 3:
            return None
        new = [re.sub(r'^T\.float32\("-inf"\)$', "T.float32(-1.0e30)", arg) for arg in args]
        if new == args:
            return None
        changed.append(True)
        return f"T.if_then_else({', '.join(new)})"

    result = replace_calls(text, "T.if_then_else", rewrite)
    result = replace_calls(result, "T.Select", lambda args: (
        None if len(args) != 3 or all('"-inf"' not in a for a in args[1:]) else
        (changed.append(True), "T.Select(" + ", ".join(
            re.sub(r'^T\.float32\("-inf"\)$', "T.float32(-1.0e30)", a) for a in args) + ")")[1]))
    return result if changed else None


def division_for_product(text: str) -> str | None:
    """`x * T.float32(c)` as `x / T.float32(1 / c)` where 1 / c is a power of two (exact)."""

    def rewrite(match) -> str:
        value = float(match.group(1))
        inverse = 1.0 / value if value else 0.0
        if inverse <= 0 or not math.log2(inverse).is_integer():
            return match.group(0)
        return f" / T.float32({inverse!r})"

    result = re.sub(r" \* T\.float32\(([0-9.e+-]+)\)", rewrite, text)
    return result if result != text else None


def spatial_loops_reversed(text: str) -> str | None:
    """Each nest's spatial loops in reverse order (its reduction loops stay where they are)."""
    return _permute_grids(text, lambda kinds: _reversed_among(kinds, "S"))


def spatial_loops_rotated(text: str) -> str | None:
    """Each nest of three or more spatial loops with them rotated by one in their slots (`for b,
    h, i` as `for h, i, b`: another permutation than the reversal). Exact."""
    return _permute_grids(text, lambda kinds: _rotated_among(kinds, "S"))


def reduction_loops_reversed(text: str) -> str | None:
    """The reduction loops of each order-free nest (one commutative self-update, updates.py) in
    reverse order (conv's `rh, rw, rc` as `rc, rw, rh`), its spatial loops where they are. Exact for
    a max or a min; for a float sum the additions' order moves, as a tiled reduction moves it
    anyway (the numerics check compares). An arg-max's loops stay: its ties follow the order."""
    return _permute_grids(text, lambda kinds: _reversed_among(kinds, "R"), order_free_only=True)


def reduction_loops_rotated(text: str) -> str | None:
    """The reduction loops of each order-free nest of three or more rotated by one in their slots
    (`rh, rw, rc` as `rw, rc, rh`). As exact as `reduction_loops_reversed`."""
    return _permute_grids(text, lambda kinds: _rotated_among(kinds, "R"), order_free_only=True)


def reduction_loops_first(text: str) -> str | None:
    """Each nest's reduction loops outside its spatial loops (`for k, i, j` for a matmul), each
    kind in its order. Exact: one element's reduction runs over the same values in the same order."""
    def order(kinds: str) -> list[int]:
        return [i for i, kind in enumerate(kinds) if kind == "R"] + [i for i, kind in enumerate(kinds) if kind == "S"]

    return _permute_grids(text, order)


def reduction_loops_between(text: str) -> str | None:
    """Each nest's reduction loops right after its first spatial loop (`for i, k, j`), each kind in
    its order. Exact, like `reduction_loops_first`."""
    def order(kinds: str) -> list[int]:
        spatial = [i for i, kind in enumerate(kinds) if kind == "S"]
        if len(spatial) < 2:
            return list(range(len(kinds)))
        return spatial[:1] + [i for i, kind in enumerate(kinds) if kind == "R"] + spatial[1:]

    return _permute_grids(text, order)


def _reversed_among(kinds: str, kind: str) -> list[int]:
    """The permutation (new position -> old index) that reverses the loops of `kind` in their slots."""
    slots = [index for index, k in enumerate(kinds) if k == kind]
    return _placed(len(kinds), slots, list(reversed(slots)))


def _rotated_among(kinds: str, kind: str) -> list[int]:
    """The permutation that rotates three or more loops of `kind` by one in their slots (two:
    the reversal's own, left to it)."""
    slots = [index for index, k in enumerate(kinds) if k == kind]
    if len(slots) < 3:
        return list(range(len(kinds)))
    return _placed(len(kinds), slots, slots[1:] + slots[:1])


def _placed(count: int, slots: list[int], sources: list[int]) -> list[int]:
    order = list(range(count))
    for position, index in zip(slots, sources):
        order[position] = index
    return order


_GRID_NEST = re.compile(r"^( *)for ([\w, ]+) in T\.grid\(([^\n]*)\):\n((?: *)with T\.sblock\([^\n]*\n *)"
                        r"([\w, ]+) = T\.axis\.remap\(\"([SR]+)\", \[([\w, ]+)\]\)", flags=re.M)


def _permute_grids(text: str, permutation: Callable[[str], list[int]], order_free_only: bool = False) -> str | None:
    """The loops of every `T.grid` nest around one block (bound by T.axis.remap in the loops'
    order) permuted: `permutation(kinds)` gives the new position -> old index. With
    `order_free_only`, only nests whose block is a commutative self-update (updates.py)."""
    changed = []

    def rewrite(match) -> str:
        indent, names, extents, body_indent, bound, kinds, remapped = match.groups()
        loop_names = [n.strip() for n in names.split(",")]
        loop_extents = split_args(extents)
        remapped_names = [n.strip() for n in remapped.split(",")]
        if remapped_names != loop_names or len(kinds) != len(loop_names):
            return match.group(0)
        if order_free_only and not is_order_free(text, match.end()):
            return match.group(0)
        order = permutation(kinds)
        if order == list(range(len(loop_names))):
            return match.group(0)
        changed.append(True)
        new_names = ", ".join(loop_names[i] for i in order)
        new_extents = ", ".join(loop_extents[i] for i in order)
        return (f"{indent}for {new_names} in T.grid({new_extents}):\n{body_indent}"
                f"{bound} = T.axis.remap(\"{kinds}\", [{remapped}])")

    result = _GRID_NEST.sub(rewrite, text)
    return result if changed else None


def independent_nests_swapped(text: str) -> str | None:
    """The first two neighbouring top-level nests that neither read nor write what the other writes,
    swapped."""
    head, nests, tail = _nests(text)
    for index in range(len(nests) - 1):
        first, second = nests[index], nests[index + 1]
        (r1, w1), (r2, w2) = _accessed(first), _accessed(second)
        if not (w1 & (r2 | w2)) and not (w2 & r1):
            nests[index], nests[index + 1] = second, first
            return head + "".join(nests) + tail
    return None


def intermediate_inlined(text: str) -> str | None:
    """The first elementwise intermediate (a nest of spatial loops storing `buf[v..] = e` into a root
    allocation, read by later nests only) inlined into its readers, its nest and allocation gone."""
    head, nests, tail = _nests(text)
    allocated = re.findall(rf"^    ({_IDENT}) = T\.sblock_alloc_buffer", head, flags=re.M)
    for index, nest in enumerate(nests):
        store = re.search(rf"^\s*({_IDENT})\[([\w, ]+)\] = ([^\n]*)$", nest, flags=re.M)
        if store is None or store.group(1) not in allocated or "T.init()" in nest or '"S' not in nest:
            continue
        kinds = re.search(r'T\.axis\.remap\("([SR]+)"', nest)
        if kinds is None or "R" in kinds.group(1) or len(re.findall(r"\] = ", nest)) != 1:
            continue
        buffer, params, value = store.group(1), [p.strip() for p in store.group(2).split(",")], store.group(3)
        loads = re.compile(rf"(?<![.\w]){buffer}\[")
        if loads.search(value) or any(loads.search(n) for n in nests[:index]):
            continue
        readers = [n for n in nests[index + 1:] if re.search(rf"(?<![.\w]){buffer}\[", n)]
        if not readers or any(re.search(rf"^\s*{buffer}\[", n, flags=re.M) for n in readers):
            continue
        new_nests = nests[:index] + [_substitute_loads(n, buffer, params, value) for n in nests[index + 1:]]
        new_head = re.sub(rf"^    {buffer} = T\.sblock_alloc_buffer[^\n]*\n", "", head, flags=re.M)
        return new_head + "".join(new_nests) + tail
    return None


def _substitute_loads(nest: str, buffer: str, params: list[str], value: str) -> str:
    out, position = [], 0
    for match in re.finditer(rf"(?<![.\w]){re.escape(buffer)}\[", nest):
        if match.start() < position:
            continue
        close = matching_bracket(nest, match.end() - 1)
        indices = split_args(nest[match.end():close])
        mapping = dict(zip(params, indices))
        pattern = re.compile(r"(?<![.\w])(" + "|".join(re.escape(p) for p in params) + r")\b")
        out.append(nest[position:match.start()])
        out.append("(" + pattern.sub(lambda m, mapping=mapping: f"({mapping[m.group(1)]})", value) + ")")
        position = close + 1
    out.append(nest[position:])
    return "".join(out)


REWRITES: dict[str, Callable[[str], str | None]] = {
    "rename": rename,
    "hostile_rename": hostile_rename,
    "select_as_if_then_else": select_as_if_then_else,
    "if_then_else_as_select": if_then_else_as_select,
    "mirrored_comparisons": mirrored_comparisons,
    "negated_comparisons": negated_comparisons,
    "large_negative_mask": large_negative_mask,
    "division_for_product": division_for_product,
    "spatial_loops_reversed": spatial_loops_reversed,
    "spatial_loops_rotated": spatial_loops_rotated,
    "reduction_loops_reversed": reduction_loops_reversed,
    "reduction_loops_rotated": reduction_loops_rotated,
    "reduction_loops_first": reduction_loops_first,
    "reduction_loops_between": reduction_loops_between,
    "update_commuted": update_commuted,
    "factors_commuted": factors_commuted,
    "operand_cast_round_trip": operand_cast_round_trip,
    "cast_on_product": cast_on_product,
    "cast_inside_selection": cast_inside_selection,
    "operand_cast_as_stage": operand_cast_as_stage,
    "independent_nests_swapped": independent_nests_swapped,
    "intermediate_inlined": intermediate_inlined,
    "init_as_fill_nest": init_as_fill_nest,
    "reduction_split_by_hand": reduction_split_by_hand,
}


def script_of(func) -> str:
    return _strip_region_annotations(func.script())


def parse(text: str):
    return tvm.script.from_source(text)


def rewrites(func, families=None) -> list[tuple[str, object]]:
    """(family, rewritten PrimFunc) for every family that applies to `func`."""
    text = script_of(func)
    found = []
    for family in families or REWRITES:
        rewritten = REWRITES[family](text)
        if rewritten is not None and rewritten != text:
            found.append((family, parse(rewritten)))
    return found
