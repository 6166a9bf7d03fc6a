"""Shared by the examples: compile a PrimFunc and check it against TVM's own CPU build."""

from __future__ import annotations

import sys

from triton_codegen import check_against_tvm, compile


def main(func, **options) -> None:
    kernel = compile(func, **options)
    report = check_against_tvm(kernel, func)
    print(kernel.source if "--source" in sys.argv else kernel.tile_ir)
    print(report)
    sys.exit(0 if report.ok else 1)
