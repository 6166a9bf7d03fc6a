"""gluon_codegen: thread-bound S-TIR with shared staging -> standalone Gluon modules whose shared
layouts are BankConflictFreeTiling's decisions (`triton_codegen.compile(func, backend="gluon")`)."""

from .compile import GluonKernel, compile_gluon

__all__ = ["GluonKernel", "compile_gluon"]
