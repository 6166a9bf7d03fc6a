"""Plain helpers for the tests (no fixtures magic)."""

from __future__ import annotations

import tvm
from tvm import s_tir

from lowering.rewrites.tile_access import with_tile_accesses
from triton_codegen import check_against_tvm, compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.configs import config_space
from triton_codegen.descriptors import plan_descriptors

AOT_ARCHS = (90, 80)


def assert_rewrites(pass_, before, expected) -> None:
    after = pass_(before)
    s_tir.analysis.verify_well_formed(after)
    tvm.ir.assert_structural_equal(after, expected)


def compile_and_check(func, *, sizes=None, aot: bool = True, **options):
    """Compile with every per-pass check and the kernel check (the kernel in the interpreter
    against TVM's llvm build, again at `sizes` when given), and compile every kernel ahead of time
    for sm_90 and sm_80, and its tensor-descriptor variant, if it has one, for sm_90."""
    kernel = compile(func, **options)
    if sizes or kernel.check_report is None:  # compile() checked the kernel at the default sizes
        report = check_against_tvm(kernel, func, sizes=sizes)
        assert report.ok, str(report)
    else:
        assert kernel.check_report.ok and not kernel.check_report.skipped, str(kernel.check_report)
    if aot:
        for tile_kernel in with_tile_accesses(kernel.program).kernels:
            config = config_space(tile_kernel)[0]
            for arch in AOT_ARCHS:
                compile_ahead_of_time(kernel.module_file(), tile_kernel, config, arch)
            plan = plan_descriptors(tile_kernel)
            if plan is not None:  # the tensor-descriptor variant runs on sm_90 only
                compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=plan)
    return kernel
