"""Names in generated code, shared by the passes, the lowering and the TVM-free runtime side
(the AOT compiler and the hardware model of a saved module): no TVM here."""

import keyword


# names a generated module means itself inside a kernel: a TIR name equal to one would shadow it
MODULE_NAMES = frozenset(keyword.kwlist + keyword.softkwlist + [
    "tl", "triton", "torch", "math", "numbers", "range", "float", "int", "bool", "min", "max", "abs", "len"])


def python_name(name: str) -> str:
    """`name` made a Python identifier (kernel, axis and loop names in generated code), in the
    namespace of TIR names: a name that is a keyword or one of MODULE_NAMES, or that starts or ends
    with `_` (where the module's helpers live) gets one more `_` at its end. The module's own
    names never end with `_`, so no TIR name can become one of them, and distinct names stay
    distinct."""
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    cleaned = cleaned if cleaned and not cleaned[0].isdigit() else f"v_{cleaned}"
    if cleaned in MODULE_NAMES or cleaned.startswith("_") or cleaned.endswith("_"):
        return f"{cleaned}_"
    return cleaned


def pointer_name(buffer: str) -> str:
    """The kernel argument that points at `buffer` (TE names such as `A_red_temp.v0` made identifiers)."""
    return f"{python_name(buffer)}_ptr"


def stride_name(buffer: str, axis: int) -> str:
    return f"{python_name(buffer)}_stride{axis}"

