"""Verification checks for S-TIR stages; each usable alone, each returning a list of problems.

- well_formed: TVM's own s_tir checker.
- round_trip: `script()` parses back to a structurally equal module. For an input that TVM's
  printer does not round trip (some TE-built functions: int64 constants printed as plain ints, a
  buffer layout the printer leaves out), a stage is checked relative to it instead: its dump
  parses to what the pass makes of the previous stage's dump (check_round_trip_relative).
- purity: a pass did not mutate its input (structural hash before and after).
- bounds: every BufferLoad/BufferStore index is proven inside the buffer's shape by the
  arithmetic analyzer, under the enclosing loop ranges, block bindings, block predicates, `if`
  conditions and `T.if_then_else` branches (path_conditions.py), and `T.assume` facts about
  loaded data (assumptions.py); symbolic shapes included. Unproven accesses are reported with
  their block, the access as TVMScript and its line in the stage's script, except an index that
  depends on loaded data (a gather such as `table[ids[i], j]`): that one is "guarded", not a
  problem, because the lowering checks it at run time.
- numerics: the stage, built with `llvm`, computes what the input computed (numerics.py).
"""

from __future__ import annotations


import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.errors import first_line
from tir_passes.checks.numerics import ReferenceRun, StageCrashed, stage_results


def check_well_formed(mod: tvm.IRModule) -> list[str]:
    try:
        if s_tir.analysis.verify_well_formed(mod, assert_mode=False):
            return []
        s_tir.analysis.verify_well_formed(mod, assert_mode=True)
    except Exception as err:  # noqa: BLE001 - TVM raises several error types here
        return [first_line(err)]
    return ["TVM's well-formedness check failed"]


def reparsed(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` printed as TVMScript and parsed back: what its dump stands for."""
    parsed = tvm.script.from_source(mod.script())
    return tvm.IRModule({"main": parsed}) if isinstance(parsed, tirx.PrimFunc) else parsed


def printed_script_parses(mod: tvm.IRModule) -> bool:
    """Whether TVM's printing of `mod` parses back at all (what check_round_trip's first problem
    would otherwise say in words)."""
    try:
        reparsed(mod)
    except Exception:  # noqa: BLE001 - any parse failure: it does not
        return False
    return True


def check_round_trip(mod: tvm.IRModule) -> list[str]:
    try:
        parsed = reparsed(mod)
    except Exception as err:  # noqa: BLE001
        return [f"the printed TVMScript does not parse: {first_line(err)}"]
    mismatch = tvm_ffi.get_first_structural_mismatch(mod, parsed)
    if mismatch is None:
        return []
    return [f"printed and re-parsed module differ structurally at {mismatch[0]}"]


def check_round_trip_relative(pass_: tvm.transform.Pass, before: tvm.IRModule, after: tvm.IRModule) -> list[str]:
    """For a pipeline whose input TVM's printer does not round trip: the stage's dump parses to
    what the pass makes of the previous stage's dump, so the dump loses nothing the input's own
    printing did not (an attribute the pass adds that does not print back is still caught)."""
    try:
        dumped_before, dumped_after = reparsed(before), reparsed(after)
    except Exception as err:  # noqa: BLE001
        return [f"the printed TVMScript does not parse: {first_line(err)}"]
    try:
        expected = pass_(dumped_before)
    except Exception as err:  # noqa: BLE001 - the pass refuses its own previous dump
        return [f"the pass fails on the previous stage's dump: {type(err).__name__}: {first_line(err)}"]
    mismatch = tvm_ffi.get_first_structural_mismatch(expected, dumped_after)
    if mismatch is None:
        return []
    return [f"the re-parsed dump differs from the pass applied to the previous re-parsed dump at {mismatch[0]} "
            "(the input itself does not round trip, so the stage is compared relative to it)"]


def structural_fingerprint(mod: tvm.IRModule) -> int:
    return tvm_ffi.structural_hash(mod, map_free_vars=True)


def check_purity(input_mod: tvm.IRModule, fingerprint_before: int) -> list[str]:
    if structural_fingerprint(input_mod) == fingerprint_before:
        return []
    return ["the pass mutated its input module in place (its structural hash changed)"]


def check_numerics(reference: ReferenceRun, mod: tvm.IRModule) -> list[str]:
    try:
        results = stage_results(reference, mod["main"])
    except StageCrashed as crash:
        return [str(crash)]
    except Exception as err:  # noqa: BLE001 - a stage that no longer builds is a failure
        return [f"the stage does not build or run with the llvm target: {first_line(err)}"]
    return reference.mismatches(results)
