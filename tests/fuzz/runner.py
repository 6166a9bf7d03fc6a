"""Run generated programs through the compiler and classify what happens to each.

For one program: parse its file (as the CLI would), `triton_codegen.compile` it (verification on,
or off for the programs the caller chooses), run the kernel in Triton's interpreter against TVM's
llvm build (`check_against_tvm`, at the program's own symbolic sizes), and compile every kernel
ahead of time for sm_90 with its first config. Outcomes:

  ok            everything passed
  refused       a named UnsupportedConstructError for a construct docs/lowering.md lists as
                unsupported (DOCUMENTED_UNSUPPORTED); fine
  unexpected_refusal  a named error for anything else: a valid program was refused
  verification  a per-pass check failed (a pass broke a valid program, or a check is wrong)
  miscompile    the kernel's outputs differ from TVM's (or it wrote outside a tensor)
  imprecise     they differ, but TVM's float32 build is itself off at that tolerance: it differs
                from a float64 build of the same program (float32 -> float64 throughout, same
                data) by more than a tenth of the tolerance somewhere, so the reference cannot
                decide (a sum that cancels, an exp that overflows); not a failure
  internal      any other exception (a raw traceback, a PassError, a ContractError, ...)
  aot           Triton refused to compile a kernel for sm_90
  timeout       the program took longer than the time limit (CPU time, so load elsewhere does not matter)
  invalid       TVM itself cannot parse or build the program: a generator bug

Every outcome but ok, refused and imprecise is a failure; a failure writes a reproducer folder
(the program file, outcome.txt and a `reproduce.py` that compiles and checks it). A failure of a
bug already reported in tests/fuzz/found/ is marked known (known.py).
"""

from __future__ import annotations

import os
import re
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, replace

from tir_passes.errors import (
    TirTritonError,
    UnsupportedConstructError,
    VerificationError,
)

from .generator import Program
from .known import known_as

# docs/lowering.md, "What has no mapping": the constructs whose refusal is the right answer
DOCUMENTED_UNSUPPORTED = {
    "data-dependent while loop": r"a data-dependent while loop",
    "extern call": r"the call .* has no Triton mapping",
    "unsupported dtype": r"which tir-triton (does not compile to|cannot express in) Triton",
    "nested blocks": r"nested blocks are not supported",
    "thread-bound loop": r"is bound to a GPU thread",
    "reduction other than +, *, max, min": r"supported combiners are \+, \*, T\.max and T\.min",
}

FAILURES = ("unexpected_refusal", "verification", "miscompile", "internal", "aot", "timeout", "invalid")
OUTCOMES = ("ok", "refused", "imprecise") + FAILURES
AOT_ARCH = 90
WALL_FACTOR = 10   # the wall-clock backstop of time_limit, in multiples of its CPU-time limit
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Outcome:
    seed: int
    family: str
    kind: str
    detail: str = ""
    seconds: float = 0.0
    verified: bool = True
    reproducer: str | None = None
    known: str | None = None   # the tests/fuzz/found/ file that reports this failure

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES and self.known is None


class ProgramTimeout(Exception):
    """The program ran past the runner's time limit."""


@contextmanager
def time_limit(seconds: float | None):
    """At most `seconds` of this process's CPU time (SIGPROF), so that the outcome does not depend
    on what else the machine runs; and, against a hang in a child process (the sm_90 compile
    worker), WALL_FACTOR times that in wall time (SIGALRM). The interpreter is Python, so the
    signal lands between tile ops."""
    if not seconds or not hasattr(signal, "SIGPROF"):
        yield
        return

    def expire(signum, frame):
        clock = "CPU" if signum == signal.SIGPROF else "wall-clock"
        limit = seconds if signum == signal.SIGPROF else seconds * WALL_FACTOR
        raise ProgramTimeout(f"took longer than {limit:.0f}s of {clock} time")

    previous = {sig: signal.signal(sig, expire) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def documented_refusal(err: UnsupportedConstructError) -> str | None:
    """The DOCUMENTED_UNSUPPORTED entry `err` is, or None."""
    for construct, pattern in DOCUMENTED_UNSUPPORTED.items():
        if re.search(pattern, str(err)):
            return construct
    return None


def write_program(program: Program, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{program.name}.py")
    with open(path, "w") as handle:
        handle.write(program.source)
    return path


def load_program(path: str):
    from tir_passes.infra.frontend import load_target

    return load_target(path)[0]["main"]


def check_program(func, sizes: dict[str, int], *, verify: bool = True, aot_arch: int | None = AOT_ARCH,
                  backend: str = "triton") -> None:
    """Compile (with `backend`), check against TVM, compile ahead of time; raise on any problem (the outcome)."""
    from triton_codegen import check_against_tvm, compile
    from triton_codegen.aot import AotCompileError, compile_ahead_of_time
    from triton_codegen.configs import config_space

    kernel = compile(func, verify=verify, backend=backend)
    try:
        report = check_against_tvm(kernel, func, sizes=sizes or None)
    except Exception as err:
        line = failing_kernel_line(err, kernel.module_file())
        if line:
            err.add_note(f"kernel line: {line}")
        raise
    if not report.ok:
        raise Miscompile(f"{report}\n\n{kernels_of(kernel.source)}")
    if backend == "gluon":
        # Gluon's compile worker is a new Python with Triton per call (about 7 CPU-s a program, ten
        # times the rest): like the per-pass checks, it runs on the verified programs only
        if aot_arch is not None and verify:
            from triton_codegen.gluon.aot import compile_modules

            compile_modules([(kernel.module_file(), kernel.program)], aot_arch)
    elif aot_arch is not None:
        for tile_kernel in kernel.program.kernels:
            try:
                compile_ahead_of_time(kernel.module_file(), tile_kernel, config_space(tile_kernel)[0], aot_arch)
            except AotCompileError:
                raise
            except Exception:
                restart_aot_worker()
                raise


class Miscompile(Exception):
    """The kernel's outputs differ from TVM's llvm build (the message ends with the kernels)."""


def failing_kernel_line(err: BaseException, module_file: str) -> str | None:
    """The line of the generated module where `err`, or the deepest exception it wraps, was raised."""
    chain = []
    while err is not None and err not in chain:
        chain.append(err)
        err = err.__cause__ or err.__context__
    for raised in reversed(chain):
        frames = [f for f in traceback.extract_tb(raised.__traceback__) if f.filename == module_file]
        if frames:
            return frames[-1].line
    return None


def kernels_of(source: str) -> str:
    """The @triton.jit functions of a generated module (a miscompile's evidence)."""
    start = source.find("@triton.jit\ndef")
    end = source.find("\nCONFIGS", start)
    return source[start:end].strip() if start >= 0 else ""


def restart_aot_worker() -> None:
    """Start a fresh ahead-of-time worker next time. A kernel that fails MLIR's verifier makes
    the worker print the module on stdout, which is also its reply channel: the caller then
    reads IR as JSON (a JSONDecodeError), and every later reply would be out of step
    (test_found.py: test_aot_worker_survives_a_kernel_mlir_rejects)."""
    from triton_codegen.aot import _Worker

    if _Worker.process is not None:
        _Worker.process.kill()
        _Worker.process.wait()
        _Worker.process = None


def classify(err: BaseException, func, sizes: dict[str, int]) -> tuple[str, str]:
    """(outcome, one-paragraph detail) of an exception raised by check_program."""
    from triton_codegen.aot import AotCompileError

    text = "\n".join([f"{type(err).__name__}: {err}", *getattr(err, "__notes__", [])])
    if isinstance(err, Miscompile):
        return "miscompile", str(err)
    if isinstance(err, ProgramTimeout):
        return "timeout", str(err)
    if isinstance(err, AotCompileError):
        return "aot", text
    if isinstance(err, UnsupportedConstructError):
        construct = documented_refusal(err)
        return ("refused", f"{construct}: {err}") if construct else ("unexpected_refusal", text)
    if isinstance(err, VerificationError):
        return "verification", text
    if not isinstance(err, TirTritonError) and not _reference_builds(func, sizes):
        return "invalid", text
    return "internal", text


def _reference_builds(func, sizes: dict[str, int]) -> bool:
    from tir_passes.checks.numerics import ReferenceRun

    try:
        ReferenceRun.of(func, sizes=sizes or None)
    except Exception:  # noqa: BLE001 - any failure of TVM's own build means the program is invalid
        return False
    return True


def ill_conditioned(program: Program, func, work_dir: str) -> str | None:
    """Where TVM's build of `program` is off at its outputs' tolerances (compared with a build
    with float32 made float64, on the same data), or None when it is within a tenth of them."""
    from tir_passes.checks.numerics import TOLERANCES, ReferenceRun, compare_arrays

    reference = ReferenceRun.of(func, sizes=program.sizes or None)
    accurate = float64_outputs(program, reference.datasets, reference.scalars, work_dir)
    for wide, expected in zip(accurate, reference.outputs):
        for name, array in sorted(expected.items()):
            dtype = str(array.dtype)
            problem = dtype in TOLERANCES and compare_arrays(name, wide[name], array, dtype, scale=0.1)
            if problem:
                return f"TVM's float32 build against its float64 build: {problem}"
    return None


def float64_outputs(program: Program, datasets: list[dict], scalars: dict, work_dir: str) -> list[dict]:
    """TVM's llvm build of `program` with every float32 made float64, run on each data set (its
    float32 arrays widened): the accurate outputs a float32 reference is judged against."""
    from tir_passes.checks.numerics import build_llvm, run_built, specialize_shapes

    wide = replace(program, name=program.name + "_float64", source=program.source.replace("float32", "float64"))
    wide_func = specialize_shapes(load_program(write_program(wide, work_dir)), program.sizes or None)
    entry = build_llvm(wide_func)
    scalars = {p.name: scalars[p.name] for p in wide_func.params if p.name in scalars}
    widened = [{name: a.astype("float64") if a.dtype == "float32" else a for name, a in data.items()} for data in datasets]
    return [run_built(entry, wide_func, data, scalars) for data in widened]


def run_program(program: Program, work_dir: str, *, verify: bool = True, aot_arch: int | None = AOT_ARCH,
                out_dir: str | None = None, timeout_s: float | None = 120, known: dict[str, str] | None = None) -> Outcome:
    """Compile and check one program; on a failure write its reproducer under `out_dir`."""
    from tir_passes.errors import FrontendError

    started = time.perf_counter()
    path = write_program(program, work_dir)
    try:
        func = load_program(path)
    except FrontendError as err:
        return _finish(program, "invalid", str(err), started, verify, out_dir, known)
    kind, detail = outcome_of(func, program.sizes, verify=verify, aot_arch=aot_arch, timeout_s=timeout_s,
                              backend=program.backend)
    if kind == "miscompile":
        why = ill_conditioned(program, func, work_dir)
        kind, detail = ("imprecise", f"{why}\n{detail}") if why else (kind, detail)
    return _finish(program, kind, detail, started, verify, out_dir, known)


def outcome_of(func, sizes: dict[str, int], *, verify: bool = True, aot_arch: int | None = AOT_ARCH,
               timeout_s: float | None = None, backend: str = "triton") -> tuple[str, str]:
    """(outcome, detail) of check_program on `func` ("ok", "" when it passes)."""
    try:
        with time_limit(timeout_s):
            check_program(func, sizes, verify=verify, aot_arch=aot_arch, backend=backend)
    except Exception as err:  # noqa: BLE001 - every exception is an outcome to classify
        return classify(err, func, sizes)
    return "ok", ""


def _finish(program: Program, kind: str, detail: str, started: float, verify: bool, out_dir: str | None,
            known: dict[str, str] | None) -> Outcome:
    reproducer = None
    if kind in FAILURES and out_dir:
        reproducer = write_reproducer(program, kind, detail, os.path.join(out_dir, f"seed_{program.seed}_{kind}"), verify)
    found = known_as(kind, detail, known or {}) if kind in FAILURES else None
    return Outcome(program.seed, program.family, kind, detail, time.perf_counter() - started, verify, reproducer, found)


REPRODUCER = '''"""Fuzz seed {seed} ({family}): {kind}. Run from the repository root: PYTHONPATH=. python {path}"""
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")
from tests.fuzz.runner import check_program, load_program  # noqa: E402

func = load_program(os.path.join(os.path.dirname(os.path.abspath(__file__)), "{program}"))
check_program(func, {sizes!r}, verify={verify}, backend={backend!r})  # raises what the fuzzer saw; silent when it is fixed
print("compiled, matches TVM's llvm build, compiles for sm_{arch}")
'''


def write_reproducer(program: Program, kind: str, detail: str, folder: str, verify: bool = True) -> str:
    """A folder with the program, what went wrong, and a reproduce.py; returns the folder."""
    program_path = write_program(program, folder)
    reproduce = os.path.join(folder, "reproduce.py")
    with open(reproduce, "w") as handle:
        handle.write(REPRODUCER.format(seed=program.seed, family=program.family, kind=kind, path=reproduce,
                                       program=os.path.basename(program_path), sizes=program.sizes, arch=AOT_ARCH,
                                       verify=verify, backend=program.backend))
    with open(os.path.join(folder, "outcome.txt"), "w") as handle:
        handle.write(f"seed {program.seed}, family {program.family}: {kind}\n\n{detail}\n")
    return folder
