"""Named errors of tir-triton: each says what went wrong and where, in one paragraph.

Every stage raises one of these instead of letting a TVM or Triton exception escape, so a
user sees our message (with the TVMScript file:line, the parameter or the pass) on top.
"""

from __future__ import annotations


class TirTritonError(Exception):
    """Base class: the message is complete and meant for a user."""


class FrontendError(TirTritonError):
    """The input file could not be read as TVMScript PrimFuncs (syntax, names, selection)."""


class UnsupportedConstructError(TirTritonError):
    """A valid TIR construct that tir-triton cannot compile to Triton (names the construct)."""


class UndefinedBehaviourError(UnsupportedConstructError):
    """The input itself crashed, trapped or hung on the numerics check's data (TVM's build of it,
    in a child process): the program has undefined behaviour on that data, no pass is blamed."""


class NotDifferentiableError(UnsupportedConstructError):
    """`tir_passes.differentiate` refuses the program: names the block (or parameter) and why no
    correct gradient can be written for it (integers, an intrinsic without an adjoint, overlapping
    writes, an access the adjoint cannot invert)."""


class PassError(TirTritonError):
    """A pass raised while rewriting: names the pass, wraps the cause, and points to the input and
    the module the pass was given, with a reproducer."""

    def __init__(self, pass_name: str, message: str, artifacts: str | None = None):
        where = f" (its input module and a reproducer in {artifacts})" if artifacts else ""
        super().__init__(f"pass {pass_name} failed{where}: {message}")
        self.pass_name = pass_name
        self.artifacts = artifacts


class VerificationError(TirTritonError):
    """A verification check failed after a pass: names the pass, the check and the details."""

    def __init__(self, pass_name: str, check: str, details: str, artifacts: str | None = None):
        where = f" (before/after dumps and a reproducer in {artifacts})" if artifacts else ""
        super().__init__(f"verification '{check}' failed after pass {pass_name}{where}:\n{details}")
        self.pass_name = pass_name
        self.check = check
        self.details = details
        self.artifacts = artifacts


class LaunchError(TirTritonError):
    """Arguments given to a compiled kernel do not match its PrimFunc (names the parameter)."""


def first_line(err: BaseException, limit: int = 400) -> str:
    """The meaningful part of a (possibly multi-line, C++-backtraced) TVM error message."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    # TVM puts the message after its backtrace; the last non-note line is the message
    useful = [ln for ln in lines if not ln.startswith(("File ", "note:", "Stack trace", "0:", "1:"))]
    text = useful[-1] if useful else (lines[-1] if lines else type(err).__name__)
    return text[:limit]
