"""Meaning-preserving rewrites of an S-TIR program, on its TVMScript text: the ways users write
the same computation differently. Each family is a function text -> text (None: it does not apply
to this program); `rewrites(func)` applies every family that applies and parses each result back.

Families (REWRITES): renaming of loops, block variables, buffers, scalars, sizes and blocks (to
plain names, and to the code generator's and Python's own names); `T.Select` for
`T.if_then_else` and back (only where neither branch reads memory: Select evaluates both);
mirrored comparisons (`vj > vi` as `vi < vj`) and negated ones (`T.Not(vj <= vi)`); a large
negative constant for a masked -inf; `x * 0.25` as `x / 4`; the spatial loops of a nest in another
order; two independent neighbouring nests swapped; an elementwise intermediate inlined into its
readers. Each preserves the result exactly, except the masked constant, which preserves it for
every row that keeps an unmasked element (docs/canonical-forms.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import tvm

_IDENT = r"[A-Za-z_]\w*"


# --- text helpers -----------------------------------------------------------------------------------
def _matching_paren(text: str, open_at: int) -> int:
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced parentheses")


def _split_args(text: str) -> list[str]:
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


def _calls(text: str, name: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, arguments) of every call `name(...)`, outermost first."""
    found = []
    for match in re.finditer(re.escape(name) + r"\(", text):
        close = _matching_paren(text, match.end() - 1)
        found.append((match.start(), close + 1, _split_args(text[match.end():close])))
    return found


def _replace_calls(text: str, name: str, rewrite: Callable[[list[str]], str | None]) -> str:
    """Every call `name(...)` rewritten (innermost calls inside the arguments first)."""
    out, position = [], 0
    for start, end, _ in _calls(text, name):
        if start < position:
            continue   # nested in a call already rewritten
        close = end - 1
        inner = _replace_calls(text[start + len(name) + 1:close], name, rewrite)
        replaced = rewrite(_split_args(inner))
        out.append(text[position:start])
        out.append(replaced if replaced is not None else f"{name}({inner})")
        position = end
    out.append(text[position:])
    return "".join(out)


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

    result = _replace_calls(text, "T.if_then_else", rewrite)
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

    result = _replace_calls(text, "T.if_then_else", rewrite)
    result = _replace_calls(result, "T.Select", lambda args: (
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
    def order(kinds: str) -> list[int]:
        return _reversed_among(kinds, "S")

    return _permute_grids(text, order)


def reduction_loops_reversed(text: str) -> str | None:
    """Each nest's reduction loops in reverse order (conv's `rh, rw, rc` as `rc, rw, rh`), its spatial
    loops where they are. Exact for a max or a min; for a float sum the additions' order moves,
    as a tiled reduction moves it anyway (the numerics check compares)."""
    def order(kinds: str) -> list[int]:
        return _reversed_among(kinds, "R")

    return _permute_grids(text, order)


def reduction_loops_first(text: str) -> str | None:
    """Each nest's reduction loops outside its spatial loops (`for k, i, j` for a matmul), each
    kind in its order. Exact: one element's reduction runs over the same values in the same order."""
    def order(kinds: str) -> list[int]:
        return [i for i, kind in enumerate(kinds) if kind == "R"] + [i for i, kind in enumerate(kinds) if kind == "S"]

    return _permute_grids(text, order)


def _reversed_among(kinds: str, kind: str) -> list[int]:
    """The permutation (new position -> old index) that reverses the loops of `kind` in their slots."""
    slots = [index for index, k in enumerate(kinds) if k == kind]
    order = list(range(len(kinds)))
    for position, index in zip(slots, reversed(slots)):
        order[position] = index
    return order


_GRID_NEST = re.compile(r"^( *)for ([\w, ]+) in T\.grid\(([^\n]*)\):\n((?: *)with T\.sblock\([^\n]*\n *)"
                        r"([\w, ]+) = T\.axis\.remap\(\"([SR]+)\", \[([\w, ]+)\]\)", flags=re.M)


def _permute_grids(text: str, permutation: Callable[[str], list[int]]) -> str | None:
    """The loops of every `T.grid` nest around one block (bound by T.axis.remap in the loops'
    order) permuted: `permutation(kinds)` gives the new position -> old index."""
    changed = []

    def rewrite(match) -> str:
        indent, names, extents, body_indent, bound, kinds, remapped = match.groups()
        loop_names = [n.strip() for n in names.split(",")]
        loop_extents = _split_args(extents)
        remapped_names = [n.strip() for n in remapped.split(",")]
        if remapped_names != loop_names or len(kinds) != len(loop_names):
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


# --- casts on a contraction's operands -------------------------------------------------------------------
_SIXTEEN_BIT = ("float16", "bfloat16")
_LOAD = rf"{_IDENT}\[[^\[\]\n]*\]"


def _buffer_dtypes(text: str) -> dict[str, str]:
    """Buffer name -> dtype, of the parameters and the allocations."""
    found = dict(re.findall(rf"({_IDENT}): T\.Buffer\([^\n]*?\"(\w+)\"\)", text))
    found.update(re.findall(rf"({_IDENT}) = T\.sblock_alloc_buffer\([^\n]*?\"(\w+)\"", text))
    return found


def operand_cast_round_trip(text: str) -> str | None:
    """`T.Cast("float32", X[..])` of a 16-bit buffer as `T.Cast("float32", T.Cast("float16",
    T.Cast("float32", X[..])))`: a value rounded back to the type it came from (exact)."""
    dtypes = _buffer_dtypes(text)

    def rewrite(match) -> str:
        load = match.group(1)
        dtype = dtypes.get(load.split("[")[0])
        if dtype not in _SIXTEEN_BIT:
            return match.group(0)
        return f'T.Cast("float32", T.Cast("{dtype}", T.Cast("float32", {load})))'

    result = re.sub(rf'T\.Cast\("float32", ({_LOAD})\)', rewrite, text)
    return result if result != text else None


def cast_on_product(text: str) -> str | None:
    """`T.Cast("float32", A[..]) * T.Cast("float32", B[..])` of two 16-bit buffers of one dtype as
    `T.Cast("float32", A[..] * B[..])`: the cast on the product instead of on each factor. TVM then
    rounds each product to 16 bits; a tl.dot's products are exact in both forms (its operands are
    the same 16-bit tiles), so the kernel is the same and within the numerics check of either."""
    dtypes = _buffer_dtypes(text)

    def rewrite(match) -> str:
        a, b = match.group(1), match.group(2)
        kinds = {dtypes.get(a.split("[")[0]), dtypes.get(b.split("[")[0])}
        if len(kinds) != 1 or not kinds <= set(_SIXTEEN_BIT):
            return match.group(0)
        return f'T.Cast("float32", {a} * {b})'

    result = re.sub(rf'T\.Cast\("float32", ({_LOAD})\) \* T\.Cast\("float32", ({_LOAD})\)', rewrite, text)
    return result if result != text else None


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
        close = _matching_bracket(nest, match.end() - 1)
        indices = _split_args(nest[match.end():close])
        mapping = dict(zip(params, indices))
        pattern = re.compile(r"(?<![.\w])(" + "|".join(re.escape(p) for p in params) + r")\b")
        out.append(nest[position:match.start()])
        out.append("(" + pattern.sub(lambda m, mapping=mapping: f"({mapping[m.group(1)]})", value) + ")")
        position = close + 1
    out.append(nest[position:])
    return "".join(out)


def _matching_bracket(text: str, open_at: int) -> int:
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == "[":
            depth += 1
        elif text[index] == "]":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced brackets")


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
    "reduction_loops_reversed": reduction_loops_reversed,
    "reduction_loops_first": reduction_loops_first,
    "operand_cast_round_trip": operand_cast_round_trip,
    "cast_on_product": cast_on_product,
    "independent_nests_swapped": independent_nests_swapped,
    "intermediate_inlined": intermediate_inlined,
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
