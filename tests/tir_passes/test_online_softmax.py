"""OnlineSoftmax: a max and the sums of exponentials that read it become one loop with a running
maximum, where that pays; the contract check keeps later passes from tearing that loop apart."""

import tvm
from tvm import s_tir
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from softmax import make_softmax
from tir_passes.contracts.online_contract import DECISIONS_KEY
from tir_passes.passes.hoist_allocations import HoistAllocations
from tir_passes.passes.online_softmax import OnlineSoftmax
from tir_passes.infra.pass_util import root_block, top_level_statements
from tir_passes.pipeline import CHECKS, run_pipeline
from tir_passes.checks.verify_contract import check_contract


@I.ir_module
class Weighted:
    """softmax(X) @ V row by row: the max, the normalizer and a contraction over j."""

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((8, 2), "float32"), O: T.Buffer((4, 2), "float32")):
        M = T.sblock_alloc_buffer((4,))
        L = T.sblock_alloc_buffer((4,))
        A = T.sblock_alloc_buffer((4, 2))
        for i, j in T.grid(4, 8):
            with T.sblock("M"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    M[vi] = T.float32(-3.0e38)
                M[vi] = T.max(M[vi], X[vi, vj])
        for i, j in T.grid(4, 8):
            with T.sblock("L"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    L[vi] = T.float32(0)
                L[vi] = L[vi] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5))
        for i, d, j in T.grid(4, 2, 8):
            with T.sblock("A"):
                vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                with T.init():
                    A[vi, vd] = T.float32(0)
                A[vi, vd] = A[vi, vd] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5)) * V[vj, vd]
        for i, d in T.grid(4, 2):
            with T.sblock("O"):
                vi, vd = T.axis.remap("SS", [i, d])
                O[vi, vd] = A[vi, vd] / L[vi]


def test_max_and_sums_become_one_loop_with_a_running_maximum():
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((8, 2), "float32"), O: T.Buffer((4, 2), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({DECISIONS_KEY: ["M: online with L, A over vj: A also has columns besides the rows "
                                               "(a contraction over vj); one pass over the row; the sums restart "
                                               "where the maximum was -inf: it reads the parameter X, which may "
                                               "hold -inf (a mask or a bias)"]})
                M = T.sblock_alloc_buffer((4,))
                M_prev = T.sblock_alloc_buffer((4,))
                L = T.sblock_alloc_buffer((4,))
                A = T.sblock_alloc_buffer((4, 2))
                for i, j in T.grid(4, 8):
                    with T.sblock("M"):
                        vi, vj = T.axis.remap("SR", [i, j])
                        T.reads(X[vi, vj])
                        T.writes(M[vi], M_prev[vi])
                        T.sblock_attr({"online.shift": {"previous": "M_prev", "shift": "M", "streamed": True,
                                                         "first_finite": False, "finite_init": False}})
                        with T.init():
                            M[vi] = T.float32(-3.0e38)
                            M_prev[vi] = T.float32(-3.0e38)
                        M_prev[vi] = M[vi]
                        M[vi] = T.max(M[vi], X[vi, vj])
                    with T.sblock("L"):
                        vi, vj = T.axis.remap("SR", [i, j])
                        T.reads(M_prev[vi], M[vi], X[vi, vj])
                        T.writes(L[vi])
                        T.sblock_attr({"online.rescale": {"previous": "M_prev", "shift": "M"}})
                        with T.init():
                            L[vi] = T.float32(0)
                        # restarts from zero while the maximum was -inf (leading masked elements)
                        L[vi] = T.if_then_else(M_prev[vi] == T.float32("-inf"), T.float32(0),
                                               L[vi] * T.if_then_else(M_prev[vi] == M[vi], T.float32(1),
                                                                      T.exp((M_prev[vi] - M[vi]) * T.float32(0.5)))) \
                            + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5))
                    for d in range(2):
                        with T.sblock("A"):
                            vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                            T.reads(M_prev[vi], M[vi], X[vi, vj], V[vj, vd])
                            T.writes(A[vi, vd])
                            T.sblock_attr({"online.rescale": {"previous": "M_prev", "shift": "M"}})
                            with T.init():
                                A[vi, vd] = T.float32(0)
                            A[vi, vd] = T.if_then_else(M_prev[vi] == T.float32("-inf"), T.float32(0),
                                                       A[vi, vd] * T.if_then_else(M_prev[vi] == M[vi], T.float32(1),
                                                                                  T.exp((M_prev[vi] - M[vi]) * T.float32(0.5)))) \
                                + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5)) * V[vj, vd]
                for i, d in T.grid(4, 2):
                    with T.sblock("O"):
                        vi, vd = T.axis.remap("SS", [i, d])
                        O[vi, vd] = A[vi, vd] / L[vi]

    assert_rewrites(OnlineSoftmax(), Weighted, Expected)


def test_the_online_loop_computes_what_the_three_passes_did():
    result = run_pipeline(Weighted, checks=CHECKS, stop_after="OnlineSoftmax")  # numerics against the input
    assert [s.name for s in result.stages][-1] == "OnlineSoftmax"
    assert len(top_level_statements(result.module["main"])) == 2


def _decisions(mod) -> list[str]:
    return [str(d) for d in root_block(mod["main"]).annotations.get(DECISIONS_KEY, [])]


def test_a_softmax_whose_rows_fit_one_tile_keeps_its_passes():
    before = tvm.IRModule({"main": make_softmax(8, 100)})
    after = OnlineSoftmax()(run_pipeline(before, stop_after="HoistAllocations").module)
    assert len(top_level_statements(after["main"])) == len(top_level_statements(before["main"]))
    assert any("not online: its rows fit in one tile" in d for d in _decisions(after))


def test_rows_longer_than_one_tile_are_read_once_for_their_statistics():
    kernel = compile_and_check(make_softmax(3, 20000))
    assert any("online with" in d and "longer than one tile" in d for d in _decisions(kernel.tir))
    assert len(kernel.program.kernels) == 1


def _refusal(module) -> str:
    after = OnlineSoftmax()(module)
    tvm.ir.assert_structural_equal(top_level_statements(after["main"]), top_level_statements(module["main"]))
    return " ".join(_decisions(after))


def test_a_sum_that_is_not_a_multiple_of_the_exponential_is_refused_with_why():
    @I.ir_module
    class Shifted:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((8, 2), "float32"), O: T.Buffer((4, 2), "float32")):
            M = T.sblock_alloc_buffer((4,))
            for i, j in T.grid(4, 8):
                with T.sblock("M"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32(-3.0e38)
                    M[vi] = T.max(M[vi], X[vi, vj])
            for i, d, j in T.grid(4, 2, 8):
                with T.sblock("A"):
                    vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                    with T.init():
                        O[vi, vd] = T.float32(0)
                    O[vi, vd] = O[vi, vd] + (T.exp(X[vi, vj] - M[vi]) + T.float32(1)) * V[vj, vd]

    assert "A: its term is not proportional to exp(-c*M)" in _refusal(Shifted)


def test_a_nest_between_that_writes_what_a_sum_reads_is_refused():
    @I.ir_module
    class Between:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((8, 2), "float32"), O: T.Buffer((4, 2), "float32")):
            M = T.sblock_alloc_buffer((4,))
            W = T.sblock_alloc_buffer((8, 2))
            for i, j in T.grid(4, 8):
                with T.sblock("M"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        M[vi] = T.float32(-3.0e38)
                    M[vi] = T.max(M[vi], X[vi, vj])
            for j, d in T.grid(8, 2):
                with T.sblock("W"):
                    vj, vd = T.axis.remap("SR", [j, d])
                    with T.init():
                        W[vj, vd] = T.float32(0)
                    W[vj, vd] = W[vj, vd] + V[vj, vd]
            for i, d, j in T.grid(4, 2, 8):
                with T.sblock("A"):
                    vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                    with T.init():
                        O[vi, vd] = T.float32(0)
                    O[vi, vd] = O[vi, vd] + T.exp(X[vi, vj] - M[vi]) * W[vj, vd]

    assert "W, between the max and A, touches what it reads or writes" in _refusal(Between)


@I.ir_module
class WithOtherReaders:
    """Weighted's max and sums, then two reductions that read M but cannot join the walk (a backward's
    adjoints): G sums over the rows, H reads the output O, which the online sums feed."""

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((4, 8), "float32"), V: T.Buffer((8, 2), "float32"), O: T.Buffer((4, 2), "float32"),
             G: T.Buffer((8,), "float32"), H: T.Buffer((4,), "float32")):
        M = T.sblock_alloc_buffer((4,))
        L = T.sblock_alloc_buffer((4,))
        A = T.sblock_alloc_buffer((4, 2))
        for i, j in T.grid(4, 8):
            with T.sblock("M"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    M[vi] = T.float32(-3.0e38)
                M[vi] = T.max(M[vi], X[vi, vj])
        for i, j in T.grid(4, 8):
            with T.sblock("L"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    L[vi] = T.float32(0)
                L[vi] = L[vi] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5))
        for i, d, j in T.grid(4, 2, 8):
            with T.sblock("A"):
                vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                with T.init():
                    A[vi, vd] = T.float32(0)
                A[vi, vd] = A[vi, vd] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5)) * V[vj, vd]
        for i, d in T.grid(4, 2):
            with T.sblock("O"):
                vi, vd = T.axis.remap("SS", [i, d])
                O[vi, vd] = A[vi, vd] / L[vi]
        for j, i in T.grid(8, 4):
            with T.sblock("G"):
                vj, vi = T.axis.remap("SR", [j, i])
                with T.init():
                    G[vj] = T.float32(0)
                G[vj] = G[vj] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5))
        for i, j in T.grid(4, 8):
            with T.sblock("H"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    H[vi] = T.float32(0)
                H[vi] = H[vi] + T.exp((X[vi, vj] - M[vi]) * T.float32(0.5)) * O[vi, 0]


def test_readers_that_cannot_join_the_walk_read_the_final_maximum():
    # the two passes alone (RowPartials would take G, a column sum), with every check: numerics against the input
    result = run_pipeline(WithOtherReaders, [HoistAllocations(), OnlineSoftmax()], checks=CHECKS)
    (decision,) = _decisions(result.module)
    assert decision.startswith("M: online with L, A over vj")
    assert "left reading the final maximum: G sums over" in decision
    assert "O, between the max and H, touches what it reads or writes" in decision
    assert len(top_level_statements(result.module["main"])) == 4   # the walk, O, G, H


def test_the_contract_check_catches_a_pass_that_moves_a_sum_out_of_the_online_loop():
    online = OnlineSoftmax()(Weighted)
    assert check_contract(online) == []
    sch = s_tir.Schedule(online)
    consumer_loop = sch.get_loops(sch.get_sblock("O"))[0]
    sch.compute_at(sch.get_sblock("L"), consumer_loop)  # what a careless fusion would do: TVM allows it
    problems = check_contract(sch.mod)
    assert any("online sum L: it must reduce along the loop of the block that keeps M and M_prev" in p
               for p in problems)
