"""A module's CONFIGS are readable and editable by hand; a launch refuses an entry that breaks what
its kernel was compiled to assume (an unmasked axis its block no longer divides, a whole-row tile
cut short, a block that is not a power of two, a deterministic pin changed), naming the entry,
instead of reading past the tensors or computing part of a row."""

import pytest
import torch

from tir_passes import LaunchError
from triton_codegen import compile
from triton_codegen.runtime_support import config_assumption_problem

from softmax import make_softmax
from transpose import make_transpose


def _run_with(kernel, args, **change):
    module = kernel.module()
    [name] = module.CONFIGS
    config = module.CONFIGS[name][module.CHOSEN[name]]
    saved = dict(config)
    config.update(change)
    try:
        kernel(*args)
    finally:
        config.clear()
        config.update(saved)


def test_a_block_that_no_longer_divides_an_unmasked_axis_is_refused():
    kernel = compile(make_transpose(16, 32), verify=False)
    summary = next(iter(kernel.module().TILE_SUMMARY.values()))
    even = next(d for d in summary["dims"] if d["even"] and isinstance(d["extent"], int))
    too_wide = 2 * max(even["extent"], even["default"])
    a, b = torch.rand(16, 32), torch.empty(32, 16)
    with pytest.raises(LaunchError, match=rf"{even['block']}={too_wide} does not divide the extent "
                                          rf"{even['extent']} of axis .*without a mask"):
        _run_with(kernel, (a, b), **{even["block"]: too_wide})
    kernel(a, b)   # the module's own entry still runs, and right
    torch.testing.assert_close(b, a.T)


@pytest.mark.parametrize("block, why", [(128, "is below what axis"), (48, "is not a power of two")])
def test_a_whole_row_tile_cut_short_or_not_a_power_of_two_is_refused(block, why):
    kernel = compile(make_softmax(5, 200), verify=False)
    x, y = torch.rand(5, 200), torch.empty(5, 200)
    with pytest.raises(LaunchError, match=rf"CONFIGS\['softmax_kernel0'\] entry .*BLOCK_AX0={block} {why}"):
        _run_with(kernel, (x, y), BLOCK_AX0=block)


def test_warps_stages_and_pins():
    summary = {"dims": [{"axis": "i", "block": "BLOCK_I", "default": 64, "extent": 64, "even": True, "min": 1}]}
    good = {"BLOCK_I": 32, "num_warps": 4, "num_stages": 2}
    assert config_assumption_problem(summary, good) == ""
    assert "num_warps=3" in config_assumption_problem(summary, {**good, "num_warps": 3})
    assert "num_stages=0" in config_assumption_problem(summary, {**good, "num_stages": 0})
    assert "pins at 64" in config_assumption_problem(summary, good, {"BLOCK_I": (64, "reduction")})
