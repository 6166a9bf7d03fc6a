"""training_forward(func, saved): the forward PrimFunc with the intermediates named in `saved` promoted from
root allocations to extra output parameters, appended after the original parameters in program order.

Why: a backward made with `differentiate(func, wrt, save=...)` reads those intermediates instead of
recomputing them (forward_values.py decides which); something must write them. The training forward is that
program: the same blocks, the same values, the intermediates now outputs, so the pipeline compiles it like
any forward (attention's is still one flash-attention kernel, which also stores the final m, l and acc per
row) and its checks compare the saved values with TVM's reference like the outputs.
Assumes: `func` is a program `differentiate` reads (forward.py); each saved name is an intermediate a block
writes, declared at the root. Anything else is refused naming it (NotDifferentiableError).
"""

from __future__ import annotations

from tvm import tirx

from ...errors import NotDifferentiableError
from ...infra.frontend import as_module
from ...infra.pass_util import replace_block, root_block, with_root_block
from .forward import read_forward


def training_forward(func, saved, *, name: str | None = None) -> tirx.PrimFunc:
    """`func` writing the intermediates named in `saved` as extra outputs (named `<func>_training`)."""
    func = func if isinstance(func, tirx.PrimFunc) else as_module(func)["main"]
    forward = read_forward(func)
    names = [saved] if isinstance(saved, str) else list(saved)
    promoted = _promoted_buffers(forward, names)
    root = root_block(func)
    kept = [b for b in root.alloc_buffers if not any(b.same_as(p) for p in promoted)]
    body = with_root_block(func, replace_block(root, alloc_buffers=kept)).body
    training = tirx.PrimFunc(list(func.params) + promoted, body, func.ret_type, attrs=func.attrs)
    return training.with_attr("global_symbol", name or f"{forward.name}_training")


def _promoted_buffers(forward, names: list) -> list:
    """The root allocations named, in program order (the order the backward's signature lists them)."""
    allocated = list(root_block(forward.func).alloc_buffers)
    by_name = {b.name: b for b in allocated}
    for name in names:
        if name not in by_name:
            params = {p.name for p in forward.func.params}
            what = "a parameter already" if name in params else "not a buffer it allocates"
            raise NotDifferentiableError(f"PrimFunc {forward.name}: training_forward names {name!r}, which is {what}; "
                                         f"it saves intermediates (root allocations: "
                                         f"{', '.join(b.name for b in allocated) or 'none'})")
        if forward.writer(by_name[name]) is None:
            raise NotDifferentiableError(f"PrimFunc {forward.name}: training_forward names {name!r}, which no block "
                                         "writes")
    order = [b.output for b in forward.blocks]
    chosen = [by_name[n] for n in dict.fromkeys(names)]
    return sorted(chosen, key=lambda b: next(k for k, o in enumerate(order) if o.same_as(b)))
