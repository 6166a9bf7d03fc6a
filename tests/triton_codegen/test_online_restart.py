"""The online sums restart where the running maximum was -inf (a `where` on the accumulator and the
row sums every key tile) only where some row's first key may be masked: unmasked and causal
attention prove their first key finite (tir_passes/analyses/leading_element.py) and print no
restart; leading masked keys keep it, and the result stays exact (the kernel against TVM)."""

import pytest

from helpers import compile_and_check
from tir_passes import CHECKS, VerificationError, run_pipeline
from tir_passes.analyses import leading_element
from tir_passes.contracts.online_contract import online_shift
from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.pass_util import replace_block
from tir_passes.analyses.nest import blocks_under
from tir_passes.infra.frontend import as_module
from triton_codegen import compile

from attention import make_attention
from test_tile_window import make_banded_attention

RESTART = '== float("-inf"))'   # the restart's condition: the maximum before the tile was -inf
GUARD = " == acc_row_max"           # the rescale's guard: where(max_prev == max, 1, exp2(..))


def _pointer_kernel(source: str) -> str:
    return source.split("@triton.jit")[1]


def _shift(kernel):
    [mark] = [m for b in blocks_under(kernel.tir["main"].body) if (m := online_shift(b)) is not None]
    return mark


def _first_finite(kernel) -> bool:
    return _shift(kernel).first_finite


@pytest.mark.interpreter
@pytest.mark.parametrize("causal", [False, True])
def test_unmasked_and_causal_attention_print_no_restart(causal):
    kernel = compile_and_check(make_attention(1, 2, 37, 16, causal=causal), aot=causal)
    assert _first_finite(kernel)
    assert RESTART not in _pointer_kernel(kernel.source)
    # the maximum starts at T.min_value, finite: it is finite from the first key on, F needs no guard
    assert _shift(kernel).finite_init and GUARD not in kernel.source


@pytest.mark.interpreter
@pytest.mark.parametrize("low, high, first_finite", [
    (-75, -1, True),     # strictly causal: row 0 has no key at all (NaN as in TIR), the others key 0
    (-75, 0, True),      # causal written as a band whose low side masks nothing
    (0, 75, False),      # anticausal: row i's first key is i, the leading ones are masked
    (-8, 0, False),      # a sliding window: the first key of rows past 8 is masked
])
def test_a_restart_is_kept_exactly_where_leading_keys_may_be_masked(low, high, first_finite):
    kernel = compile_and_check(make_banded_attention(75, 16, low, high), aot=False)
    assert _first_finite(kernel) == first_finite
    assert (RESTART in _pointer_kernel(kernel.source)) != first_finite
    # the band's maximum starts at -inf: row 0 of the strictly causal one stays there, F keeps its guard
    assert not _shift(kernel).finite_init and GUARD in _pointer_kernel(kernel.source)


def test_the_same_mask_through_a_select_is_proven_alike():
    """T.Select and T.if_then_else masks are one decision (CanonicalMasks' canonical form)."""
    kernel = compile(make_banded_attention(40, 16, -40, 0, select=True), verify=False)
    assert _first_finite(kernel)


def test_the_numerics_check_catches_a_restart_dropped_where_leading_keys_are_masked(monkeypatch):
    def always_finite(func, block, element, axis):
        return True, "wrongly proven"

    monkeypatch.setattr("tir_passes.passes.online_softmax.first_element_finite", always_finite)
    assert leading_element.first_element_finite is not always_finite
    with pytest.raises(VerificationError):
        run_pipeline(as_module(make_banded_attention(40, 16, -8, 0)), checks=CHECKS, stop_after="OnlineSoftmax")


def test_a_guardless_rescale_needs_a_proven_first_element():
    block = compile(make_attention(1, 2, 37, 16), verify=False).tir["main"]
    [marked] = [b for b in blocks_under(block.body) if online_shift(b) is not None]
    value = {**dict(marked.annotations["online.shift"].items()), "first_finite": False, "finite_init": True}
    with pytest.raises(ContractError, match="finite_init needs first_finite"):
        online_shift(replace_block(marked, annotations={**dict(marked.annotations), "online.shift": value}))
