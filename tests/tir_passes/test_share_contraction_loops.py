"""ShareContractionLoops, and two contractions in one nest as two tl.dots over one K loop."""

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from helpers import assert_rewrites, compile_and_check
from lowering.tile_ir import Dot, Loop
from tir_passes.passes.share_contraction_loops import ShareContractionLoops
from tir_passes.contracts.tile_contract import NOT_DOT_SERIAL_K, not_dot_mark
from tir_passes.contracts.tile_root import tile_notes
from tir_passes.analyses.nest import blocks_under
from triton_codegen import compile

from swiglu import make_swiglu


def make_renamed_swiglu(M, N, K, names, gate_first=True):
    """examples/swiglu.py with its buffers and blocks renamed X, Wg, Wu, G, U, Y -> `names`."""
    return _renamed(make_swiglu(M, N, K, gate_first=gate_first), dict(zip(("X", "Wg", "Wu", "G", "U", "Y"), names)))


def _renamed(func, names: dict[str, str]):
    """`func` with its buffers and blocks renamed (TVMScript would print them under the new names)."""
    if all(k == v for k, v in names.items()):
        return func
    text = func.script()
    for old, new in names.items():
        text = text.replace(f"{old}[", f"{new}[").replace(f"{old}: T.Buffer", f"{new}: T.Buffer")
        text = text.replace(f"{old} = T.sblock_alloc_buffer", f"{new} = T.sblock_alloc_buffer")
        text = text.replace(f'T.sblock("{old}")', f'T.sblock("{new}")').replace(f"T.reads({old}", f"T.reads({new}")
    return tvm.script.from_source(text)


def _kernel_source(kernel, index=0) -> str:
    name = kernel.program.kernels[index].name
    start = kernel.source.index(f"def {name}(")
    return kernel.source[start:kernel.source.index("\n\n\n", start)]


def _walk(stmts):
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, Loop):
            yield from _walk(stmt.body)


def _exprs(value):
    yield value
    for name in ("x", "a", "b", "acc", "cond", "value"):
        child = getattr(value, name, None)
        if child is not None and hasattr(child, "dims"):
            yield from _exprs(child)


def plan_signature(kernel) -> list[tuple]:
    """What the kernel plan is, without names: per kernel its block sizes, serial loops, and dots
    with their operand dtypes and precision."""
    signature = []
    for tile_kernel in kernel.program.kernels:
        stmts = list(_walk(tile_kernel.body))
        dots = sorted((e.a.dtype, e.b.dtype, e.precision) for s in stmts if hasattr(s, "value")
                      for e in _exprs(s.value) if isinstance(e, Dot))
        signature.append((sorted(tile_kernel.block_sizes.items()), sum(isinstance(s, Loop) for s in stmts), dots,
                          tile_kernel.num_warps, tile_kernel.num_stages, len(tile_kernel.grid)))
    return signature


def test_sibling_contraction_loops_become_one():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((8, 4), "float32"), A: T.Buffer((6, 4), "float32"), B: T.Buffer((6, 4), "float32"),
                 Y: T.Buffer((8, 6), "float32")):
            G = T.sblock_alloc_buffer((8, 6))
            U = T.sblock_alloc_buffer((8, 6))
            for i, j in T.grid(8, 6):
                for k in range(4):
                    with T.sblock("G"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            G[vi, vj] = T.float32(0)
                        G[vi, vj] = G[vi, vj] + X[vi, vk] * A[vj, vk]
                for k in range(4):
                    with T.sblock("U"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            U[vi, vj] = T.float32(0)
                        U[vi, vj] = U[vi, vj] + X[vi, vk] * B[vj, vk]
                with T.sblock("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = G[vi, vj] * U[vi, vj]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((8, 4), "float32"), A: T.Buffer((6, 4), "float32"), B: T.Buffer((6, 4), "float32"),
                 Y: T.Buffer((8, 6), "float32")):
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"contraction.decisions": [
                    "one loop k walks the reduction of G and U: each contraction a tl.dot over the same K tiles, "
                    "common operands loaded once"]})
                G = T.sblock_alloc_buffer((8, 6))
                U = T.sblock_alloc_buffer((8, 6))
                for i, j in T.grid(8, 6):
                    for k in range(4):
                        with T.sblock("G"):
                            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                            with T.init():
                                G[vi, vj] = T.float32(0)
                            G[vi, vj] = G[vi, vj] + X[vi, vk] * A[vj, vk]
                        with T.sblock("U"):
                            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                            with T.init():
                                U[vi, vj] = T.float32(0)
                            U[vi, vj] = U[vi, vj] + X[vi, vk] * B[vj, vk]
                    with T.sblock("Y"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        Y[vi, vj] = G[vi, vj] * U[vi, vj]

    assert_rewrites(ShareContractionLoops(), Before, Expected)


def test_dependent_or_unequal_loops_stay_apart():
    """The second contraction reads the first's output (here: its operand is G itself), or the
    extents differ: interleaving would change the result, so nothing merges."""

    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((8, 4), "float32"), A: T.Buffer((4, 4), "float32"), B: T.Buffer((8, 5), "float32"),
                 Y: T.Buffer((8, 4), "float32"), Z: T.Buffer((8, 4), "float32")):
            G = T.sblock_alloc_buffer((8, 4))
            for i, j in T.grid(8, 4):
                for k in range(4):
                    with T.sblock("G"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            G[vi, vj] = T.float32(0)
                        G[vi, vj] = G[vi, vj] + X[vi, vk] * A[vj, vk]
                for k in range(4):
                    with T.sblock("Y"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            Y[vi, vj] = T.float32(0)
                        Y[vi, vj] = Y[vi, vj] + G[vi, vk] * A[vj, vk]
                for k in range(5):
                    with T.sblock("Z"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        with T.init():
                            Z[vi, vj] = T.float32(0)
                        Z[vi, vj] = Z[vi, vj] + B[vi, vk] * B[vi, vk]

    tvm.ir.assert_structural_equal(ShareContractionLoops()(Before), Before)


def test_swiglu_is_two_dots_over_one_k_loop_and_matches_tvm():
    kernel = compile_and_check(make_swiglu(37, 45, 53), aot=False)
    assert len(kernel.program.kernels) == 1
    source = _kernel_source(kernel)
    assert source.count("tl.dot(") == 2
    loops = [line.strip() for line in source.splitlines() if line.strip().startswith("for ")]
    assert len(loops) == 1 and "tl.cdiv(53, BLOCK_K)" in loops[0]
    assert source.count("X_ptr +") == 1   # the common operand: one load per K step for both dots
    assert "is not a tl.dot" not in "\n".join(note.text for note in tile_notes(kernel.tir["main"]))


def test_swiglu_plan_survives_block_order_and_names():
    plans = [plan_signature(compile(make_swiglu(37, 45, 53), verify=False)),
             plan_signature(compile(make_renamed_swiglu(37, 45, 53, ("x_in", "w_gate", "w_up", "gate", "up", "out"),
                                                        gate_first=False), verify=False))]
    assert plans[0] == plans[1]
    assert [len(k[2]) for k in plans[0]] == [2]


def test_a_contraction_that_is_not_a_dot_says_why():
    kernel = compile(make_swiglu(37, 45, 53), verify=False, disable=("ShareContractionLoops",))
    marks = {b.name_hint: not_dot_mark(b) for b in blocks_under(kernel.tir["main"].body)}
    not_dots = {name: mark for name, mark in marks.items() if mark is not None}
    assert len(not_dots) == 1 and next(iter(not_dots.values())).reason == NOT_DOT_SERIAL_K
    decisions = "\n".join(note.text for note in tile_notes(kernel.tir["main"]))
    assert f"{next(iter(not_dots))} is not a tl.dot (serial-reduction)" in decisions


def test_two_scores_of_one_query_are_two_dots_over_one_loop():
    """Q·K1ᵀ and Q·K2ᵀ summed (two score contractions of one query), fp32 operands under "high"."""

    @T.prim_func(s_tir=True)
    def two_scores(Q: T.Buffer((37, 24), "float32"), K1: T.Buffer((45, 24), "float32"),
                   K2: T.Buffer((45, 24), "float32"), S: T.Buffer((37, 45), "float32")):
        S1 = T.sblock_alloc_buffer((37, 45), "float32")
        S2 = T.sblock_alloc_buffer((37, 45), "float32")
        for i, j, d in T.grid(37, 45, 24):
            with T.sblock("S1"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    S1[vi, vj] = T.float32(0)
                S1[vi, vj] = S1[vi, vj] + Q[vi, vd] * K1[vj, vd]
        for i, j, d in T.grid(37, 45, 24):
            with T.sblock("S2"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    S2[vi, vj] = T.float32(0)
                S2[vi, vj] = S2[vi, vj] + Q[vi, vd] * K2[vj, vd]
        for i, j in T.grid(37, 45):
            with T.sblock("S"):
                vi, vj = T.axis.remap("SS", [i, j])
                S[vi, vj] = S1[vi, vj] * T.float32(0.125) + S2[vi, vj]

    kernel = compile(two_scores, verify=False, float32_matmul_precision="high")
    source = _kernel_source(kernel)
    assert source.count('input_precision="tf32"') == 2 and source.count("Q_ptr +") == 1
    assert [len(k[2]) for k in plan_signature(kernel)] == [2]
