"""Plan invariance on demand (run from the repository root; kernels run in Triton's interpreter):

    python -m tests.plan_invariance                      # every example, every family, the attention forms
    python -m tests.plan_invariance --fuzz 200           # and the fuzzer's seeds 0..199 that compile
    python -m tests.plan_invariance --family rename --no-numerics   # one family, plans only

Prints one line per finding and a summary; exits 1 when any rewrite changed the plan or the result.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

from .check import Outcome, attention_forms, check_form, check_program, example_programs, fuzz_programs  # noqa: E402
from .rewrites import REWRITES  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.plan_invariance", description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=list(REWRITES), help="only these rewrite families")
    parser.add_argument("--fuzz", type=int, default=0, help="also the fuzzer's programs of seeds 0..N-1")
    parser.add_argument("--fuzz-start", type=int, default=0, help="first fuzzer seed")
    parser.add_argument("--no-numerics", action="store_true", help="compare plans only")
    parser.add_argument("--program", action="append", help="only the programs whose name contains this")
    args = parser.parse_args(argv)
    programs = example_programs()
    programs.update(fuzz_programs(range(args.fuzz_start, args.fuzz_start + args.fuzz)))
    outcome = Outcome()
    for name, func in programs.items():
        if args.program and not any(p in name for p in args.program):
            continue
        before = len(outcome.findings)
        check_program(name, func, args.family, not args.no_numerics, outcome)
        for finding in outcome.findings[before:]:
            print(finding, flush=True)
    if not args.family:
        for name, func, reference in attention_forms():
            before = len(outcome.findings)
            check_form(name, func, reference, not args.no_numerics, outcome)
            for finding in outcome.findings[before:]:
                print(finding, flush=True)
    print(f"{len(outcome.checked)} rewrites of {len({p for p, _ in outcome.checked})} programs checked, "
          f"{len(outcome.findings)} findings")
    return 1 if outcome.findings else 0


if __name__ == "__main__":
    sys.exit(main())
