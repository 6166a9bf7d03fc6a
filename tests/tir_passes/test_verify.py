"""Each verification check catches a deliberately broken pass and names it."""

import os
import subprocess
import sys

import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tir_passes import VerificationError, run_pipeline
from tir_passes.infra.frontend import as_module
from tir_passes.infra.pass_util import replace_block, s_tir_pass
from tir_passes.pipeline import CHECKS
from tir_passes.passes.tiling import Tiling, tile_function
from tir_passes.contracts.gpu_specs import gpu_spec
from tir_passes.checks import bounds


@T.prim_func(s_tir=True)
def row_max(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37,), "float32")):
    for i, k in T.grid(37, 45):
        with T.sblock("row_max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.min_value("float32")
            B[vi] = T.max(B[vi], A[vi, vk])


def _drop_predicates(func):
    """Tile, then forget the tail predicates: the last tile reads past the end."""
    tiled = tile_function(func, gpu_spec("H200"))
    drop = lambda r: s_tir.SBlockRealize(r.iter_values, True, r.block) if r.block.name_hint != "root" else r
    return tiled.with_body(tvm_ffi.structural_map(tiled.body, (s_tir.SBlockRealize, drop)))


def _shorten_first_loop(func):
    """Off by one: the outermost loop runs one iteration too few."""
    loop = func.body.block.body
    short = tirx.For(loop.loop_var, loop.min, loop.extent - 1, loop.kind, loop.body, loop.thread_binding, loop.annotations)
    root = replace_block(func.body.block, body=short)
    return func.with_body(s_tir.SBlockRealize(func.body.iter_values, func.body.predicate, root))


def _init_max_with_zero(func):
    def rewrite(block):
        if block.init is None or not isinstance(block.body.value, tirx.Max):
            return block
        init = tirx.BufferStore(block.init.buffer, tirx.const(0.0, "float32"), block.init.indices)
        return replace_block(block, init=init)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rewrite)))


def _annotate_with_intimm(func):
    """An IntImm annotation value prints as a plain int, which parses back as a Python int."""
    def rewrite(loop):
        annotations = dict(loop.annotations)
        annotations["my.factor"] = tirx.const(4, "int32")
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, rewrite)))


@tvm.transform.module_pass(opt_level=0, name="MutateInPlace")
def mutate_in_place(mod, ctx):
    """Rewrites the module it was given instead of a copy."""
    mod["main"] = mod["main"].with_attr("my.touched", True)
    return mod


BROKEN = [  # (broken pass, the check that must catch it, whether Tiling runs first)
    (s_tir_pass("DropTailPredicate", _drop_predicates), "bounds", False),
    (s_tir_pass("ShortenLoop", _shorten_first_loop), "numerics", False),
    (s_tir_pass("ShortenGridLoop", _shorten_first_loop), "contract", True),
    (s_tir_pass("InitMaxWithZero", _init_max_with_zero), "numerics", True),
    (s_tir_pass("AnnotateWithIntImm", _annotate_with_intimm), "round_trip", True),
    (mutate_in_place, "purity", True),
]


@pytest.mark.parametrize("broken, check, after_tiling", BROKEN, ids=[b[0].info.name for b in BROKEN])
def test_broken_pass_is_caught_and_named(broken, check, after_tiling, tmp_path):
    mod = as_module(row_max)
    with pytest.raises(VerificationError) as caught:
        run_pipeline(mod, [Tiling(), broken] if after_tiling else [broken], dump_dir=str(tmp_path), checks=CHECKS)
    err = caught.value
    assert err.pass_name == broken.info.name
    assert err.check == check
    assert broken.info.name in str(err)
    folder = err.artifacts
    assert sorted(os.listdir(folder)) == ["after.py", "before.py", "input.py", "reproduce.py"]


def test_all_negative_data_is_what_catches_a_zero_max_init():
    """On random normal data a zero init hides (row maxima are positive); the negative set shows it."""
    mod = as_module(row_max)
    with pytest.raises(VerificationError) as caught:
        run_pipeline(mod, [s_tir_pass("InitMaxWithZero", _init_max_with_zero)], checks=("numerics",))
    assert "all-negative data" in caught.value.details
    assert "random data" not in caught.value.details


def test_bounds_report_names_the_access_and_line():
    @T.prim_func(s_tir=True)
    def shifted(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi + 1]

    problems = bounds.unproven_accesses(shifted)
    assert len(problems) == 1
    assert problems[0].access == "A[vi + 1]" and problems[0].block == "B"
    assert problems[0].line is not None and "A[vi + 1]" in shifted.script().splitlines()[problems[0].line - 1]


def test_symbolic_bounds_are_proven():
    @T.prim_func(s_tir=True)
    def scale(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 16), "float32")
        B = T.match_buffer(b, (n, 16), "float32")
        for i, j in T.grid(n, 16):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(0.5)

    assert bounds.unproven_accesses(scale) == []
    assert bounds.unproven_accesses(tile_function(scale, gpu_spec("H200"))) == []


def test_reproducer_reproduces(tmp_path):
    mod = as_module(row_max)
    with pytest.raises(VerificationError) as caught:
        run_pipeline(mod, [s_tir_pass("ShortenLoop", _shorten_first_loop)], dump_dir=str(tmp_path), checks=("numerics",))
    script = os.path.join(caught.value.artifacts, "reproduce.py")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    assert "elements differ" in done.stdout
