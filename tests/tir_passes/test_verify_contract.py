"""The contract check catches tiling decisions that lie about the IR (the llvm build, and so the
numerics check, ignores them), and passes what Tiling really writes."""

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.infra.pass_util import replace_block
from tir_passes.contracts.tile_contract import DOT_KEY, KERNEL_KEY, LOOP_KEY
from tir_passes.passes.tiling import tile_function
from tir_passes.checks.verify_contract import check_contract


@T.prim_func(s_tir=True)
def scaled(A: T.Buffer((67, 100), "float32"), B: T.Buffer((67, 100), "float32")):
    for i, j in T.grid(67, 100):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((67, 33), "float16"), B: T.Buffer((33, 45), "float16"), C: T.Buffer((67, 45), "float32")):
    for i, j, k in T.grid(67, 45, 33):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])


@T.prim_func(s_tir=True)
def running_sum(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] + T.if_then_else(vj >= 1, Y[vi, vj - 1], T.float32(0))


@T.prim_func(s_tir=True)
def decaying_sum(X: T.Buffer((37, 29), "float32"), Y: T.Buffer((37, 29), "float32")):
    for i, j in T.grid(37, 29):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] + T.if_then_else(vj >= 1, Y[vi, vj - 1] * T.float32(0.5), T.float32(0))


@T.prim_func(s_tir=True)
def row_normalize(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37, 45), "float32")):
    total = T.sblock_alloc_buffer((37,), "float32")
    for i in range(37):
        for k in range(45):
            with T.sblock("total"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    total[vi] = T.float32(0)
                total[vi] = total[vi] + A[vi, vk]
        for j in range(45):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] / total[vi]


def _module(func):
    return tvm.IRModule({"main": tile_function(func, gpu_spec("H200"))})


def _edit_loop(mod, name: str, key: str, change):
    def rewrite(loop):
        if loop.loop_var.name != name:
            return loop
        annotations = dict(loop.annotations)
        annotations[key] = change(dict(annotations[key]))
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    func = mod["main"]
    return tvm.IRModule({"main": func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))})


def _edit_block(mod, name: str, key: str, value):
    def rewrite(block):
        if block.name_hint != name:
            return block
        return replace_block(block, annotations={**dict(block.annotations), key: value})

    func = mod["main"]
    return tvm.IRModule({"main": func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rewrite)))})


@pytest.mark.parametrize("func", [scaled, matmul, running_sum, decaying_sum, row_normalize],
                         ids=lambda f: f.attrs["global_symbol"])
def test_what_tiling_writes_passes(func):
    assert check_contract(_module(func)) == []


def test_untiled_module_passes():
    assert check_contract(tvm.IRModule({"main": scaled})) == []


MUTANTS = [
    # (name, module edit, text of the problem)
    ("extent smaller than the predicate", lambda m: _edit_loop(m, "j_1", LOOP_KEY, lambda t: {**t, "extent": 90}),
     "lets iterations past `j_0 * 128 + j_1 < 90` run"),
    ("extent larger than the loops cover", lambda m: _edit_loop(m, "i_1", LOOP_KEY, lambda t: {**t, "extent": 200}),
     "not ceil(200 / 16)"),
    ("block size that is not the loop's", lambda m: _edit_loop(m, "j_1", LOOP_KEY, lambda t: {**t, "size": 64}),
     "not its block size 64"),
    ("block size that is not a power of two", lambda m: _edit_loop(m, "j_1", LOOP_KEY, lambda t: {**t, "size": 96}),
     "not a power of two"),
    ("unknown role", lambda m: _edit_loop(m, "i_0", LOOP_KEY, lambda t: {**t, "role": "vector"}), "role must be one of"),
    ("outer loop that does not enclose", lambda m: _edit_loop(m, "j_1", LOOP_KEY, lambda t: {**t, "outer": "i_9"}),
     "does not enclose it"),
    ("two axes, one block constexpr", lambda m: _edit_loop(m, "j_1", LOOP_KEY, lambda t: {**t, "block": "BLOCK_I"}),
     "share the block constexpr BLOCK_I"),
]


@pytest.mark.parametrize("name, edit, problem", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_lying_loop_decision_is_caught(name, edit, problem):
    problems = check_contract(edit(_module(scaled)))
    assert any(problem in p for p in problems), problems


def test_dot_mark_on_the_wrong_axes_is_caught():
    mutant = _edit_block(_module(matmul), "C", DOT_KEY, {"m": "j", "n": "i", "k": "k"})
    assert any("axis j is not the block's M loop" in p for p in check_contract(mutant))


def test_dot_mark_on_a_block_that_is_no_contraction_is_caught():
    mutant = _edit_block(_module(scaled), "B", DOT_KEY, {"m": "i", "n": "j", "k": "j"})
    assert any("not a contraction" in p for p in check_contract(mutant))


@pytest.mark.parametrize("func", [running_sum, decaying_sum], ids=lambda f: f.attrs["global_symbol"])
def test_parallel_loop_that_carries_a_dependence_is_caught(func):
    """Marking the column loop as a program id would run it out of order (even for a scan)."""
    mutant = _edit_loop(_module(func), "j", LOOP_KEY, lambda t: {"role": "grid"})
    assert any("grid loop j" in p and "carries a dependence through Y" in p for p in check_contract(mutant))


def test_serial_loop_that_forgets_its_sync_is_caught():
    mutant = _edit_loop(_module(decaying_sum), "j", LOOP_KEY, lambda t: {"role": "serial"})
    assert any("does not name (the program would not sync)" in p for p in check_contract(mutant))


def test_register_claim_that_does_not_hold_is_caught():
    """The previous row of a value cannot come from this iteration's registers."""

    @T.prim_func(s_tir=True)
    def previous(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
        for i in range(8):
            for j in range(16):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]
            for j in range(16):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.if_then_else(vi > 0, B[vi - 1, vj], T.float32(0))

    mod = _module(previous)
    assert check_contract(mod) == []
    outer = next(l for l in _loops(mod) if KERNEL_KEY in l.annotations).loop_var.name
    mutant = _edit_loop(mod, outer, KERNEL_KEY, lambda k: {**k, "registers": ["B"], "spilled": []})
    assert any("B is held in registers, but" in p for p in check_contract(mutant))


def test_value_neither_in_registers_nor_spilled_is_caught():
    mod = _module(row_normalize)
    outer = next(l for l in _loops(mod) if KERNEL_KEY in l.annotations).loop_var.name
    mutant = _edit_loop(mod, outer, KERNEL_KEY, lambda k: {key: v for key, v in k.items() if key != "registers"})
    assert any("total is written and read again" in p for p in check_contract(mutant))


def _loops(mod):
    found: list = []
    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, found.append), order="pre")
    return found
