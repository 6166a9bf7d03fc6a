"""The fuzzer from the command line (run from the repository root):

    python -m tests.fuzz --seed 1000 --count 200 --out fuzz-out     # a campaign; failures under fuzz-out/
    python -m tests.fuzz --show 1234                                 # print the program of seed 1234
    python -m tests.fuzz --seed 1234 --count 1 --family scan         # one program of one family
    python -m tests.fuzz --shrink 1234 --out fuzz-out                # shrink a failing program
    python -m tests.fuzz --deterministic --seed 0 --count 50         # compile(deterministic=True)'s promise

Kernels run in Triton's interpreter (TRITON_INTERPRET=1 is set here). Prints one line per failure
as it happens and a summary at the end; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

from .campaign import run_campaign, summary
from .generator import FAMILY_BUILDERS, generate
from .reduce import fails_like, shrink, signature
from .runner import run_program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="first seed (the programs are seed, seed+1, ...)")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--family", choices=sorted([*FAMILY_BUILDERS, "gluon"]), help="only programs of this family")
    parser.add_argument("--out", help="folder for failure reproducers (default: a temporary folder)")
    parser.add_argument("--verify-every", type=int, default=1,
                        help="compile every Nth program with verification on, the rest with verify=False")
    parser.add_argument("--no-aot", action="store_true", help="skip the ahead-of-time compile for sm_90")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per program")
    parser.add_argument("--hostile-names", action="store_true",
                        help="name loops and buffers as the code generator's temporaries and Python's names (t, tl, "
                             "pid, mask_i, triton, run, ...): the same programs, renamed")
    parser.add_argument("--show", type=int, metavar="SEED", help="print the program of SEED and exit")
    parser.add_argument("--deterministic", action="store_true",
                        help="check compile(deterministic=True): pins in the contract, the same bits in every config")
    parser.add_argument("--shrink", type=int, metavar="SEED",
                        help="run SEED's program and, when it fails, shrink it while it fails the same way")
    args = parser.parse_args(argv)
    if args.show is not None:
        print(generate(args.show, args.family, hostile_names=args.hostile_names).source, end="")
        return 0
    if args.deterministic:
        return deterministic_campaign(args.seed, args.count, args.family)
    out_dir = args.out or tempfile.mkdtemp(prefix="tir-triton-fuzz-")
    work_dir = os.path.join(out_dir, "programs")
    if args.shrink is not None:
        return shrink_seed(args.shrink, args.family, out_dir, work_dir, verify=args.verify_every == 1)
    print(f"fuzz: seeds {args.seed}..{args.seed + args.count - 1}, failures under {out_dir}", flush=True)

    def report(outcome):
        if outcome.failed:
            print(f"FAIL seed {outcome.seed} ({outcome.family}): {outcome.kind} -> {outcome.reproducer}", flush=True)

    outcomes = run_campaign(range(args.seed, args.seed + args.count), work_dir, out_dir=out_dir,
                            verify_every=args.verify_every, jobs=args.jobs, aot_arch=None if args.no_aot else 90,
                            family=args.family, timeout_s=args.timeout, on_outcome=report,
                            hostile_names=args.hostile_names)
    print(summary(outcomes))
    return 1 if any(o.failed for o in outcomes) else 0


def deterministic_campaign(seed: int, count: int, family: str | None) -> int:
    from .determinism import run_deterministic

    checked, refused, failures = run_deterministic(range(seed, seed + count), family)
    for failed_seed, problem in failures:
        print(f"FAIL seed {failed_seed}: {problem}", flush=True)
    print(f"deterministic: {checked} programs checked, {refused} refused, {len(failures)} problem(s)")
    return 1 if failures else 0


def shrink_seed(seed: int, family: str | None, out_dir: str, work_dir: str, *, verify: bool) -> int:
    program = generate(seed, family)
    outcome = run_program(program, work_dir, verify=verify)
    if not outcome.failed:
        print(f"seed {seed} ({program.family}): {outcome.kind}, nothing to shrink")
        return 0
    print(f"seed {seed} ({program.family}): {signature(outcome)}", flush=True)
    smaller = shrink(program, fails_like(outcome, work_dir), log=lambda line: print(line, flush=True))
    final = run_program(smaller, work_dir, verify=verify, out_dir=os.path.join(out_dir, "shrunk"))
    print(smaller.source)
    print(f"{final.kind}: {final.detail.strip()[:2000]}\nreproducer: {final.reproducer}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
