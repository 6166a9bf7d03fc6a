"""Tile windows (tir_passes/analyses/tile_window.py): attention whose mask keeps a band of keys per query
visits only the key tiles a row tile needs (causal: up to the diagonal), as a typed decision the
contract check verifies; the kernel matches TVM at every block size, including rows with nothing
unmasked (NaN as in TIR) and leading masked keys (the online sums restart)."""

import pytest
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes import CHECKS, VerificationError, run_pipeline
from tir_passes.infra.frontend import as_module
from tir_passes.infra.pass_util import s_tir_pass
from tir_passes.contracts.tile_contract import LOOP_KEY, TileWindow, loop_tile
from tir_passes.analyses.tile_window import _evaluate
from tir_passes.passes.tiling import Tiling
from triton_codegen import check_against_tvm, compile

from attention import make_attention


def make_banded_attention(S: int, D: int, low: int, high: int, fill: float = float("-inf"), select: bool = False,
                          form: str = "keeps"):
    """softmax over keys j with i + low <= j <= i + high (the rest `fill`, through T.Select with
    `select`), times V. `form`: the window as what it keeps ("keeps"), or as what it masks, the way
    users write sliding windows: "or" (`j < i + low or j > i + high` takes `fill`), "not" (the
    keep-condition `not (...)` of that), "constant_and" (`j > i + high or (WINDOWED and j < i + low)`
    with a Python constant, which TVMScript leaves as `T.And(T.bool(True), ...)`)."""
    scale = 1.0 / D**0.5
    windowed = True

    @T.prim_func(s_tir=True)
    def banded(Q: T.Buffer((S, D), "float16"), K: T.Buffer((S, D), "float16"), V: T.Buffer((S, D), "float16"),
               O: T.Buffer((S, D), "float16")):
        scores = T.sblock_alloc_buffer((S, S), "float32")
        masked = T.sblock_alloc_buffer((S, S), "float32")
        row_max = T.sblock_alloc_buffer((S,), "float32")
        weights = T.sblock_alloc_buffer((S, S), "float32")
        row_sum = T.sblock_alloc_buffer((S,), "float32")
        acc = T.sblock_alloc_buffer((S, D), "float32")
        for i, j, d in T.grid(S, S, D):
            with T.sblock("scores"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    scores[vi, vj] = T.float32(0)
                scores[vi, vj] = scores[vi, vj] + T.Cast("float32", Q[vi, vd]) * T.Cast("float32", K[vj, vd])
        for i, j in T.grid(S, S):
            with T.sblock("masked"):
                vi, vj = T.axis.remap("SS", [i, j])
                if select:
                    masked[vi, vj] = T.Select(vi + low <= vj and vj <= vi + high, scores[vi, vj] * T.float32(scale),
                                              T.float32(fill))
                elif form == "or":
                    masked[vi, vj] = T.if_then_else(vj < vi + low or vj > vi + high, T.float32(fill),
                                                    scores[vi, vj] * T.float32(scale))
                elif form == "not":
                    masked[vi, vj] = T.if_then_else(not (vj < vi + low or vj > vi + high),
                                                    scores[vi, vj] * T.float32(scale), T.float32(fill))
                elif form == "constant_and":
                    masked[vi, vj] = T.if_then_else(vj > vi + high or (windowed and vj < vi + low), T.float32(fill),
                                                    scores[vi, vj] * T.float32(scale))
                else:
                    masked[vi, vj] = T.if_then_else(vi + low <= vj and vj <= vi + high,
                                                    scores[vi, vj] * T.float32(scale), T.float32(fill))
        for i, j in T.grid(S, S):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.float32(float("-inf"))
                row_max[vi] = T.max(row_max[vi], masked[vi, vj])
        for i, j in T.grid(S, S):
            with T.sblock("weights"):
                vi, vj = T.axis.remap("SS", [i, j])
                weights[vi, vj] = T.exp(masked[vi, vj] - row_max[vi])
        for i, j in T.grid(S, S):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + weights[vi, vj]
        for i, d, j in T.grid(S, D, S):
            with T.sblock("weighted_sum"):
                vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                with T.init():
                    acc[vi, vd] = T.float32(0)
                acc[vi, vd] = acc[vi, vd] + T.Cast("float32", T.Cast("float16", weights[vi, vj])) * T.Cast("float32", V[vj, vd])
        for i, d in T.grid(S, D):
            with T.sblock("normalize"):
                vi, vd = T.axis.remap("SS", [i, d])
                O[vi, vd] = T.Cast("float16", acc[vi, vd] / row_sum[vi])

    return banded


def _windows(func) -> list[TileWindow]:
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda loop: found.append(loop_tile(loop))))
    return [tile.window for tile in found if tile is not None and tile.window is not None]


BLOCKS = [(16, 32), (32, 16)]   # row tiles narrower and wider than key tiles, besides the default config


def _check_every_block_size(kernel, func):
    """The kernel against TVM with the default config and with each (BLOCK_I, BLOCK_J)."""
    module = kernel.module(True)
    [name] = module.CONFIGS
    default = dict(module.CONFIGS[name][0])
    for block_i, block_j in BLOCKS:
        module.CONFIGS[name].append({**default, "BLOCK_I": block_i, "BLOCK_J": block_j})
        module.CHOSEN[name] = len(module.CONFIGS[name]) - 1
        try:
            report = check_against_tvm(kernel, func)
        finally:
            module.CHOSEN[name] = 0
            module.CONFIGS[name].pop()
        assert report.ok, f"BLOCK_I={block_i}, BLOCK_J={block_j}: {report}"


BANDS = {
    # name: (S, low, high, the window Tiling must decide)
    "causal": (70, -70, 0, TileWindow("i", -70, 0)),
    "sliding_window_of_9": (70, -8, 0, TileWindow("i", -8, 0)),
    "strictly_causal_row_0_is_nan": (75, -75, -1, TileWindow("i", -75, -1)),
    "anticausal_leading_masked_keys": (70, 0, 70, TileWindow("i", 0, 70)),
    "band_of_7": (77, -3, 3, TileWindow("i", -3, 3)),
}


@pytest.mark.interpreter
@pytest.mark.parametrize("name", sorted(BANDS))
def test_banded_attention_visits_only_its_window(name):
    S, low, high, window = BANDS[name]
    func = make_banded_attention(S, 16, low, high)
    kernel = compile_and_check(func, aot=name == "causal")
    assert _windows(kernel.tir["main"]) == [window]
    assert "for j_0 in range(" in kernel.source and "j_0_stop = " in kernel.source
    assert ("j_0_first = " in kernel.source) == (window.low is not None)   # a lower bound is named
    _check_every_block_size(kernel, func)


def _interior_loop(source: str) -> str:
    """The first kernel's loop over the tiles inside the window (its lines), "" where it has none."""
    start = source.find("for j_0 in range(j_0_inside, j_0_past):")
    return "" if start < 0 else source[start:source.find("for j_0 in range(j_0_past", start)]


@pytest.mark.interpreter
@pytest.mark.parametrize("form", ["or", "not", "constant_and"])
def test_a_window_written_as_what_it_masks_walks_its_interior_unmasked(form):
    """A sliding window written by its masked side (or, not, a Python constant's `and`): the same
    window and the same three walks as the keep-form, the tiles inside it for every row lowered with
    no mask (the masks' bounds decided through and/or/not), and TVM's result at every block size."""
    low, high = -40, 0
    func = make_banded_attention(77, 16, low, high, form=form)
    kernel = compile_and_check(func, aot=form == "or")
    assert _windows(kernel.tir["main"]) == [TileWindow("i", low, high)]
    interior = _interior_loop(kernel.source)
    assert "tl.dot(" in interior and "no window mask" in kernel.source
    assert "i[:, None]" not in interior and "tl.where(True" not in kernel.source, interior
    keeps = compile(make_banded_attention(77, 16, low, high), verify=False)
    assert _interior_loop(keeps.source).count("tl.where(") == interior.count("tl.where(")
    _check_every_block_size(kernel, func)


@pytest.mark.interpreter
def test_causal_mask_written_with_min_value_and_zero_weights():
    """examples/attention.py's causal form: T.min_value scores and weights set to 0 above the
    diagonal (a then-branch mask)."""
    func = make_attention(1, 1, 45, 16, causal=True)
    kernel = compile_and_check(func, aot=False)
    assert _windows(kernel.tir["main"]) == [TileWindow("i", None, 0)]
    _check_every_block_size(kernel, func)


def _tiled(func):
    return run_pipeline(as_module(func), checks=("contract",)).module["main"]


def test_unmasked_attention_and_a_fill_that_is_no_identity_walk_every_tile():
    assert _windows(_tiled(make_banded_attention(70, 16, -70, 0))) == [TileWindow("i", -70, 0)]
    assert _windows(_tiled(make_attention(1, 1, 70, 16))) == []
    assert _windows(_tiled(make_banded_attention(70, 16, -70, 0, fill=-1.0))) == []   # max(M, -1) is not M
    assert _windows(_tiled(make_banded_attention(70, 16, -4, 0, select=True))) == [TileWindow("i", -4, 0)]


def _narrow_the_window(func):
    """A broken pass: the causal window one key narrower, bounds and decision consistent."""
    def rewrite(loop):
        tile = loop_tile(loop)
        if tile is None or tile.window is None:
            return loop
        annotations = dict(loop.annotations)
        value = dict(annotations[LOOP_KEY].items())
        value["window"] = {**dict(value["window"].items()), "high": tile.window.high - 1}
        annotations[LOOP_KEY] = value
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))


def _widen_the_loop(func):
    """A broken pass: the windowed loop walks one tile more than its window says."""
    def rewrite(loop):
        tile = loop_tile(loop)
        if tile is None or tile.window is None:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent + 1, loop.kind, loop.body, loop.thread_binding,
                        loop.annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))


@pytest.mark.parametrize("mutant, says", [(_narrow_the_window, "narrower than the masks prove"),
                                          (_widen_the_loop, "not the window's")])
def test_the_contract_check_catches_a_wrong_window(mutant, says):
    func = make_banded_attention(70, 16, -70, 0)
    with pytest.raises(VerificationError) as caught:
        run_pipeline(as_module(func), [*_front(), s_tir_pass("BrokenWindow", mutant)], checks=CHECKS)
    assert caught.value.check == "contract" and says in str(caught.value)


def _front():
    from tir_passes.pipeline import default_pipeline
    passes = default_pipeline()
    assert passes[-1].info.name == Tiling().info.name
    return passes


def make_sliding_window_over_keys(S: int, D: int, width: int):
    """Attention of S queries over a symbolic number m of keys, each query keeping the `width`
    keys up to its own index."""

    @T.prim_func(s_tir=True)
    def sliding(a: T.handle, b: T.handle, c: T.handle, o: T.handle):
        m = T.int32()
        Q = T.match_buffer(a, (S, D), "float32")
        K = T.match_buffer(b, (m, D), "float32")
        V = T.match_buffer(c, (m, D), "float32")
        O = T.match_buffer(o, (S, D), "float32")
        masked = T.sblock_alloc_buffer((S, m), "float32")
        row_max = T.sblock_alloc_buffer((S,), "float32")
        row_sum = T.sblock_alloc_buffer((S,), "float32")
        acc = T.sblock_alloc_buffer((S, D), "float32")
        for i, j, d in T.grid(S, m, D):
            with T.sblock("masked"):
                vi, vj, vd = T.axis.remap("SSR", [i, j, d])
                with T.init():
                    masked[vi, vj] = T.float32(0)
                masked[vi, vj] = masked[vi, vj] + Q[vi, vd] * K[vj, vd]
        for i, j in T.grid(S, m):
            with T.sblock("row_max"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_max[vi] = T.float32(float("-inf"))
                row_max[vi] = T.max(row_max[vi], T.if_then_else(vi - width < vj and vj <= vi, masked[vi, vj],
                                                                T.float32(float("-inf"))))
        for i, j in T.grid(S, m):
            with T.sblock("row_sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    row_sum[vi] = T.float32(0)
                row_sum[vi] = row_sum[vi] + T.exp(T.if_then_else(vi - width < vj and vj <= vi, masked[vi, vj],
                                                                 T.float32(float("-inf"))) - row_max[vi])
        for i, d, j in T.grid(S, D, m):
            with T.sblock("weighted_sum"):
                vi, vd, vj = T.axis.remap("SSR", [i, d, j])
                with T.init():
                    acc[vi, vd] = T.float32(0)
                acc[vi, vd] = acc[vi, vd] + T.exp(T.if_then_else(vi - width < vj and vj <= vi, masked[vi, vj],
                                                                 T.float32(float("-inf"))) - row_max[vi]) * V[vj, vd]
        for i, d in T.grid(S, D):
            with T.sblock("normalize"):
                vi, vd = T.axis.remap("SS", [i, d])
                O[vi, vd] = acc[vi, vd] / row_sum[vi]

    return sliding


@pytest.mark.interpreter
@pytest.mark.parametrize("keys", [0, 1, 37])
def test_a_window_over_no_keys_visits_no_tile_below_zero(keys):
    """With m = 0 keys the first tile must not become -1 (loads at negative offsets): every row
    is NaN (0 / 0), as in TIR."""
    func = make_sliding_window_over_keys(16, 16, 5)
    kernel = compile(func, verify=False)
    assert _windows(kernel.tir["main"]) == [TileWindow("i", -4, 0)]
    report = check_against_tvm(kernel, func, sizes={"m": keys})
    assert report.ok, str(report)


def test_extreme_finite_values_are_identities_only_where_nothing_acts_on_them():
    """T.min_value folds as max's identity; negated, overflowing or cast to another dtype it is not
    (the review found `0 - if_then_else(mask, x, lowest)` taken for an identity)."""
    x = tirx.Var("x", "float32")
    lowest, highest = tirx.const(-3.4028234663852886e38, "float32"), tirx.const(3.4028234663852886e38, "float32")
    select = tirx.if_then_else(x > tirx.const(0.0, "float32"), x, lowest)
    outside = {select.__chandle__(): 2}
    assert _evaluate(select, outside).kind == "lowest"
    assert _evaluate(tirx.const(0.0, "float32") - select, outside).kind == "highest"
    assert _evaluate(select + x, outside).kind == "unknown"
    assert _evaluate(tirx.exp(highest), {}).kind == "unknown"
    assert _evaluate(tirx.exp(lowest), {}).kind == "zero"
    assert _evaluate(tirx.Cast("float64", lowest), {}).kind == "finite"
    assert _evaluate(tirx.Max(tirx.const(float("inf"), "float32"), x), {}).kind == "+inf"
