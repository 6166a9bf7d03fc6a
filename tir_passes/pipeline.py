"""The pass pipeline: ordered, named S-TIR -> S-TIR passes; its driver dumps, diffs, times, verifies.

Order, and why:
  HoistAllocations  T.alloc_buffer -> root allocations, so every later pass finds intermediates
  ScalarTemporaries  a buffer one block uses as a scratch scalar (an arg-max's `better[0]`) -> a let
  CanonicalSplitAxes  an axis split by hand into two loops (`vko * 8 + vki`) is one loop again
  CanonicalBlockOrder  independent nests in the data flow's order (the canonical forms, docs/canonical-forms.md)
  CanonicalLoopOrder  the spatial loops of a nest in its output's axis order
  CanonicalReductionOrder  its reduction loops inside them, the one nearest a read's contiguous axis innermost
  InlineElementwise elementwise intermediates inlined into their readers (split or inline: one form)
  CanonicalConstants  x / 2^k as x * 2^-k (exact), so constant factors are products
  CanonicalCasts    casts that change no value dropped (x16 widened and rounded back is x16)
  CanonicalUpdates  a commutative self-update names the stored element first (X = t + X as X = X + t)
  CanonicalInits    a reduction without T.init gets one (the fill nest before it, or op's identity)
  CanonicalMasks    masks as Select with -inf (negations undone, safe if_then_else as Select)
  FactorOutOfSums   factors a sum's reduction does not vary leave it (P·V's 1/l, a scale inside Q·Kᵀ)
  RowPartials       row nests + column reductions of their rows (a norm's dW) -> one walk writing partials
  SplitReduction    a contraction whose M·N tiles leave the GPU idle -> partials over slices of its
                    reduction loop and their sum (split-K), where the model prices it; before fusion
  OnlineSoftmax     a max and the sums of exponentials that read it -> one loop with a running
                    maximum (flash attention's form), where that pays; before LoopFusion
  LoopFusion        fewer kernels: inlines elementwise producers, moves them under the consumer's loops
  SplitOnlineRows   fused online rows that leave the GPU idle -> chunks' statistics, combined, readers apart
  ShareContractionLoops  sibling K loops of independent contractions (SwiGLU's) -> one, each a tl.dot
  RoundOperandsOnce a wide input contractions round to 16-bit operands -> rounded once (priced)
  BufferLayout      intermediates that still cross kernels get the axis their loops walk
                    contiguously as the unit-stride one (only fusion knows which survive)
  RemoveUnitLoops   no extent-1 loops: each remaining loop becomes a grid, tile or serial axis
  NormalizeLoopStarts  every loop starts at 0 (TVM's split needs it; the start moves into bindings)
  BankConflictFreeTiling  pads shared staging tiles of CUDA-style schedules (no-op on the Triton
                    path, which has no shared buffers); before Tiling, which leaves such nests alone
  Tiling            decides program ids, tile axes and reduction loops (needs the clean nests)

Before the first pass, input_checks.check_input checks the user's program (with the checks asked
for: its well-formedness, bounds, and that the numerics reference can be built), so no pass is
blamed for it; and the round-trip check learns whether TVM's printer round trips the input at all
(RoundTripBaseline). A pass that raises is a PassError with a failure folder, like a failed check.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from importlib import import_module
from dataclasses import dataclass, field

import tvm

from tir_passes.errors import (FrontendError, PassError, TirTritonError, UnsupportedConstructError,
                               VerificationError, first_line)
from tir_passes.infra.frontend import as_module
from tir_passes.checks.input_checks import check_input, input_round_trip
from tir_passes.infra.instrument import StageRecorder
from tir_passes.checks.decision_plan import decision_plan
from tir_passes.contracts.rounding_record import replaying
from tir_passes.checks.numerics import NumericsPlan, progress
from tir_passes.checks.shape_reduction import copy_with, larger_mappings
from tir_passes.infra.pass_util import take_raised_error
from tir_passes.infra import dump
from tir_passes.pass_order import DEFAULT_ORDER, PassEntry
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.checks import bounds, verify
from tir_passes.checks.verify_contract import check_contract

CHECKS = ("well_formed", "round_trip", "purity", "bounds", "contract", "numerics")

# passes whose reproducer can rebuild them by import path
KNOWN_PASSES = {entry.name: entry.import_path for entry in DEFAULT_ORDER}


def default_pipeline(gpu: str = "H200", deterministic: bool = False, limits: BackendLimits | None = None) -> list:
    """The passes of pass_order.DEFAULT_ORDER (the order, TVM-free), those that size tiles for `gpu` under the
    backend's `limits` (backend_limits.py; None: the defaults, the Triton backend's); deterministic: the passes
    that take it fix every reduction order (docs/determinism.md)."""
    return [_build(entry, gpu, deterministic, limits) for entry in DEFAULT_ORDER]


def _build(entry: PassEntry, gpu: str, deterministic: bool = False, limits=None) -> tvm.transform.Pass:
    module, name = entry.import_path.split(":")
    factory = getattr(import_module(module), name)
    options = {"deterministic": True} if deterministic and entry.takes_deterministic else {}
    return factory(gpu, limits=limits, **options) if entry.takes_gpu else factory(**options)


def pass_names(passes: Sequence[tvm.transform.Pass]) -> list[str]:
    return [p.info.name for p in passes]


@dataclass
class StageRecord:
    index: int
    name: str
    changed: bool
    seconds: float
    checks: dict[str, str] = field(default_factory=dict)
    verify_seconds: float = 0.0
    dump_path: str | None = None
    diff: str = ""
    decisions: tuple[tuple[str, str], ...] = ()  # (root attr, value): the decision record it wrote

    @property
    def change(self) -> str:
        """ "yes", "no", or "decision" for a pass that changed nothing but its decision record."""
        return "yes" if self.changed else "decision" if self.decisions else "no"

    def summary(self) -> str:
        """What the stage did, for a reader of the diffs: its diff, or one line when there is none."""
        if self.changed:
            return self.diff
        name = f"{self.index:02d}_{self.name}"
        if self.decisions:
            return f"# {name}: unchanged; decision: " + " | ".join(f"{k}: {v}" for k, v in self.decisions) + "\n"
        return f"# {name}: unchanged\n"


@dataclass
class PipelineResult:
    module: tvm.IRModule
    stages: list[StageRecord]
    input_module: tvm.IRModule
    numerics: NumericsPlan | None = None  # where the numerics ran (full or reduced sizes), when they did
    notes: list[str] = field(default_factory=list)  # about the input, e.g. TVM's printer does not round trip it

    def table(self, timings: bool = True) -> str:
        """The stages with their checks (and times), and where the numerics ran. Without timings
        it is deterministic, as everything in a dump folder is."""
        times = f"{'pass ms':>9}{'verify ms':>11}" if timings else ""
        lines = [f"{'stage':<6}{'pass':<25}{'changed':<9}{times}  checks"]
        for stage in self.stages:
            checks = " ".join(f"{k}={v}" for k, v in stage.checks.items()) or "-"
            times = f"{stage.seconds * 1000:>9.1f}{stage.verify_seconds * 1000:>11.1f}" if timings else ""
            lines.append(f"{stage.index:02d}    {stage.name:<25}{stage.change:<9}{times}  {checks}")
        if self.numerics is not None:
            lines.append(f"numerics at {self.numerics.describe()}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RoundTripBaseline:
    """How the round-trip check treats this input: "exact" (the input round trips), "relative"
    (TVM's printer loses something of the input: each stage is compared with the pass applied to
    the previous dump), or "skipped" (the input's TVMScript does not even parse back)."""

    mode: str
    note: str | None = None

    @classmethod
    def of(cls, mod: tvm.IRModule) -> "RoundTripBaseline":
        problem = input_round_trip(mod)
        if problem is None:
            return cls("exact")
        blame = f"TVM's printer, not a pass: the input itself does not survive print and re-parse ({problem})"
        if not verify.printed_script_parses(mod):
            return cls("skipped", f"{blame}; the round-trip check is skipped")
        return cls("relative", f"{blame}; each stage's dump is compared with the pass applied to the previous dump")


def select_passes(
    passes: Sequence[tvm.transform.Pass], disable: Sequence[str] = (), stop_after: str | None = None
) -> list[tvm.transform.Pass]:
    names = pass_names(passes)
    for name in list(disable) + ([stop_after] if stop_after else []):
        if name not in names:
            raise FrontendError(f"no pass named '{name}' in the pipeline (passes: {', '.join(names)})")
    chosen = []
    for p in passes:
        if p.info.name not in disable:
            chosen.append(p)
        if p.info.name == stop_after:
            break
    return chosen


def passes_after(passes: Sequence[tvm.transform.Pass], stage: str) -> list[tvm.transform.Pass]:
    """The passes that follow `stage` (a pass name, or "input": all of them): what a dump of that
    stage still needs (dump.stage_of reads the stage from the dump)."""
    names = pass_names(passes)
    if stage == "input":
        return list(passes)
    if stage not in names:
        raise FrontendError(f"the dump is of pass {stage}, which is not in the pipeline (passes: {', '.join(names)})")
    return list(passes[names.index(stage) + 1 :])


def run_pipeline(
    mod: tvm.IRModule,
    passes: Sequence[tvm.transform.Pass] | None = None,
    *,
    dump_dir: str | None = None,
    checks: Sequence[str] = (),
    disable: Sequence[str] = (),
    stop_after: str | None = None,
) -> PipelineResult:
    """Run `passes` (default: default_pipeline()) on `mod` (or a PrimFunc), verifying `checks` after each pass."""
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise FrontendError(f"unknown verification check(s) {unknown}; known: {', '.join(CHECKS)}")
    chosen = select_passes(passes if passes is not None else default_pipeline(), disable, stop_after)
    mod = mod if isinstance(mod, tvm.IRModule) else as_module(mod)  # a PrimFunc; else says what to pass
    check_input(mod, checks)  # the user's program is the user's: no pass is blamed for it
    if dump_dir:
        dump.prepare_dump_dir(dump_dir)
        dump.write_stage(dump_dir, 0, "input", mod.script(), True)
    numerics = _numerics_plan(mod) if "numerics" in checks else None
    reference = numerics.reference if numerics is not None and not numerics.reduced else None
    now = [c for c in checks if c != "numerics" or reference is not None]
    baseline = RoundTripBaseline.of(mod) if "round_trip" in checks else RoundTripBaseline("exact")
    if baseline.note:
        warnings.warn(baseline.note, stacklevel=2)
    recorder = StageRecorder(mod.script(), dump_dir)
    records: list[StageRecord] = []
    input_mod = mod
    for pass_ in progress(chosen, "passes", enabled=reference is not None and numerics.large):
        before = mod
        fingerprint = verify.structural_fingerprint(before) if "purity" in checks else 0
        # NOTE: only the pass runs under the recorder: the checks build with tvm.compile,
        # whose own ~50 passes must not become stages
        with tvm.transform.PassContext(opt_level=3, instruments=[recorder]):
            mod = _apply(pass_, before, dump_dir, input_mod, len(records) + 1)
        observed = recorder.stages[-1]
        record = StageRecord(observed.index, observed.name, observed.changed, observed.seconds,
                             dump_path=observed.dump_path, diff=observed.diff, decisions=observed.decisions)
        records.append(record)
        _verify_stage(record, pass_, before, mod, fingerprint, now, reference, baseline, dump_dir, input_mod)
    if numerics is not None and numerics.reduced:
        _verify_reduced_numerics(numerics, chosen, records, dump_dir, mod)
    result = PipelineResult(mod, records, input_mod, numerics, [baseline.note] if baseline.note else [])
    if dump_dir and checks:
        dump.write_text(dump_dir, "verification.txt", result.table(timings=False))
    return result


def _verify_reduced_numerics(
    numerics: NumericsPlan, chosen, records: list[StageRecord], dump_dir, full_module: tvm.IRModule
) -> None:
    """The same passes on the shape-reduced copy (replaying the full-size roundings), each stage against
    its reference; first a copy deciding as the full-size program (checks/decision_plan.py) does."""
    numerics.input_module = replaying(numerics.input_module, full_module["main"])
    stages = _copy_deciding_as(numerics, chosen, dump_dir, decision_plan(full_module["main"]))
    before = numerics.input_module
    for after, record in zip(stages, records):
        started = time.perf_counter()
        problems = verify.check_numerics(numerics.reference, after)
        record.verify_seconds += time.perf_counter() - started
        record.checks["numerics"] = "FAILED" if problems else "ok"
        if problems:
            artifacts = write_failure_artifacts(
                dump_dir, record.index, record.name, "numerics", numerics.input_module, before, after
            )
            raise VerificationError(
                record.name, "numerics", f"(at {numerics.describe()})\n" + "\n".join(problems[:10]), artifacts
            )
        before = after
    numerics.final_module = before


def _copy_stages(module: tvm.IRModule, chosen, dump_dir) -> list[tvm.IRModule]:
    stages = []
    for index, pass_ in enumerate(chosen, start=1):
        with tvm.transform.PassContext(opt_level=3):
            module = _apply(pass_, module, dump_dir, stages[0] if stages else module, index)
        stages.append(module)
    return stages


def _copy_deciding_as(numerics: NumericsPlan, chosen, dump_dir, full_plan) -> list[tvm.IRModule]:
    """The stages of the smallest copy found whose plan is the full-size program's (the numerics
    plan switches to it); the smallest copy's, with the differences in its description, if none."""
    first = _copy_stages(numerics.input_module, chosen, dump_dir)
    differences = full_plan.differences(decision_plan(first[-1]["main"]))
    if not differences:
        numerics.plan_note = "it decides as the full-size program does"
        return first
    full_func = numerics.full_module["main"]

    def stages_if_same(mapping):
        copy = copy_with(full_func, mapping)
        func = copy.func if copy.func is not None else (full_func if not copy.sizes else None)
        if func is None:
            return None
        try:
            stages = _copy_stages(tvm.IRModule({"main": func}), chosen, dump_dir)
        except TirTritonError:  # a pass refuses this size: a candidate less, not the user's problem
            return None
        return (copy, stages) if not full_plan.differences(decision_plan(stages[-1]["main"])) else None

    for mapping in larger_mappings(full_func):
        found = stages_if_same(mapping)
        if found is None:
            continue
        copy, stages = found
        numerics.switch_to(
            copy, f"it decides as the full-size program does; the smallest copy did not ({differences[0]})"
        )
        return stages
    numerics.plan_note = (
        "it DECIDES DIFFERENTLY from the full-size program ("
        + "; ".join(differences[:3])
        + "), and no copy up to the size limit decides as it does: the check does not cover the "
        "full-size decisions"
    )
    warnings.warn(f"numerics at {numerics.describe()}", stacklevel=3)
    return first


def _numerics_plan(mod: tvm.IRModule) -> NumericsPlan:
    """TVM's llvm build of the input (or its reduced copy) on the data sets; a failure to build is
    the input's, not a pass's."""
    try:
        return NumericsPlan.of(mod)
    except TirTritonError:
        raise
    except Exception as err:  # noqa: BLE001 - TVM's own build refused the user's program
        raise UnsupportedConstructError(
            f"TVM's llvm build of the input fails, so the numerics check has no reference to compare the stages "
            f"with: {type(err).__name__}: {first_line(err)}"
        ) from None


def _apply(pass_: tvm.transform.Pass, mod: tvm.IRModule, dump_dir, input_mod, index: int) -> tvm.IRModule:
    take_raised_error()
    try:
        return pass_(mod)
    except Exception as err:  # noqa: BLE001 - rewrap whatever the pass raised, with its name
        original = take_raised_error() or err
        if isinstance(original, TirTritonError):
            raise original from None
        name = pass_.info.name
        artifacts = write_failure_artifacts(dump_dir, index, name, "pass", input_mod, mod)
        raise PassError(name, f"{type(original).__name__}: {first_line(original)}", artifacts) from None


def _run_check(check: str, pass_, before, after, fingerprint, reference, baseline) -> list[str]:
    if check == "well_formed":
        return verify.check_well_formed(after)
    if check == "round_trip":
        if baseline.mode == "relative":
            return verify.check_round_trip_relative(pass_, before, after)
        return verify.check_round_trip(after)
    if check == "purity":
        return verify.check_purity(before, fingerprint)
    if check == "bounds":
        return bounds.check_bounds(after)
    if check == "contract":
        return check_contract(after)
    return verify.check_numerics(reference, after)


def _verify_stage(record, pass_, before, after, fingerprint, checks, reference, baseline, dump_dir, input_mod) -> None:
    for check in CHECKS:
        if check not in checks:
            continue
        if check == "round_trip" and baseline.mode == "skipped":
            record.checks[check] = "skipped"
            continue
        started = time.perf_counter()
        problems = _run_check(check, pass_, before, after, fingerprint, reference, baseline)
        record.verify_seconds += time.perf_counter() - started
        if problems:
            record.checks[check] = "FAILED"
            artifacts = write_failure_artifacts(dump_dir, record.index, record.name, check, input_mod, before, after)
            raise VerificationError(record.name, check, "\n".join(problems[:10]), artifacts)
        record.checks[check] = "relative" if check == "round_trip" and baseline.mode == "relative" else "ok"


def write_failure_artifacts(dump_dir, index: int, pass_name: str, check: str, input_mod, before, after=None) -> str:
    """input.py, before.py, after.py (not when the pass raised) and reproduce.py, in a new folder."""
    folder = (
        os.path.join(dump_dir, f"failure_{index:02d}_{pass_name}")
        if dump_dir
        else tempfile.mkdtemp(prefix=f"tir-triton-failure-{pass_name}-")
    )
    os.makedirs(folder, exist_ok=True)
    for name, mod in (("input", input_mod), ("before", before), ("after", after)):
        if mod is not None:
            with open(os.path.join(folder, f"{name}.py"), "w") as handle:
                handle.write(mod.script())
    with open(os.path.join(folder, "reproduce.py"), "w") as handle:
        handle.write(_reproducer(pass_name, check))
    return folder


def _reproducer(pass_name: str, check: str) -> str:
    import_path = KNOWN_PASSES.get(pass_name)
    if import_path:
        module, factory = import_path.split(":")
        make_pass = f"from {module} import {factory}\nPASS = {factory}()"
    else:
        make_pass = f"PASS = None  # put the pass '{pass_name}' here (it is not one of tir_passes')"
    # a pass that raised left no after.py: applying it is the reproduction
    after = "PASS(before)" if check == "pass" else 'PASS(before) if PASS is not None else load("after")'
    failure = "raises" if check == "pass" else f"fails the '{check}' check"
    return f'''"""Reproduce: pass {pass_name} {failure}. Run: python reproduce.py"""
import os

import tvm

from tir_passes.checks import bounds, verify
from tir_passes.checks.numerics import ReferenceRun
from tir_passes.checks.verify_contract import check_contract

{make_pass}
HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name + ".py")) as handle:
        return tvm.script.from_source(handle.read())


before, reference_input = load("before"), load("input")
after = {after}
checks = {{
    "pass": lambda: [],  # the pass raised: applying it above reproduces that
    "well_formed": lambda: verify.check_well_formed(after),
    # an input TVM's printer does not round trip is compared relative to it (verify.py)
    "round_trip": lambda: (verify.check_round_trip_relative(PASS, before, after)
                           if verify.check_round_trip(reference_input) else verify.check_round_trip(after)),
    "purity": lambda: verify.check_purity(before, verify.structural_fingerprint(load("before"))),
    "bounds": lambda: bounds.check_bounds(after),
    "contract": lambda: check_contract(after),
    "numerics": lambda: verify.check_numerics(ReferenceRun.of(reference_input["main"]), after),
}}
problems = checks["{check}"]()
print("\\n".join(problems) if problems else "check passes")
'''
