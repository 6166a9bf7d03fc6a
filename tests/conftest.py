"""Test setup: kernels run in Triton's interpreter on the CPU (TRITON_INTERPRET=1 is set before
anything imports Triton), and the examples folder is importable. Ahead-of-time compiles for
sm_90/sm_80 run in a worker process that imports Triton in compiled mode (triton_codegen/aot.py)."""

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden tile programs and kernels from what the compiler emits now")
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "numerics"))
