"""The differential fuzzer, every CI run: random programs compiled, run in the interpreter against
TVM's llvm build and compiled ahead of time for sm_90, with 0 miscompiles and 0 internal errors.

The seeds are fixed (CI_SEED.. CI_SEED + 299), so a CI run is reproducible and cannot fail on a
program no commit touched; new programs come from TIR_TRITON_FUZZ_SEED and TIR_TRITON_FUZZ_COUNT
(the base seed and the count; a failure prints the seed and a reproducer folder) and from the GPU
campaign (benchmarks/fuzz_gpu_generate.py). The fixed range is one the fuzzer once drew from a
commit hash; the bugs it found there are in found/. A range is only fixed after a full run of it
finished: TVM's own llvm build never returns on some programs (seed 1214247552: an fp16 max under
a `T.where` on a split reduction loop hangs `tvm.compile`), and nothing can interrupt it in-process.

Budget (docs/fuzzing.md has the measurements): the pipeline's per-pass verification costs about
three times the rest of a program (parse, compile, kernel check, sm_90 compile), so every
VERIFY_EVERY-th program compiles with verify=True and the others with verify=False. The kernel
check against TVM, which is what catches miscompiles, runs on all of them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .campaign import run_campaign, summary

DEFAULT_COUNT = 300
VERIFY_EVERY = 10
CI_SEED = 4058230196   # first 8 hex digits of commit f1e3adb, whose 300 programs were run in full
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def base_seed() -> int:
    if os.environ.get("TIR_TRITON_FUZZ_SEED"):
        return int(os.environ["TIR_TRITON_FUZZ_SEED"], 0)
    return CI_SEED


def program_count() -> int:
    return int(os.environ.get("TIR_TRITON_FUZZ_COUNT", DEFAULT_COUNT))


def job_count() -> int:
    """Worker processes: the suite itself runs in one process, so the fuzz test takes both cores."""
    return int(os.environ.get("TIR_TRITON_FUZZ_JOBS", min(2, os.cpu_count() or 1)))


def test_a_seed_gives_the_same_program_in_every_process():
    digest = "import hashlib; from tests.fuzz.generator import generate; " \
             "print(hashlib.sha256(''.join(generate(s).source for s in range(60)).encode()).hexdigest())"
    runs = [subprocess.run([sys.executable, "-c", digest], capture_output=True, text=True, check=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": ROOT, "PYTHONHASHSEED": hash_seed}).stdout
            for hash_seed in ("1", "2")]
    assert runs[0] == runs[1] and len(runs[0].strip()) == 64


@pytest.mark.interpreter
@pytest.mark.aot
def test_random_programs_match_tvm(tmp_path, capsys):
    first, count = base_seed(), program_count()
    with capsys.disabled():
        print(f"\nfuzz: {count} programs, seeds {first}..{first + count - 1} (replay: TIR_TRITON_FUZZ_SEED={first} "
              f"TIR_TRITON_FUZZ_COUNT={count}; one program: python -m tests.fuzz --seed SEED --count 1)")
    outcomes = run_campaign(range(first, first + count), str(tmp_path / "programs"), out_dir=str(tmp_path),
                            verify_every=VERIFY_EVERY, jobs=job_count())
    report = summary(outcomes)
    with capsys.disabled():
        print(report)
    failures = [o for o in outcomes if o.failed]
    assert not failures, report
