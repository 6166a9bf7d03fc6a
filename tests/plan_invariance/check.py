"""Plan invariance: a program and every meaning-preserving rewrite of it (rewrites.py) must compile
to the same kernel plan (lowering/kernel_plan.py: kernels, tile axes, dots with operand dtypes,
tile windows, loops), and each rewrite must match TVM's build of itself.

The programs: every example (examples/, module-level PrimFuncs that the Triton path compiles),
the attention forms users write (examples/attention_forms.py, each against the plan of the
examples' form), and fuzzer programs (tests/fuzz/generator.py) that compile.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from dataclasses import dataclass, field

from lowering.kernel_plan import ProgramPlan, plan_of

from .rewrites import REWRITES, rewrites, script_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES_DIR = os.path.join(ROOT, "examples")
# examples that are not Triton-path PrimFuncs: a Gluon schedule, a torch op built at import
SKIPPED_EXAMPLES = ("_check", "shared_memory", "torch_op")


@dataclass
class Finding:
    program: str
    family: str
    problem: str

    def __str__(self) -> str:
        return f"{self.program} [{self.family}]: {self.problem}"


@dataclass
class Outcome:
    checked: list[tuple[str, str]] = field(default_factory=list)   # (program, family) pairs compared
    findings: list[Finding] = field(default_factory=list)


def example_programs() -> dict[str, object]:
    """name -> PrimFunc for every module-level S-TIR PrimFunc of examples/ (sorted by name)."""
    from tvm import tirx

    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    found = {}
    for file in sorted(os.listdir(EXAMPLES_DIR)):
        module_name, ext = os.path.splitext(file)
        if ext != ".py" or module_name in SKIPPED_EXAMPLES:
            continue
        module = importlib.import_module(module_name)
        for name, value in sorted(vars(module).items()):
            if isinstance(value, tirx.PrimFunc) and value.attrs is not None and bool(value.attrs.get("s_tir", False)):
                found[name] = value
    return found


def parameter_elements(func) -> int:
    """The elements of every buffer parameter (static sizes): what a check costs, roughly."""
    total = 0
    for param in func.params:
        count = 1
        for dim in getattr(param, "shape", ()) or ():
            count *= int(dim.value) if hasattr(dim, "value") else 64
        total += count
    return total


def attention_forms(shape=(1, 2, 37, 16)) -> list[tuple[str, object, object]]:
    """(name, the form users write, the examples' form it must plan like)."""
    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    from attention import make_attention
    from attention_causal import make_causal_attention
    from attention_forms import make_attention_inline_mask, make_attention_normalize_first

    causal = make_causal_attention(*shape)
    return [
        ("causal, mask inline, -inf", make_attention_inline_mask(*shape), causal),
        ("causal, mask inline, -1e30", make_attention_inline_mask(*shape, masked=-1e30), causal),
        ("causal, attention.py's min_value mask", make_attention(*shape, causal=True), causal),
        ("normalize first, scale inside Q·Kᵀ", make_attention_normalize_first(*shape), make_attention(*shape)),
    ]


def fuzz_programs(seeds) -> dict[str, object]:
    """name -> PrimFunc of the fuzzer's programs of `seeds` that compile (the others are the
    fuzzer's business)."""
    from tests.fuzz.generator import generate
    from tests.fuzz.runner import load_program, write_program
    from triton_codegen import compile

    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for seed in seeds:
            program = generate(seed)
            if program.sizes:
                continue   # symbolic sizes: the numerics need the sizes the runner binds
            try:
                func = load_program(write_program(program, folder))
                compile(func, verify=False)
            except Exception:  # noqa: BLE001 - a program the compiler refuses has no plan to compare
                continue
            found[f"fuzz seed {seed} ({program.family})"] = func
    return found


_PLANS: dict[str, ProgramPlan] = {}   # by TVMScript text: a reference form is compared with several


def plan(func) -> ProgramPlan:
    from triton_codegen import compile

    key = func.script()
    if key not in _PLANS:
        _PLANS[key] = plan_of(compile(func, verify=False))
    return _PLANS[key]


def numerics_problem(func) -> str:
    from triton_codegen import check_against_tvm, compile

    kernel = compile(func, verify=False)
    report = check_against_tvm(kernel, func)
    return "" if report.ok else f"does not match TVM: {report}"


def check_program(name: str, func, families=None, numerics: bool = True, outcome: Outcome | None = None) -> Outcome:
    outcome = outcome if outcome is not None else Outcome()
    base = plan(func)
    for family, rewritten in rewrites(func, families):
        outcome.checked.append((name, family))
        try:
            got = plan(rewritten)
        except Exception as err:  # noqa: BLE001 - a rewrite that stops compiling is a finding
            outcome.findings.append(Finding(name, family, f"does not compile: {type(err).__name__}: {err}"))
            continue
        if got != base:
            outcome.findings.append(Finding(name, family, f"plan\n{got.describe()}\ninstead of\n{base.describe()}"))
        if numerics:
            problem = numerics_problem(rewritten)
            if problem:
                outcome.findings.append(Finding(name, family, problem))
    return outcome


def check_form(name: str, func, reference, numerics: bool = True, outcome: Outcome | None = None) -> Outcome:
    outcome = outcome if outcome is not None else Outcome()
    outcome.checked.append((name, "form"))
    got, expected = plan(func), plan(reference)
    if got != expected:
        outcome.findings.append(Finding(name, "form", f"plan\n{got.describe()}\ninstead of\n{expected.describe()}"))
    if numerics:
        problem = numerics_problem(func)
        if problem:
            outcome.findings.append(Finding(name, "form", problem))
    return outcome


def budget_cases(programs: dict[str, object]) -> tuple[dict[str, str], dict[str, str]]:
    """The CI budget's share of the full check: (family -> the cheapest program it applies to,
    checked with numerics; program -> one family that applies, rotating, plans only)."""
    texts = {name: script_of(func) for name, func in programs.items()}
    cheapest = sorted(programs, key=lambda name: (parameter_elements(programs[name]), name))
    by_family = {}
    for family, rewrite in REWRITES.items():
        chosen = next((name for name in cheapest if rewrite(texts[name]) is not None), None)
        if chosen is not None:
            by_family[family] = chosen
    families = list(REWRITES)
    by_program = {}
    for index, name in enumerate(programs):
        applicable = [families[(index + step) % len(families)] for step in range(len(families))]
        chosen = next((f for f in applicable if REWRITES[f](texts[name]) is not None), None)
        if chosen is not None:
            by_program[name] = chosen
    return by_family, by_program
