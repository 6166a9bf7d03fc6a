"""Re-check issue 18's table of classes (crash, silent, unclear, late, missed, refused valid
programs) one row at a time: each row is the regression test(s) that reproduce its program, run
with pytest in one process on the CPU; a row is 0 when all of its tests pass.

    PYTHONPATH=$PWD python benchmarks/issue18_classes.py          # a table, then the pytest summary
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROWS = [  # (class, what happened, the tests that reproduce it)
    ("crash", "floordiv by loaded Bd, computed gather index: SIGFPE/SIGSEGV in the reference", [
        "tests/numerics/test_reference_isolation.py::test_programs_with_divisors_and_computed_indices_compile_verified",
        "tests/numerics/test_reference_isolation.py::test_a_crashing_reference_is_the_inputs_undefined_behaviour_and_a_crashing_stage_the_passs"]),  # noqa: E501
    ("silent", "softmax 300x20000 verified at a size where OnlineSoftmax does not fire", [
        "tests/tir_passes/test_decision_plan.py::test_larger_copies_keep_the_order_of_sizes_and_the_size_limit",
        "tests/tir_passes/test_decision_plan.py::test_plan_differences_name_what_differs"]),
    ("silent", "tuning-cache entry used without a legality check; key without source hash/versions", [
        "tests/triton_codegen/test_tuning_cache.py::test_the_key_holds_the_generated_source_and_the_versions",
        "tests/triton_codegen/test_tuning_cache.py::test_a_cached_choice_outside_the_search_space_is_refused"]),
    ("silent", "module cache imports whatever sits at its path; writes not atomic", [
        "tests/triton_codegen/test_module_cache.py::test_a_foreign_or_half_written_module_file_is_replaced"]),
    ("silent", "global_symbol used raw as a file name", [
        "tests/triton_codegen/test_module_cache.py::test_a_name_becomes_a_file_name_only_through_the_sanitizer"]),
    ("silent (GPU)", "a dimension of 2^32+7 for an int32 size truncated by the launcher", [
        "tests/triton_codegen/test_module_cache.py::test_a_dimension_beyond_its_size_dtype_is_refused_at_launch"]),
    ("silent (no verify)", "Gluon's truncating // for floordiv; a bool max reduction's bare ValueError", [
        "tests/gluon/test_gluon_floor_division.py::test_floor_division_and_modulo_round_toward_minus_infinity",
        "tests/lowering/test_bool_reductions.py::test_a_bool_max_reduction_is_refused_clearly"]),
    ("unclear", "table[ids[i] + 1, j] blamed on HoistAllocations; fp16 row sum blamed on the codegen; "
                "TVM's floordiv by negative divisors", [
        "tests/numerics/test_reference_isolation.py::test_assumed_and_computed_index_ranges_are_solved",
        "tests/numerics/test_accumulation.py::test_a_long_16_bit_sum_verifies_without_a_second_opinion",
        "tests/numerics/test_second_opinion.py::test_a_correct_kernel_is_accepted_where_tvm_is_wrong"]),
    ("unclear", "num_warps=3, a tile extent as a string, a cache file of the wrong shape, threads colliding, np.bool_", [
        "tests/tir_passes/test_contract_records.py::test_num_warps_three_is_a_contract_error",
        "tests/tir_passes/test_contract_records.py::test_a_tile_extent_written_as_a_string_is_a_contract_error",
        "tests/triton_codegen/test_tuning_cache.py::test_a_cache_file_of_the_wrong_shape_is_a_clear_error",
        "tests/triton_codegen/test_tuning_cache.py::test_threads_storing_one_entry_do_not_collide",
        "tests/triton_codegen/test_module_cache.py::test_numpy_bool_is_a_bool"]),
    ("late", "an if around loops refused only by the lowering", [
        "tests/lowering/test_unsupported.py::test_an_if_around_loops_is_refused_before_any_pass"]),
    ("missed", "a reduction loop re-marked as a program-id loop passes the contract check", [
        "tests/tir_passes/test_contract_records.py::test_a_reduction_loop_remarked_as_a_program_id_is_caught"]),
    ("refused valid", "an arg-max with a local buffer; a scan-ordered cumsum", [
        "tests/tir_passes/test_scalar_temporaries.py::test_an_arg_max_with_a_local_buffer_compiles",
        "tests/tir_passes/test_scalar_temporaries.py::test_alloc_buffer_inside_a_block_names_its_line",
        "tests/tir_passes/test_scan_ordered.py::test_a_scan_ordered_cumsum_compiles_and_matches"]),
]


def main() -> int:
    tests = [test for _, _, row in ROWS for test in row]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    passed = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("PASSED ")}

    def ok(test: str) -> bool:
        return any(p == test or p.startswith(test + "[") for p in passed)

    failing_rows = 0
    for kind, what, row in ROWS:
        bad = [t for t in row if not ok(t)]
        failing_rows += bool(bad)
        print(f"{'0' if not bad else 'OPEN':4}  {kind:18}  {what}" + (f"\n      failing: {', '.join(bad)}" if bad else ""))
    print(done.stdout.splitlines()[-1] if done.stdout else done.stderr[-2000:])
    return 1 if failing_rows else 0


if __name__ == "__main__":
    sys.exit(main())
