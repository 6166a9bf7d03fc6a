"""triton_codegen.gluon: thread-bound S-TIR with shared staging -> standalone Gluon modules whose
shared layouts are BankConflictFreeTiling's decisions (`triton_codegen.compile(func, backend="gluon")`)."""

from .backend import BACKEND, GluonKernel

__all__ = ["BACKEND", "GluonKernel"]
