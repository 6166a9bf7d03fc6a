"""Names in generated code, shared by the passes, the lowering and the TVM-free runtime side
(the AOT compiler and the hardware model of a saved module): no TVM here."""


def python_name(name: str) -> str:
    """`name` made a Python identifier (kernel, axis and loop names in generated code)."""
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"v_{cleaned}"


def pointer_name(buffer: str) -> str:
    """The kernel argument that points at `buffer` (TE names such as `A_red_temp.v0` made identifiers)."""
    return f"{python_name(buffer)}_ptr"


def stride_name(buffer: str, axis: int) -> str:
    return f"{python_name(buffer)}_stride{axis}"

