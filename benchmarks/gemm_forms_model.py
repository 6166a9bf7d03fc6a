"""The hardware model's price of one GEMM written the ways users write it, on the CPU (no GPU):
fp16 A·B into fp32 C at 3000×5000×1000 (issue 17's masked GEMM), priced for the H100 at each form's
default configs (each kernel compiled ahead of time for its registers and spills).

    python benchmarks/gemm_forms_model.py            # a row each: kernels, the model's time, the configs
    python benchmarks/gemm_forms_model.py fill scaled  # only these forms

The forms are the tests' (tests/tir_passes/test_canonical_inits.py, test_canonical_split_axes.py):
T.init; a fill nest of zeros or of a bias before the sum; the sum into what C holds on entry; a
constant scale inside the sum into C; the reduction or the rows split by hand. Run at a checkout
before CanonicalInits and CanonicalSplitAxes (with these two test files copied in) it prints what
those forms compiled to then.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests"),
                os.path.join(ROOT, "tests", "tir_passes")]

from test_canonical_inits import make_gemm  # noqa: E402
from test_canonical_split_axes import make_split_matmul  # noqa: E402
from triton_codegen import compile  # noqa: E402
from triton_codegen.model_report import model_rows  # noqa: E402

M, N, K = 3000, 5000, 1000
FORMS = {
    "init": lambda: make_gemm(M, N, K, "init"),
    "fill": lambda: make_gemm(M, N, K, "fill"),
    "fill_bias": lambda: make_gemm(M, N, K, "fill_bias"),
    "incoming": lambda: make_gemm(M, N, K, "incoming"),
    "scaled": lambda: make_gemm(M, N, K, "init", scale=0.3),
    "split_k": lambda: make_split_matmul(M, N, K, 1, 8),
    "split_rows": lambda: make_split_matmul(M, N, K, 8, 1),
}


def main(names: list[str]) -> None:
    for name in names or FORMS:
        rows = [row for row in model_rows(compile(FORMS[name](), verify=False), gpu="H100", top=0) if row.default]
        seconds = sum(row.prediction.seconds for row in rows)
        configs = "; ".join(f"{row.config} {row.runs or 'no spills'}" for row in rows)
        print(f"{name}: {len(rows)} kernel(s), {seconds * 1e6:.1f} us: {configs}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
