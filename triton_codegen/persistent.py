"""The persistent tile scheduler's two halves: the kernel's loop over its tiles (written by the
emitter where the tiling contract says `persistent`) and the launch's grid (inlined into the module
that has such a kernel): `PROGRAMS_PER_SM` programs an SM, each walking tiles pid, pid + programs,
... in the kernel's GROUP_M order; 0, as many programs as tiles (one trip each).

`persistent_programs` imports nothing but torch: its source is copied into generated modules.
"""

from __future__ import annotations

import contextlib
import inspect

import torch

_INTERPRETED_SMS = 2   # the interpreter's stand-in for the SMs: each program walks several tiles


def persistent_programs(tiles, programs_per_sm, t):
    """The grid of a persistent kernel: `programs_per_sm` programs an SM (0: a program a tile), at
    most one a tile; the kernel's loop walks the rest."""
    if programs_per_sm <= 0:
        return tiles
    device = next(v.device for v in t.values() if isinstance(v, torch.Tensor))
    if device.type != "cuda":
        return min(tiles, programs_per_sm * _INTERPRETED_SMS)
    return min(tiles, programs_per_sm * torch.cuda.get_device_properties(device).multi_processor_count)


def persistent_support_text() -> str:
    """What a module with a persistent kernel defines for its launchers."""
    return ("# --- tir-triton persistent grid ---\n"
            f"_INTERPRETED_SMS = {_INTERPRETED_SMS}\n\n\n" + inspect.getsource(persistent_programs))


@contextlib.contextmanager
def tile_loop(kernel, printer):
    """Yields the name of the tile's index: the program id, or in a persistent kernel the variable
    of a loop over the tiles, stepping by the programs launched (the statements written inside the
    `with` are its body)."""
    src = printer.src
    if not kernel.grid:
        yield ""
        return
    pid = printer.names.fresh("pid")   # the printer's own names, fresh: a TIR loop may be called pid or rest
    if not kernel.persistent:
        src.line(f"{pid} = tl.program_id(0)")
        yield pid
        return
    tiles = printer.names.fresh("tiles")
    src.line(f"{tiles} = " + " * ".join(f"({printer.name_of(a.count)})" for a in kernel.grid))
    header = f"for {pid} in tl.range(tl.program_id(0), {tiles}, tl.num_programs(0)):"
    with src.block(header + "  # persistent: the launch sizes the grid, each program walks its tiles"):
        yield pid


def walked_tile(axis, count: str, index: str) -> str:
    """The line giving a grid axis's tile from its launch index: the last tile first where later
    tiles walk more (KernelTile.longest_first: the longest programs start, short ones fill the tail)."""
    if not axis.longest_first:
        return f"{axis.var} = {index}"
    return f"{axis.var} = (({count}) - 1) - {index}  # later tiles walk more: they launch first"
