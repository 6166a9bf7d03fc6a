"""Run a function where a crash, a trap or a hang is a result, not the end of the process.

TVM's llvm build of the user's program runs on the numerics check's data with nothing between it
and the program's undefined behaviour: an integer division by zero is a SIGFPE, a gather through
an id out of range a SIGSEGV, a loop that never ends a hang. `run_isolated` runs the call in a
forked child of this (already loaded) process: the child inherits the built library and the data
(no new Python, no new TVM, no rebuild), runs the call, and sends its result back through a pipe.
A child that dies of a signal, or outlives the time limit, becomes a `Crash` the caller reports.

Why fork, not a worker process: a worker would need the built library exported to a file and
linked (the system compiler), and the data copied in and out; a fork costs a few milliseconds
(docs/verification.md has the measurement). Where fork is unavailable, the call runs in process.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
from dataclasses import dataclass

# seconds a reference run may take before it counts as a hang (TIR_TRITON_REFERENCE_SECONDS overrides)
DEFAULT_SECONDS = 120.0

_MEANING = {
    "SIGFPE": "an arithmetic trap: an integer division or modulo by zero, or INT_MIN / -1",
    "SIGSEGV": "an access outside the memory of a buffer (an index out of range)",
    "SIGBUS": "an access outside the memory of a buffer (an index out of range)",
    "SIGILL": "a trap instruction (TVM's build traps on some undefined operations)",
    "SIGABRT": "an abort inside TVM's runtime",
}


@dataclass(frozen=True)
class Crash:
    """How an isolated call ended without a result."""

    signal: str      # "SIGFPE", ..., or "timeout"
    seconds: float

    def describe(self) -> str:
        if self.signal == "timeout":
            return f"did not finish within {self.seconds:.0f} s (a hang, or a loop that runs far too long)"
        return f"crashed with {self.signal}, {_MEANING.get(self.signal, 'a fatal signal')}"


class ChildError(RuntimeError):
    """An exception the isolated call raised, carried back as its type's name and message."""


def time_limit() -> float:
    return float(os.environ.get("TIR_TRITON_REFERENCE_SECONDS", DEFAULT_SECONDS))


def run_isolated(call, seconds: float | None = None):
    """`call()`'s result, or a Crash; an exception inside the call is raised here as ChildError."""
    if not hasattr(os, "fork"):
        return call()
    limit = time_limit() if seconds is None else seconds
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send, and leave without running the parent's exit handlers
        os.close(read_end)
        _child(call, write_end)
    os.close(write_end)
    started = time.monotonic()
    try:
        payload, timed_out = _read_all(read_end, started + limit)
    except BaseException:   # interrupted here (a caller's own time limit): no child outlives the call
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_end)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - started
    if timed_out:
        return Crash("timeout", limit)
    if os.WIFSIGNALED(status):
        return Crash(signal.Signals(os.WTERMSIG(status)).name, elapsed)
    kind, value = pickle.loads(payload) if payload else ("error", ("SystemExit", "the child sent no result"))
    if kind == "error":
        raise ChildError(f"{value[0]}: {value[1]}")
    return value


def _child(call, write_end: int) -> None:
    status = 0
    try:
        _default_fatal_handlers()
        try:
            message = pickle.dumps(("ok", call()), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as err:  # noqa: BLE001 - carried back to the parent, which raises it
            message = pickle.dumps(("error", (type(err).__name__, str(err))))
        with os.fdopen(write_end, "wb") as out:
            out.write(message)
    except BaseException:  # noqa: BLE001 - nothing can be reported: the parent sees no result
        status = 1
    finally:
        os._exit(status)


def _default_fatal_handlers() -> None:
    """A fatal signal ends the child at once (no backtrace printer of TVM's or faulthandler's):
    the parent reads the signal from the exit status."""
    import faulthandler

    faulthandler.disable()
    for name in ("SIGFPE", "SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _read_all(fd: int, deadline: float) -> tuple[bytes, bool]:
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
