"""compile(deterministic=True): the same bits for every batch size and every config (interpreter).

Each output row is computed by kernels compiled for 1, 7, 33 and 300 rows of the same inputs (a
symbolic row count runs one module on all four; a static one compiles four) and compared bit for
bit; every config of a module's config list is compared with its default. The contract check
refuses a deterministic kernel that lost a pin; the tuner's space and cached choices keep them.
Row length 700 (fp32) is two chunks of 512: the chunk boundary is inside every row.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from layernorm import make_layernorm
from matmul import make_matmul
from rmsnorm import make_rmsnorm
from softmax import make_softmax
from tests.fuzz.determinism import config_differences, dots_summed_along_k, fresh_arguments, outputs_bits
from tir_passes.contracts.tile_contract import KERNEL_KEY
from tir_passes.checks.verify_contract import check_contract
from triton_codegen import compile
from triton_codegen.search_space import keeps_pins, legal_configs

pytestmark = pytest.mark.interpreter


@pytest.fixture(autouse=True)
def dots_in_one_order():
    with dots_summed_along_k():
        yield

BATCHES = (1, 7, 33, 300)
N = 700


def make_row_sum(N: int):
    @T.prim_func(s_tir=True)
    def row_sum(x: T.handle, y: T.handle):
        rows = T.int32()
        X = T.match_buffer(x, (rows, N), "float32")
        Y = T.match_buffer(y, (rows,), "float32")
        for i, k in T.grid(rows, N):
            with T.sblock("sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    Y[vi] = T.float32(0)
                Y[vi] = Y[vi] + X[vi, vk]

    return row_sum


def make_row_sum_rewritten(N: int):
    """make_row_sum as another user writes it: other names, the sum commuted, an intermediate."""
    @T.prim_func(s_tir=True)
    def total(data: T.handle, out: T.handle):
        n = T.int32()
        D = T.match_buffer(data, (n, N), "float32")
        Out = T.match_buffer(out, (n,), "float32")
        acc = T.alloc_buffer((n,), "float32")
        for r, c in T.grid(n, N):
            with T.sblock("accumulate"):
                vr, vc = T.axis.remap("SR", [r, c])
                with T.init():
                    acc[vr] = T.float32(0)
                acc[vr] = D[vr, vc] + acc[vr]
        for r in range(n):
            with T.sblock("copy"):
                vr = T.axis.remap("S", [r])
                Out[vr] = acc[vr]

    return total


def make_column_sum(M: int, C: int):
    """A reduction along the non-contiguous axis: the column tile decides how threads split it."""
    @T.prim_func(s_tir=True)
    def column_sum(X: T.Buffer((M, C), "float32"), Y: T.Buffer((C,), "float32")):
        for j, i in T.grid(C, M):
            with T.sblock("sum"):
                vj, vi = T.axis.remap("SR", [j, i])
                with T.init():
                    Y[vj] = T.float32(0)
                Y[vj] = Y[vj] + X[vi, vj]

    return column_sum


def _rows_of(data: dict, batch: int, row_axis_of: dict[str, int]) -> dict:
    """The first `batch` rows (along each buffer's row axis) of the largest batch's inputs."""
    return {name: np.ascontiguousarray(np.take(array, range(batch), axis=row_axis_of[name]))
            if name in row_axis_of else array for name, array in data.items()}


def _row_bits(bits: bytes, batch: int, row_bytes: int) -> bytes:
    return bits[:batch * row_bytes]


# (name, make(batch) -> PrimFunc (None: one symbolic module), {buffer: its row axis}, output, bytes per output row)
CASES = {
    "rmsnorm": (lambda b: make_rmsnorm(N), {"X": 0, "Y": 0}, "Y", N * 4),
    "row_sum": (lambda b: make_row_sum(N), {"X": 0, "Y": 0}, "Y", 4),
    "layernorm": (lambda b: make_layernorm(b, N), {"X": 0, "Y": 0}, "Y", N * 4),
    "softmax": (lambda b: make_softmax(b, N), {"A": 0, "Out": 0}, "Out", N * 4),
    "matmul": (lambda b: make_matmul(b, 45, 100), {"A": 0, "C": 0}, "C", 45 * 4),
}
SYMBOLIC = {"rmsnorm", "row_sum"}


def _batch_outputs(name: str) -> dict[int, bytes]:
    """Each batch's output bytes: one symbolic module run on every batch, or one module per batch
    (whose default tiles follow the row count), all on the rows of the largest batch's inputs."""
    make, row_axes, output, _ = CASES[name]
    largest = make(BATCHES[-1])
    data, scalars = fresh_arguments(largest, {"rows": BATCHES[-1]})
    symbolic = compile(largest, deterministic=True, verify=False) if name in SYMBOLIC else None
    results = {}
    for batch in BATCHES:
        func = largest if symbolic is not None else make(batch)
        kernel = symbolic or compile(func, deterministic=True, verify=batch == 7)
        inputs = _rows_of(data, batch, row_axes)
        results[batch] = outputs_bits(kernel, func, inputs, {**scalars, "rows": batch})[output]
    return results


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_row_has_the_same_bits_whatever_the_batch(name):
    row_bytes = CASES[name][3]
    results = _batch_outputs(name)
    for batch in BATCHES[:-1]:
        assert _row_bits(results[batch], batch, row_bytes) == _row_bits(results[BATCHES[-1]], batch, row_bytes), \
            f"{name}: {batch} rows give other bits than the same rows in a batch of {BATCHES[-1]}"


def test_a_column_reduction_has_the_same_bits_whatever_the_number_of_columns():
    data, _ = fresh_arguments(make_column_sum(N, 300), None)
    outputs = {}
    for columns in BATCHES:
        func = make_column_sum(N, columns)
        kernel = compile(func, deterministic=True, verify=False)
        assert any(why == "layout" for _, _, why in kernel.program.kernels[0].pins)
        inputs = {"X": np.ascontiguousarray(data["X"][:, :columns]), "Y": data["Y"][:columns]}
        outputs[columns] = outputs_bits(kernel, func, inputs, {})["Y"]
    for columns in BATCHES[:-1]:
        assert outputs[columns] == outputs[300][:columns * 4]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_config_of_the_module_gives_the_same_bits(name):
    make = CASES[name][0]
    func = make(33)
    kernel = compile(func, deterministic=True, verify=False)
    assert config_differences(kernel, func, {"rows": 33}) == []


def test_the_pins_and_the_bits_survive_a_rewrite_of_the_program():
    original, rewritten = make_row_sum(N), make_row_sum_rewritten(N)
    kernels = [compile(f, deterministic=True, verify=False) for f in (original, rewritten)]
    pins = [[(size, why) for _, size, why in k.program.kernels[0].pins] for k in kernels]
    assert pins[0] == pins[1] and ("reduction" in {why for _, why in pins[0]})
    data, scalars = fresh_arguments(original, {"rows": 33})
    bits = outputs_bits(kernels[0], original, data, scalars)["Y"]
    again = outputs_bits(kernels[1], rewritten, {"D": data["X"], "Out": data["Y"]}, {"n": 33})["Out"]
    assert bits == again


def test_without_the_flag_a_config_changes_the_bits():
    """The comparison above has teeth: tl.dot's K tile is a config without the flag. (numpy's
    pairwise sums halve at powers of two, so in the interpreter a tl.sum over chunks of 512 adds
    like one over 1024; its GPU tree is another matter, docs/determinism.md.)"""
    func = make_matmul(33, 45, 100)
    kernel = compile(func, verify=False)
    assert config_differences(kernel, func)
    assert not kernel.program.deterministic and "PINS" not in kernel.source


def test_the_dump_the_module_and_the_manifest_record_the_promise(tmp_path):
    kernel = compile(make_rmsnorm(N), deterministic=True, verify=False, dump_dir=str(tmp_path))
    dump = (tmp_path / "08_Tiling.py").read_text() if (tmp_path / "08_Tiling.py").exists() else \
        next(p.read_text() for p in sorted(tmp_path.iterdir()) if p.name.endswith("_Tiling.py"))
    assert '"tile.deterministic": 1' in dump and '"why": "reduction"' in dump and "deterministic: axis" in dump
    manifest = kernel.manifest()
    assert manifest["deterministic"] is True
    pinned = {p["name"]: p for p in manifest["kernels"][0]["pinned"]}
    # a whole row of 700 fp32: its 1024 / 4 vectors over 32 lanes, 8 warps
    assert pinned["num_warps"]["value"] == 8 and any(p["why"] == "reduction" for p in pinned.values())
    assert "PINS = " in kernel.source and "Deterministic" in kernel.source and "atomic_" not in kernel.source
    for config in manifest["kernels"][0]["configs"]:
        assert all(config[name] == pin["value"] for name, pin in pinned.items())
    assert compile(make_rmsnorm(N), verify=False).manifest()["deterministic"] is False


def _without_pins(func):
    """The tiled function with every kernel's pins and floors dropped (a pass that forgot them)."""
    def strip(loop):
        raw = loop.annotations.get(KERNEL_KEY)
        if raw is None:
            return loop
        value = {k: v for k, v in dict(raw.items()).items() if k not in ("pins", "floors")}
        annotations = {**dict(loop.annotations), KERNEL_KEY: value}
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, strip)))


def _with_warps(func, warps: int):
    """The tiled function with every kernel's num_warps (and its pin) changed to `warps`."""
    def change(loop):
        raw = loop.annotations.get(KERNEL_KEY)
        if raw is None:
            return loop
        value = dict(raw.items())
        value["num_warps"] = warps
        value["pins"] = [{**dict(p.items()), "size": warps} if str(p["name"]) == "num_warps" else p
                         for p in value.get("pins", [])]
        annotations = {**dict(loop.annotations), KERNEL_KEY: value}
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, change)))


def test_a_row_that_fits_is_one_whole_tile_read_once_and_a_longer_one_walks_chunks():
    """The memory-bound cost (issue 20): a row of 700 is one pinned tile of 1024, loaded once for
    the mean, the variance and the normalize; a row of 20000 (over the widest tile) chunks of 512."""
    whole = compile(make_layernorm(33, N), deterministic=True, verify=False)
    (tile_kernel,) = whole.program.kernels
    assert [(size, why) for name, size, why in tile_kernel.pins if name != "num_warps"] == [(1024, "reduction")]
    assert whole.source.count("tl.load(X_ptr") == 1
    chunked = compile(make_rmsnorm(20000), deterministic=True, verify=False)
    assert ("BLOCK_AX0", 512, "reduction") in chunked.program.kernels[0].pins
    assert ("num_warps", 4, "warps") in chunked.program.kernels[0].pins


def test_the_contract_check_refuses_a_whole_row_too_short_for_its_warps():
    """A whole tile of 1024 fp32 at 16 warps leaves threads without a full vector: the rows per
    program would change how threads split the row."""
    kernel = compile(make_layernorm(33, N), deterministic=True, verify=False)
    mod = kernel.tir.__class__({"main": _with_warps(kernel.tir["main"], 16)})
    problems = check_contract(mod)
    assert any("not the program's tile of 2048" in p for p in problems), problems


@pytest.mark.parametrize("name", ["rmsnorm", "matmul"])
def test_the_contract_check_refuses_a_deterministic_kernel_without_its_pins(name):
    kernel = compile(CASES[name][0](33), deterministic=True, verify=False)
    assert check_contract(kernel.tir) == []
    mod = kernel.tir.__class__({"main": _without_pins(kernel.tir["main"])})
    problems = check_contract(mod)
    assert any("not pinned" in p for p in problems), problems
    assert any("num_warps" in p for p in problems), problems


def test_a_gemm_pins_its_k_steps_and_takes_the_tiles_of_the_plan_without_the_flag():
    """Issue 20's cost: a GEMM whose only sum is its tl.dot pins BLOCK_K alone; its M/N tiles,
    warps, stages and persistence are the flagless plan's (the wide 128x256 tiles here), with
    BLOCK_M and num_warps floored where Triton keeps wgmma; a batch of one row runs 64 rows (the
    floor), not 16 (mma.sync); the module's configs vary M and N, never K or under the floors."""
    func = make_matmul(3000, 5000, 1000)
    free = compile(func, verify=False).program.kernels[0]
    fixed = compile(func, deterministic=True, verify=False)
    kernel = fixed.program.kernels[0]
    assert kernel.block_sizes == free.block_sizes == {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}
    assert (kernel.num_warps, kernel.num_stages, kernel.persistent) == (free.num_warps, free.num_stages, True)
    assert kernel.pins == (("BLOCK_K", 64, "dot"),)
    assert kernel.floors == (("BLOCK_M", 64, "mma"), ("num_warps", 4, "mma"))
    assert "FLOORS = " in fixed.source and check_contract(fixed.tir) == []
    configs = fixed.module(interpret=True).CONFIGS["matmul_kernel0"]
    assert {c["BLOCK_K"] for c in configs} == {64} and min(c["BLOCK_M"] for c in configs) >= 64
    assert len({(c["BLOCK_M"], c["BLOCK_N"]) for c in configs}) > 2 and min(c["num_warps"] for c in configs) >= 4
    one_row = compile(make_matmul(1, 45, 100), deterministic=True, verify=False).program.kernels[0]
    assert one_row.block_sizes["BLOCK_M"] == 64 and one_row.block_sizes["BLOCK_K"] == 64


def test_a_dot_beside_other_sums_keeps_every_tile_pinned():
    """softmax(Q·Kᵀ): the row sums reduce the dot's accumulator in the MMA's layout, which the M/N
    tiles and warps decide: every tile and num_warps stay pinned, and no floor replaces them."""
    from attention_scores import make_attention_scores

    kernels = compile(make_attention_scores(37, 45, 32), deterministic=True, verify=False).program.kernels
    with_dot = [k for k in kernels if "dot" in {why for _, _, why in k.pins}]
    assert with_dot and all(not k.floors and ("num_warps", k.num_warps, "warps") in k.pins for k in with_dot)
    assert all(set(k.block_sizes) <= {name for name, _, _ in k.pins} for k in with_dot)


def test_the_contract_check_refuses_a_gemm_tile_under_the_mma_floor():
    """A BLOCK_M of 32 would run mma.sync on sm_90 where 64 rows run wgmma: refused; so is a config
    or a cached tuning choice that lowers it, or the warps, under the floor."""
    kernel = compile(make_matmul(33, 45, 100), deterministic=True, verify=False)

    def lowered(loop):
        raw = loop.annotations.get(KERNEL_KEY)
        if raw is None:
            return loop
        value = dict(raw.items())
        value["floors"] = [{**dict(f.items()), "minimum": 32} for f in value["floors"]]
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                        {**dict(loop.annotations), KERNEL_KEY: value})

    func = kernel.tir["main"]
    problems = check_contract(kernel.tir.__class__({"main": func.with_body(
        tvm_ffi.structural_map(func.body, (tirx.For, lowered)))}))
    assert any("BLOCK_M has no floor of 64" in p for p in problems), problems
    module = kernel.module(interpret=True)
    name = next(iter(module.CONFIGS))
    summary, default = module.TILE_SUMMARY[name], module.CONFIGS[name][0]
    assert summary["at_least"] == {"BLOCK_M": 64, "num_warps": 4}
    assert not keeps_pins(summary, {**default, "BLOCK_M": 32}) and not keeps_pins(summary, {**default, "num_warps": 2})
    legal = legal_configs(summary, default, {})
    assert legal and all(c["BLOCK_M"] >= 64 and c["num_warps"] >= 4 and c["BLOCK_K"] == 64 for c in legal)
    assert len({c["BLOCK_N"] for c in legal}) > 1


def test_the_contract_check_reads_a_scans_pin():
    """A float cumsum pins its scan axis: the check finds the pin, and reports it once dropped."""
    from cumsum import make_cumsum

    kernel = compile(make_cumsum(7, 45), deterministic=True, verify=False)
    assert check_contract(kernel.tir) == []
    problems = check_contract(kernel.tir.__class__({"main": _without_pins(kernel.tir["main"])}))
    assert any("scans along it" in p for p in problems), problems


def test_the_tuner_searches_only_configs_that_keep_the_pins():
    kernel = compile(make_row_sum(N), deterministic=True, verify=False)
    module = kernel.module(interpret=True)
    name = next(iter(module.CONFIGS))
    summary = module.TILE_SUMMARY[name]
    legal = legal_configs(summary, module.CONFIGS[name][0], {"rows": 4096})
    assert legal and all(keeps_pins(summary, c) for c in legal)
    free = compile(make_row_sum(N), verify=False).module(interpret=True)
    free_summary = free.TILE_SUMMARY[name]
    free_legal = legal_configs(free_summary, free.CONFIGS[name][0], {"rows": 4096})
    changed = {**module.CONFIGS[name][0], "num_warps": 16}  # the row of 700 pins 8
    assert not keeps_pins(summary, changed) and len(free_legal) > len(legal)


def test_a_cached_tuning_result_that_breaks_a_pin_is_not_applied():
    from triton_codegen.tuning import cached_choice_problem

    kernel = compile(make_row_sum(N), deterministic=True, verify=False)
    module = kernel.module(interpret=True)
    name = next(iter(module.CONFIGS))
    default = module.CONFIGS[name][0]
    sizes = {"rows": 33}
    assert cached_choice_problem(module, {"chosen": {name: default}}, sizes) == ""
    problem = cached_choice_problem(module, {"chosen": {name: {**default, "num_warps": 16}}}, sizes)
    assert "pins" in problem and "num_warps" in problem


def test_cli_compile_deterministic_writes_the_promise(tmp_path):
    from triton_codegen.cli import main

    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
    assert main(["compile", os.path.join(examples, "rmsnorm.py"), "-o", str(tmp_path), "--deterministic",
                 "--no-verify"]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())["modules"]["rmsnorm.py"]
    assert manifest["deterministic"] is True and manifest["kernels"][0]["pinned"]
