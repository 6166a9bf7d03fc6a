"""The combine function of a selection reduction (an arg-max with its payloads), as a @triton.jit function
the kernels that reduce with it call (tl.reduce over (key, payloads..., position) tuples)."""

from __future__ import annotations

from lowering.tile_ir import SelectCombine

from .source import Source


def emit_select_combine(combine: SelectCombine, src: Source) -> None:
    """The combine function of a selection reduction: takes two (key, payloads..., position)
    tuples, returns the winner's."""
    fields = ["key"] + [f"payload{i}" for i in range(len(combine.payload_dtypes))] + ["position"]
    a, b = [f"{f}_a" for f in fields], [f"{f}_b" for f in fields]
    better, earlier = (">" if combine.kind == "max" else "<"), ("<" if combine.tie == "first" else ">")
    src.line("@triton.jit")
    with src.block(f"def {combine.name}({', '.join(a + b)}):"):
        src.line(
            f'"""The {"larger" if combine.kind == "max" else "smaller"} key wins; of equal keys, the '
            f'{"smaller" if combine.tie == "first" else "larger"} position."""'
        )
        if combine.key_dtype.startswith(("float", "bfloat")):  # NaN beats every number, as in torch.argmax
            src.line("nan_a, nan_b = key_a != key_a, key_b != key_b")
            src.line(
                f"a_wins = (nan_a & ~nan_b) | (~nan_a & ~nan_b & (key_a {better} key_b)) | "
                f"(((key_a == key_b) | (nan_a & nan_b)) & (position_a {earlier} position_b))"
            )
        else:
            src.line(f"a_wins = (key_a {better} key_b) | ((key_a == key_b) & (position_a {earlier} position_b))")
        src.line("return " + ", ".join(f"tl.where(a_wins, {x}, {y})" for x, y in zip(a, b)))
