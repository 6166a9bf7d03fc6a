"""Rewrite families for where a contraction's operands are widened: the same 16-bit values reach
the product whichever way the casts are written, so the dot's operand dtype must not move.

- `operand_cast_round_trip`: `T.Cast("float32", X[..])` as `Cast(fp32, Cast(fp16, Cast(fp32, X[..])))`;
- `cast_on_product`: `Cast(fp32, A[..]) * Cast(fp32, B[..])` as `Cast(fp32, A[..] * B[..])`;
- `cast_inside_selection`: `Cast(fp32, T.if_then_else(c, X[..], 0))` (a padded operand) as
  `T.if_then_else(c, Cast(fp32, X[..]), 0.0)`;
- `operand_cast_as_stage`: the widening of a 16-bit parameter read by a reduction in a stage of
  its own (`X_f32[..] = Cast(fp32, X[..])`), the reduction reading the float32 intermediate.
"""

from __future__ import annotations

import re

from .text import IDENT, matching_paren, replace_calls, split_args
from .updates import updates

_SIXTEEN_BIT = ("float16", "bfloat16")
_LOAD = rf"{IDENT}\[[^\[\]\n]*\]"
_NUMBER = r"-?[0-9][0-9.e+-]*"


def buffer_dtypes(text: str) -> dict[str, str]:
    """Buffer name -> dtype, of the parameters and the allocations (float32 where none is written)."""
    found = dict(re.findall(rf"({IDENT}): T\.Buffer\([^\n]*?\"(\w+)\"\)", text))
    for name, rest in re.findall(rf"^\s*({IDENT}) = T\.(?:sblock_)?alloc_buffer\(([^\n]*)\)$", text, flags=re.M):
        dtype = re.search(r"\"(\w+)\"", rest)
        found[name] = dtype.group(1) if dtype else "float32"
    return found


def _parameter_shapes(text: str) -> dict[str, str]:
    return dict(re.findall(rf"({IDENT}): T\.Buffer\((\([^()]*\)), \"\w+\"\)", text))


def operand_cast_round_trip(text: str) -> str | None:
    """`T.Cast("float32", X[..])` of a 16-bit buffer as `T.Cast("float32", T.Cast("float16",
    T.Cast("float32", X[..])))`: a value rounded back to the type it came from (exact)."""
    dtypes = buffer_dtypes(text)

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
    dtypes = buffer_dtypes(text)

    def rewrite(match) -> str:
        a, b = match.group(1), match.group(2)
        kinds = {dtypes.get(a.split("[")[0]), dtypes.get(b.split("[")[0])}
        if len(kinds) != 1 or not kinds <= set(_SIXTEEN_BIT):
            return match.group(0)
        return f'T.Cast("float32", {a} * {b})'

    result = re.sub(rf'T\.Cast\("float32", ({_LOAD})\) \* T\.Cast\("float32", ({_LOAD})\)', rewrite, text)
    return result if result != text else None


def _constant(branch: str, dtype: str) -> str | None:
    """`branch` as a `dtype` constant when it is a number (`0`, `T.Cast("float16", 0)`, `T.float16(0.0)`)
    and `dtype` a float type."""
    if "float" not in dtype:
        return None
    found = re.fullmatch(rf'(?:T\.Cast\("\w+", ({_NUMBER})\)|T\.\w+\(({_NUMBER})\)|({_NUMBER}))', branch)
    if found is None:
        return None
    number = next(group for group in found.groups() if group is not None)
    return f"T.{dtype}({float(number)!r})"


def cast_inside_selection(text: str) -> str | None:
    """`T.Cast(d, T.if_then_else(c, a, b))` as `T.if_then_else(c, T.Cast(d, a), T.Cast(d, b))`, a
    constant branch written as a `d` constant (a padded operand widened inside its guard). Exact:
    the cast of the chosen value is the chosen cast value."""
    changed = []

    def rewrite(args: list[str]) -> str | None:
        if len(args) != 2 or not args[1].startswith("T.if_then_else(") or not args[0].startswith('"'):
            return None
        if matching_paren(args[1], len("T.if_then_else(") - 1) != len(args[1]) - 1:
            return None
        condition, *branches = split_args(args[1][len("T.if_then_else("):-1])
        dtype = args[0].strip('"')
        new = [_constant(branch, dtype) or f"T.Cast({args[0]}, {branch})" for branch in branches]
        changed.append(True)
        return f"T.if_then_else({condition}, {new[0]}, {new[1]})"

    result = replace_calls(text, "T.Cast", rewrite)
    return result if changed else None


def operand_cast_as_stage(text: str) -> str | None:
    """Every 16-bit parameter that a reduction's update reads under `T.Cast("float32", X[..])`
    widened in a stage of its own before the first nest (`X_f32 = T.alloc_buffer(shape, "float32")`,
    a spatial nest storing `T.Cast("float32", X[..])`), the updates reading `X_f32[..]`. Exact."""
    dtypes, shapes = buffer_dtypes(text), _parameter_shapes(text)
    read = []
    for update in updates(text):
        for name in re.findall(rf'T\.Cast\("float32", ({IDENT})\[', update.value):
            if dtypes.get(name) in _SIXTEEN_BIT and name in shapes and name not in read:
                read.append(name)
    if not read:
        return None
    words = set(re.findall(IDENT, text))
    wide = {name: _fresh(f"{name}_f32", words) for name in read}
    body = _widened_reads(text, wide)
    first_nest = re.search(r"^    for ", body, flags=re.M)
    if first_nest is None:
        return None
    allocations = "".join(f'    {wide[name]} = T.alloc_buffer({shapes[name]}, "float32")\n' for name in read)
    stages = "".join(_widening_nest(name, wide[name], shapes[name]) for name in read)
    at = first_nest.start()
    return body[:at] + allocations + stages + body[at:]


def _fresh(name: str, words: set[str]) -> str:
    while name in words:
        name += "_"
    words.add(name)
    return name


def _widened_reads(text: str, wide: dict[str, str]) -> str:
    """`T.Cast("float32", X[..])` as `X_f32[..]` inside the reductions' updates."""
    out, position = [], 0
    for update in updates(text):
        value = update.value
        for name, new in wide.items():
            value = re.sub(rf'T\.Cast\("float32", {name}(\[[^\[\]\n]*\])\)', rf"{new}\1", value)
        out.append(text[position:update.start])
        out.append(f"{update.indent}{update.target} = {value}")
        position = update.end
    out.append(text[position:])
    return "".join(out)


def _widening_nest(name: str, wide: str, shape: str) -> str:
    extents = [e for e in split_args(shape[1:-1]) if e]
    loops = [f"{wide}_l{axis}" for axis in range(len(extents))]
    variables = [f"{wide}_v{axis}" for axis in range(len(extents))]
    loop = (f"    for {', '.join(loops)} in T.grid({', '.join(extents)}):\n" if len(loops) > 1
            else f"    for {loops[0]} in range({extents[0]}):\n")
    remap = f'{", ".join(variables)} = T.axis.remap("{"S" * len(loops)}", [{", ".join(loops)}])'
    index = ", ".join(variables)
    return (f"{loop}        with T.sblock(\"{wide}\"):\n            {remap}\n"
            f"            {wide}[{index}] = T.Cast(\"float32\", {name}[{index}])\n")
