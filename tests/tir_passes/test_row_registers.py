"""The warps of whole-row kernels (analyses/row_registers.py): 16 only where 8 would hold the kernel's
row values past the register budget, the same rule with and without the deterministic flag."""

import os
import sys

from triton_codegen import compile
from tir_passes.analyses.nest import block_sites
from tir_passes.analyses.row_registers import ROW_REGISTER_BUDGET, held_row_values, row_registers, row_warps
from tir_passes import differentiate

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from layernorm import make_layernorm  # noqa: E402
from rmsnorm import make_rmsnorm  # noqa: E402


def _warps(program, **options) -> list[int]:
    return [kernel.num_warps for kernel in compile(program, verify=False, **options).program.kernels]


def test_one_warp_per_512_elements_up_to_8_then_16_only_past_the_budget():
    assert [row_warps(elements, 1) for elements in (512, 2048, 4096, 8192, 16384)] == [4, 4, 8, 8, 16]
    assert row_registers(8192, 8, 1) <= ROW_REGISTER_BUDGET < row_registers(8192, 8, 2)
    assert row_warps(8192, 2) == 16 and row_warps(4096, 3) == 8   # 8 warps hold three rows of 4096
    assert row_warps(8192, 4, warps=4) == 4                       # never more than the row asks for


def test_a_norm_holds_its_row_and_its_backward_several():
    """LayerNorm keeps X across its two reductions (gamma and beta are read once); its backward keeps
    X, dY and gamma across its sums, and the rows' weight-gradient partials across the row loop."""
    forward = make_layernorm(3, 8192, "float16")
    backward = differentiate(make_layernorm(3, 8192, "float16"), ["X", "gamma", "beta"])
    assert held_row_values(block_sites(forward.body.block.body)) == 1   # under the root block
    assert held_row_values(block_sites(backward.body.block.body)) >= 2


def test_rows_of_8192_take_8_warps_with_the_flag_or_without_and_a_backward_16():
    """The deterministic kernel takes the plan's warps (determinism.whole_row_warps, the same rule)."""
    for deterministic in (False, True):
        assert _warps(make_layernorm(5, 8192, "float16"), deterministic=deterministic) == [8]
    assert _warps(differentiate(make_rmsnorm(8192, "float16"), ["X", "weight"]))[0] == 16
