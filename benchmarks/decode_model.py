"""The hardware model's price of decode attention's default configs, on the CPU (no GPU): the forms
tests/tir_passes/test_batched_online_walk.py and test_matvec_online_walk.py compile, at b4 h32
s4096 d128 (grouped keys: 8 key heads), priced for the H100.

    python benchmarks/decode_model.py        # a row each: the config, the predicted time, what limits it

Run at a checkout before Tiling's batched walks (2975e28^, with these two test files copied in) it
prints the configs that took the heads as tl.dot rows, and their spills.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "tir_passes")]

from test_batched_online_walk import make_decode_attention  # noqa: E402
from test_matvec_online_walk import make_matvec_decode  # noqa: E402
from triton_codegen import compile  # noqa: E402
from triton_codegen.model_report import model_rows  # noqa: E402

FORMS = {
    "weighted_then_normalized": lambda: make_decode_attention(4, 32, 32, 4096, 128),
    "normalized_first": lambda: make_decode_attention(4, 32, 32, 4096, 128, normalize_first=True),
    "grouped_keys": lambda: make_decode_attention(4, 32, 8, 4096, 128),
    "matvec": lambda: make_matvec_decode(4, 32, 4096, 128),
}


def main() -> None:
    for name, make in FORMS.items():
        row = next(r for r in model_rows(compile(make(), verify=False), gpu="H100", top=0) if r.default)
        print(f"{name}: {row.config} {row.prediction.seconds * 1e3:.3f} ms {row.runs or 'no spills'}")


if __name__ == "__main__":
    main()
