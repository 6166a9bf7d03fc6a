"""LoopFusion's share step (passes/loop_fusion_sharing.py) on a program that is not attention: one
contraction S = A·Bᵀ per batch, read by two nests that each reduce over S's rows (X = Σ_i S·C and
Y = Σ_i exp(S/10)·F, FlashAttention-2's dK and dV in shape). S's rows are over the register budget, so
LoopFusion recomputes S for the second reader and streams each copy into its reader's walk; the share step
then merges the two walks: one kernel computing each tile of S once for both accumulators. Every test
compiles with every per-pass check and runs the kernel in the interpreter against TVM's build."""

import pytest
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes.contracts.backend_limits import BackendLimits
from tir_passes.contracts.fusion_record import SHARE, STREAM, fusion_steps
from tir_passes.pipeline import default_pipeline

# a row of S (37 x 29 per batch, x tl.dot's 16 rows) is over it; one 8-wide accumulator row (x 16) is not,
# two 8-wide ones together are not, two 16-wide ones together are
BUDGET = BackendLimits(register_row_elements=300)


def make_two_readers(E: int, readers_swapped: bool = False):
    Bt, M, N, D = 2, 37, 29, 16

    @T.prim_func(s_tir=True)
    def two_readers(A: T.Buffer((Bt, M, D), "float32"), B: T.Buffer((Bt, N, D), "float32"),
                    C: T.Buffer((Bt, M, E), "float32"), F: T.Buffer((Bt, M, E), "float32"),
                    X: T.Buffer((Bt, N, E), "float32"), Y: T.Buffer((Bt, N, E), "float32")):
        S = T.sblock_alloc_buffer((Bt, M, N), "float32")
        for b, i, j, d in T.grid(Bt, M, N, D):
            with T.sblock("S"):
                vb, vi, vj, vd = T.axis.remap("SSSR", [b, i, j, d])
                with T.init():
                    S[vb, vi, vj] = T.float32(0)
                S[vb, vi, vj] = S[vb, vi, vj] + A[vb, vi, vd] * B[vb, vj, vd]
        for b, j, e, i in T.grid(Bt, N, E, M):
            with T.sblock("X"):
                vb, vj, ve, vi = T.axis.remap("SSSR", [b, j, e, i])
                with T.init():
                    X[vb, vj, ve] = T.float32(0)
                X[vb, vj, ve] = X[vb, vj, ve] + S[vb, vi, vj] * C[vb, vi, ve]
        for b, j, e, i in T.grid(Bt, N, E, M):
            with T.sblock("Y"):
                vb, vj, ve, vi = T.axis.remap("SSSR", [b, j, e, i])
                with T.init():
                    Y[vb, vj, ve] = T.float32(0)
                Y[vb, vj, ve] = Y[vb, vj, ve] + T.exp(S[vb, vi, vj] * T.float32(0.1)) * F[vb, vi, ve]

    @T.prim_func(s_tir=True)
    def two_readers_swapped(A: T.Buffer((Bt, M, D), "float32"), B: T.Buffer((Bt, N, D), "float32"),
                            C: T.Buffer((Bt, M, E), "float32"), F: T.Buffer((Bt, M, E), "float32"),
                            X: T.Buffer((Bt, N, E), "float32"), Y: T.Buffer((Bt, N, E), "float32")):
        scores = T.sblock_alloc_buffer((Bt, M, N), "float32")
        for b, i, j, d in T.grid(Bt, M, N, D):
            with T.sblock("scores"):
                vb, vi, vj, vd = T.axis.remap("SSSR", [b, i, j, d])
                with T.init():
                    scores[vb, vi, vj] = T.float32(0)
                scores[vb, vi, vj] = scores[vb, vi, vj] + B[vb, vj, vd] * A[vb, vi, vd]
        for n, col, row in T.grid(Bt, N, E):
            for k in range(M):
                with T.sblock("second"):
                    vb, vj, ve, vi = T.axis.remap("SSSR", [n, col, row, k])
                    with T.init():
                        Y[vb, vj, ve] = T.float32(0)
                    Y[vb, vj, ve] += F[vb, vi, ve] * T.exp(scores[vb, vi, vj] * T.float32(0.1))
        for n, col, row in T.grid(Bt, N, E):
            for k in range(M):
                with T.sblock("first"):
                    vb, vj, ve, vi = T.axis.remap("SSSR", [n, col, row, k])
                    with T.init():
                        X[vb, vj, ve] = T.float32(0)
                    X[vb, vj, ve] += C[vb, vi, ve] * scores[vb, vi, vj]

    return two_readers_swapped if readers_swapped else two_readers


def _compile(func, limits=BUDGET):
    return compile_and_check(func, passes=default_pipeline("H200", limits=limits), aot=False)


def _steps(kernel, action):
    return [step for step in fusion_steps(kernel.tir["main"]) if step.action == action]


@pytest.mark.parametrize("readers_swapped", [False, True], ids=["as_written", "renamed_reordered"])
def test_two_walks_of_one_recomputed_contraction_become_one_kernel(readers_swapped):
    """The same decision however the program is written: readers in the other order, other names, the
    contraction's factors and each summand's factors swapped, `+=`."""
    kernel = _compile(make_two_readers(8, readers_swapped))
    assert len(kernel.program.kernels) == 1
    assert len([s for s in _steps(kernel, STREAM) if s.taken]) == 2
    (shared,) = [s for s in _steps(kernel, SHARE) if s.taken]
    assert shared.depth == 4 and shared.buffers == shared.blocks   # the dropped copy's buffer is gone
    # each step of the walk computes its tile of the contraction once, for both accumulators
    (walk,) = kernel.program.kernels
    assert len(walk.source_blocks) == 3   # the contraction and its two readers: no second copy


def test_accumulators_over_the_register_budget_keep_two_walks():
    kernel = _compile(make_two_readers(16))
    assert len(kernel.program.kernels) == 2
    refusals = [s.reason for s in _steps(kernel, SHARE) if not s.taken]
    assert any("over the register budget" in reason for reason in refusals), refusals


def test_a_copy_read_outside_its_nest_is_not_dropped():
    """With the walks not streamed (each accumulator row alone is over this budget), the copies are nests
    of their own whose buffers their readers read later: merging the copies would leave a reader reading a
    buffer nobody writes (found by the well-formed check after LoopFusion before the refusal existed)."""
    kernel = _compile(make_two_readers(16), limits=BackendLimits(register_row_elements=200))
    assert not [s for s in _steps(kernel, SHARE) if s.taken]
    assert any("read outside the nest that computes it" in s.reason for s in _steps(kernel, SHARE))


def make_second_reads_first():
    """Y's walk reads X, which X's walk writes: merging the walks would read X before it is complete."""
    Bt, M, N, D, E = 2, 37, 29, 16, 8

    @T.prim_func(s_tir=True)
    def second_reads_first(A: T.Buffer((Bt, M, D), "float32"), B: T.Buffer((Bt, N, D), "float32"),
                           C: T.Buffer((Bt, M, E), "float32"), X: T.Buffer((Bt, N, E), "float32"),
                           Y: T.Buffer((Bt, N, E), "float32")):
        S = T.sblock_alloc_buffer((Bt, M, N), "float32")
        G = T.sblock_alloc_buffer((Bt, M, E), "float32")
        for b, i, j, d in T.grid(Bt, M, N, D):
            with T.sblock("S"):
                vb, vi, vj, vd = T.axis.remap("SSSR", [b, i, j, d])
                with T.init():
                    S[vb, vi, vj] = T.float32(0)
                S[vb, vi, vj] = S[vb, vi, vj] + A[vb, vi, vd] * B[vb, vj, vd]
        for b, j, e, i in T.grid(Bt, N, E, M):
            with T.sblock("X"):
                vb, vj, ve, vi = T.axis.remap("SSSR", [b, j, e, i])
                with T.init():
                    X[vb, vj, ve] = T.float32(0)
                X[vb, vj, ve] = X[vb, vj, ve] + S[vb, vi, vj] * C[vb, vi, ve]
        for b, i, e in T.grid(Bt, M, E):
            with T.sblock("G"):
                vb, vi, ve = T.axis.remap("SSS", [b, i, e])
                G[vb, vi, ve] = C[vb, vi, ve] + X[vb, 0, ve]
        for b, j, e, i in T.grid(Bt, N, E, M):
            with T.sblock("Y"):
                vb, vj, ve, vi = T.axis.remap("SSSR", [b, j, e, i])
                with T.init():
                    Y[vb, vj, ve] = T.float32(0)
                Y[vb, vj, ve] = Y[vb, vj, ve] + T.exp(S[vb, vi, vj] * T.float32(0.1)) * G[vb, vi, ve]

    return second_reads_first


def test_walks_that_depend_on_each_other_are_not_shared():
    kernel = _compile(make_second_reads_first())
    assert not [s for s in _steps(kernel, SHARE) if s.taken]
    reasons = [s.reason for s in _steps(kernel, SHARE)]
    assert any("touch" in reason for reason in reasons), reasons
