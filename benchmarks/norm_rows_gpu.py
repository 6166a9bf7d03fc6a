"""Rows per program of the norms' backward row kernel (RowPartials' R), measured in the suite's harness.

    python benchmarks/norm_rows_gpu.py generate DIR      # here (TVM): DIR/<variant>/ suites of the two cases
    for v in DIR/*/; do python3 benchmarks/suite.py run $v OUT/$(basename $v) \\
        --only layernorm_backward_fp16_16384x8192,rmsnorm_backward_fp16_16384x8192; done   # on the GPU

RowPartials picks R for PROGRAMS_PER_SM (2) programs resident per multiprocessor: at 16384 rows on
132 SMs, 64 rows (256 programs). The row kernel's registers (16 warps, about 125 a thread) let one
program be resident, so 256 programs run as two rounds, the second on 124 SMs. Variants, each a
product compile of the suite's backward cases (`save="auto"`) with one constant of the pass set:

- r64: as the product decides (PROGRAMS_PER_SM 2);
- r128: PROGRAMS_PER_SM 1 (the smallest divisor of the rows at or above rows / SMs: 128 rows, 128 programs,
  half the partials);
- r125: R = ceil(rows / SMs) whether or not it divides the rows (132 programs, the last one ragged:
  every SM one program).

Measured on an H100 80GB HBM3 (2026-12-07, one run of each, the suite's rounds; JSON of r64:
benchmarks/results/2026-12-07-h100-norm-rows-r64.json; r128 and r125 as the run printed its table, their
JSON did not come back from the GPU machine): LayerNorm's
backward r64 298.9 µs (90.4% of a copy of its bytes), r128 300.0 (90.1%), r125 300.0 (90.2%): no difference
beyond noise, so R stays the product's. RMSNorm's rows are symbolic (R = 64 in every variant): 294.0-294.3 µs
(91.9-92.1%).
"""

import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

from tir_passes.passes import row_partials  # noqa: E402

CASES = {"layernorm_backward_fp16_16384x8192", "rmsnorm_backward_fp16_16384x8192"}


def _ragged_rows(spec, rows, deterministic):
    """R = ceil(rows / SMs), a divisor or not (the last program ragged)."""
    return row_partials.DETERMINISTIC_ROWS if rows is None or deterministic else math.ceil(rows / spec.multiprocessors)


VARIANTS = {"r64": {}, "r128": {"PROGRAMS_PER_SM": 1}, "r125": {"rows_per_program": _ragged_rows}}


def generate(folder: str) -> None:
    import suite

    for variant, constants in VARIANTS.items():
        saved = {name: getattr(row_partials, name) for name in constants}
        try:
            for name, value in constants.items():
                setattr(row_partials, name, value)
            suite.generate(os.path.join(folder, variant), "full", CASES)
        finally:
            for name, value in saved.items():
                setattr(row_partials, name, value)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "generate":
        sys.exit("usage: python benchmarks/norm_rows_gpu.py generate DIR")
    generate(sys.argv[2])
