"""Campaigns: many programs, in one process or several, and their summary."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .generator import generate
from .known import known_failures
from .runner import AOT_ARCH, OUTCOMES, Outcome, run_program


@dataclass(frozen=True)
class Settings:
    """How run_campaign runs each program (picklable: worker processes get it with every seed)."""

    work_dir: str
    out_dir: str | None = None
    aot_arch: int | None = AOT_ARCH
    family: str | None = None
    timeout_s: float | None = 120
    known: dict[str, str] = field(default_factory=dict)
    hostile_names: bool = False   # loops and buffers named as the generator's own temporaries (generator.py)


def run_campaign(seeds, work_dir: str, *, out_dir: str | None = None, verify_every: int = 1, jobs: int = 1,
                 aot_arch: int | None = AOT_ARCH, family: str | None = None, timeout_s: float | None = 120,
                 on_outcome=None, hostile_names: bool = False) -> list[Outcome]:
    """Run the programs of `seeds`, in `jobs` processes; every `verify_every`-th one (by position)
    with verification on, the others with verify=False (the kernel check against TVM still runs
    on all of them). Outcomes come back in seed order."""
    settings = Settings(work_dir, out_dir, aot_arch, family, timeout_s, known_failures(), hostile_names)
    tasks = [(seed, position % verify_every == 0, settings) for position, seed in enumerate(seeds)]
    outcomes = []
    with _executor(jobs) as pool:
        for outcome in pool.map(_run_task, tasks):
            outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
    return outcomes


class _InProcess:
    """The executor of jobs=1: this process, in order."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(function, tasks):
        return map(function, tasks)


def _executor(jobs: int):
    if jobs <= 1:
        return _InProcess()
    # spawn, not fork: TVM and Triton hold threads and state a fork would copy half of
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))


def _run_task(task) -> Outcome:
    seed, verify, settings = task
    program = generate(seed, settings.family, hostile_names=settings.hostile_names)
    return run_program(program, settings.work_dir, verify=verify, aot_arch=settings.aot_arch,
                       out_dir=settings.out_dir, timeout_s=settings.timeout_s, known=settings.known)


def summary(outcomes: list[Outcome]) -> str:
    """Counts per outcome and per family, time per program, and every failure with its reproducer."""
    kinds = Counter(o.kind for o in outcomes)
    lines = [f"{len(outcomes)} programs: " + ", ".join(f"{k} {kinds[k]}" for k in OUTCOMES if kinds[k])]
    families = sorted({o.family for o in outcomes})
    for family in families:
        mine = [o for o in outcomes if o.family == family]
        counts = Counter(o.kind for o in mine)
        lines.append(f"  {family:<17}{len(mine):>5}  " + ", ".join(f"{k} {counts[k]}" for k in OUTCOMES if counts[k]))
    seconds = [o.seconds for o in outcomes]
    if seconds:
        slowest = max(outcomes, key=lambda o: o.seconds)
        lines.append(f"time: {sum(seconds):.0f}s in all, {sum(seconds) / len(seconds):.2f}s per program, "
                     f"slowest seed {slowest.seed} ({slowest.family}) {slowest.seconds:.1f}s")
    refused = Counter(o.detail.split(":")[0] for o in outcomes if o.kind == "refused")
    if refused:
        lines.append("refused (documented as unsupported): " + ", ".join(f"{c} {n}" for c, n in sorted(refused.items())))
    known = Counter(o.known for o in outcomes if o.known)
    if known:
        lines.append("known failures (tests/fuzz/found/, xfail until fixed): "
                     + ", ".join(f"{name} {count}" for name, count in sorted(known.items())))
    for outcome in outcomes:
        if outcome.failed:
            first = outcome.detail.strip().splitlines()[0][:300] if outcome.detail.strip() else ""
            lines.append(f"FAIL seed {outcome.seed} ({outcome.family}, verify={outcome.verified}): {outcome.kind}: {first}"
                         + (f"\n     reproducer: {outcome.reproducer}" if outcome.reproducer else ""))
    return "\n".join(lines)
