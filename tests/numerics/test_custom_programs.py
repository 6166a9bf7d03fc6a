"""Programs nobody showed the compiler: each one compiles with every per-pass check, matches
TVM's CPU build in the interpreter, and compiles ahead of time for sm_90 and sm_80."""

import pytest

from helpers import compile_and_check
from programs import PROGRAMS


@pytest.mark.interpreter
@pytest.mark.aot
@pytest.mark.parametrize("func", PROGRAMS, ids=[str(f.attrs["global_symbol"]) for f in PROGRAMS])
def test_program_matches_tvm(func):
    compile_and_check(func)
