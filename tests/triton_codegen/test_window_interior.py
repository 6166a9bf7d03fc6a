"""A windowed walk over key tiles is split where the window's masks are decided: tiles wholly inside
the window for every row of the row tile run without the mask (causal attention: all but the
diagonal tiles), the cut ones keep it. test_tile_window checks the numerics at every block size."""

import pytest

from triton_codegen import compile

from attention import make_attention
from test_tile_window import make_banded_attention


def _loops(source: str, kernel: str) -> list[str]:
    """The bodies of the `for j_0` loops of the kernel's pointer variant."""
    text = next(k for k in source.split("@triton.jit\n")[1:] if k.startswith(f"def {kernel}("))
    return [part.split("\n    row_max")[0] for part in text.split("for j_0 in range(")[1:]]


def test_causal_attention_masks_only_the_diagonal_tiles():
    kernel = compile(make_attention(1, 2, 200, 16, causal=True), verify=False)
    interior, diagonal = _loops(kernel.source, "attention_kernel0")
    assert interior.startswith("0, j_0_past)") and diagonal.startswith("j_0_past, j_0_stop)")
    assert "> i[:, None]" not in interior and "> i[:, None]" in diagonal   # the mask `causal and vj > vi`
    assert "# tiles of j inside the window for every row: no window mask" in kernel.source


def test_a_band_has_cut_tiles_on_both_sides():
    kernel = compile(make_banded_attention(77, 16, -3, 3), verify=False)
    before, inside, after = _loops(kernel.source, "banded_kernel0")
    assert before.startswith("j_0_first, j_0_inside)") and inside.startswith("j_0_inside, j_0_past)")
    assert after.startswith("j_0_past, j_0_stop)")
    band = ")[:, None] <= j"   # the band's mask: (i - 3) <= j and j <= i + 3 (j renamed per loop)
    assert all(band in cut for cut in (before, after)) and band not in inside


def _query_reads(source: str) -> tuple[int, int]:
    """(query-tile reads before the first key loop, inside the key loops) over every kernel variant."""
    before = inside = 0
    for kernel in source.split("@triton.jit\n")[1:]:
        head, _, loops = kernel.partition("    for j_0 in ")
        before += head.count("Q_desc.load(") + head.count("tl.load(Q_ptr")
        inside += loops.count("Q_desc.load(") + loops.count("tl.load(Q_ptr")
    return before, inside


@pytest.mark.parametrize("form", ["example", "banded"])
def test_q_is_read_once_where_the_key_loop_extent_depends_on_the_row_tile(form):
    """With more than one key tile, Tiling bounds the TIR key loop by the row tile (`i_0 // 16 + 1`):
    no constant, but positive in every program, so the walk is entered and Q is read before it
    (it was read every key tile, in both segments, when only constant extents counted)."""
    func = (make_attention(1, 2, 2048, 16, causal=True) if form == "example"
            else make_banded_attention(2048, 16, -2048, 0))
    assert _query_reads(compile(func, verify=False).source) == (2, 0)   # pointers and descriptors
