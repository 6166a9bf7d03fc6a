"""The Gluon backend: thread-bound schedules with shared staging compile through
`compile(backend="gluon")`, compute what TVM's llvm build computes (kernels run with their layouts
erased in the interpreter), compile for sm_90 with the decided shared layouts, and agree with
gl.bank_conflicts. Unsupported schedules get a named error."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from tvm import s_tir
from tvm.script import tirx as T

from triton_codegen.gluon import GluonKernel
from triton_codegen.gluon.aot import compile_modules
from triton_codegen.gluon.bank_check import gluon_counts_of
from matmul import make_matmul
from shared_memory import schedule_matmul, schedule_matmul_tensor_core, schedule_transpose, schedule_transpose_vectorized
from tir_passes.passes.bank_conflict_free_tiling import BankConflictFreeTiling
from tir_passes.errors import LaunchError, UnsupportedConstructError
from tir_passes.contracts.shared_layout import UNCHANGED
from transpose import make_transpose
from triton_codegen import compile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCHEDULES = {
    "transpose": lambda: schedule_transpose(make_transpose(96, 64)),
    "transpose_vectorized": lambda: schedule_transpose_vectorized(make_transpose(128, 192)),
    "matmul_cuda_cores": lambda: schedule_matmul(make_matmul(64, 96, 160, "float32", "float32")),
    "matmul_tensor_cores": lambda: schedule_matmul_tensor_core(make_matmul(256, 128, 192, "float16", "float32")),
}


@pytest.fixture(scope="module")
def kernels():
    return {name: compile(make(), backend="gluon") for name, make in SCHEDULES.items()}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_the_kernel_matches_tvm_with_layouts_erased(kernels, name):
    kernel = kernels[name]
    assert isinstance(kernel, GluonKernel)
    assert kernel.check_report.ok and not kernel.check_report.skipped, str(kernel.check_report)


@pytest.mark.parametrize("name, layouts, instruction", [
    ("transpose", ["gl.SwizzledSharedLayout(4, 1, 8, [1, 0])"], None),
    ("transpose_vectorized", ["gl.SwizzledSharedLayout(4, 4, 8, [1, 0])"], None),
    ("matmul_cuda_cores", ["gl.SwizzledSharedLayout(4, 1, 8, [1, 0])", "gl.SwizzledSharedLayout(1, 1, 1, [1, 0])"],
     "gl.dot_fma"),
    ("matmul_tensor_cores", ["gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)"] * 2,
     "warpgroup_mma"),
])
def test_the_shared_layouts_are_the_pass_decisions(kernels, name, layouts, instruction):
    kernel = kernels[name]
    allocated = re.findall(r"gl\.allocate_shared_memory\([^,]+, \[[^]]*\], (.*)\)\n", kernel.source)
    assert allocated == layouts
    manifest = kernel.manifest()
    assert manifest["backend"] == "gluon"
    assert [d["kind"] for d in manifest["kernels"][0]["shared"].values()] == \
        [decision_kind(layout) for layout in layouts]
    if instruction:
        assert instruction in kernel.source


def decision_kind(layout: str) -> str:
    if "NVMMA" in layout:
        return "nvmma"
    return "unchanged" if layout.startswith("gl.SwizzledSharedLayout(1, 1, 1") else "swizzled"


def test_a_schedule_with_its_own_storage_align_compiles_with_the_pass_layout():
    """The schedule pads the tile itself (storage_align); the kernel's layout is still the pass's,
    and it computes what TVM's build of the padded schedule computes."""
    sch = s_tir.Schedule(schedule_transpose(make_transpose(96, 64)))
    sch.storage_align(sch.get_sblock("A_shared"), 0, axis=0, factor=32, offset=1)
    kernel = compile(sch.mod, backend="gluon")
    assert kernel.check_report.ok and not kernel.check_report.skipped
    assert "gl.SwizzledSharedLayout(4, 1, 8, [1, 0]))" in kernel.source
    assert "replaces the schedule's storage_align [[0, 0, 32, 1]]" in kernel.source


def test_register_layouts_follow_the_thread_bindings(kernels):
    """The vectorized transpose's staging copy: 4 consecutive columns per thread (the vectorized
    loop), 8 lanes along a row then 4 rows per warp (threadIdx.x), warps down the tile (threadIdx.y)."""
    source = kernels["transpose_vectorized"].source
    assert ("gl.DistributedLinearLayout([[0, 1], [0, 2], [16, 0], [32, 0]], [[0, 4], [0, 8], [0, 16], [0, 32], [1, 0]], "
            "[[2, 0], [4, 0], [8, 0]], [], [64, 64])") in source


@pytest.fixture(scope="module")
def compiled_for_sm90(kernels):
    """Every kernel compiled for sm_90 in one worker (starting one is most of the cost)."""
    names = sorted(SCHEDULES)
    results = compile_modules([(kernels[n].module_file(), kernels[n].program) for n in names], 90)
    return dict(zip(names, results))


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_the_kernel_compiles_for_sm90(kernels, compiled_for_sm90, name):
    kernel = kernels[name]
    (result,) = compiled_for_sm90[name]
    assert result.num_warps == kernel.program.kernels[0].num_warps
    assert result.shared_bytes >= sum(t.decision.allocated_elements * t.decision.element_bytes
                                      for t in kernel.program.kernels[0].shared)
    assert (result.mma > 0) == (name == "matmul_tensor_cores")
    if name == "transpose_vectorized":  # the float4 rows of the staging copy stay vectorized under the swizzle
        assert result.shared_instructions.get("st.shared.v4.b32", 0) > 0


def test_gluon_counts_no_conflict_where_the_model_counts_none(kernels):
    """Every register/shared layout pair of the pass's kernels: gl.bank_conflicts is 0, as the model
    says; the same kernels with row-major tiles conflict on the transposed reads."""
    decided = ("transpose", "transpose_vectorized", "matmul_cuda_cores")
    unchanged = compile(SCHEDULES["transpose_vectorized"](), backend="gluon", verify=False,
                        passes=[BankConflictFreeTiling((UNCHANGED,))])
    *counted, unchanged_counts = gluon_counts_of([kernels[name].program for name in decided] + [unchanged.program])
    for name, pairs in zip(decided, counted):
        assert pairs and all(n == 0 for _, n in pairs), name
        assert all(t.decision.after.conflicts == 0 for t in kernels[name].program.kernels[0].shared)
    counts = {pair.kind: n for pair, n in unchanged_counts}
    assert counts == {"store": 0, "load": 7}   # 8 wavefronts for one: the model's 8 -> 1 (test_bank_conflicts)


def test_arguments_are_checked_as_in_the_triton_modules(kernels):
    kernel = kernels["transpose"]
    a = torch.zeros(96, 64)
    with pytest.raises(LaunchError, match="parameter B: expected dtype float32, got float16"):
        kernel(a, torch.zeros(64, 96, dtype=torch.float16), interpret=True)
    with pytest.raises(LaunchError, match="parameter B: dimension 0 is 96, expected 64"):
        kernel(a, torch.zeros(96, 64), interpret=True)
    assert "from triton_codegen" not in kernel.source and "class LaunchError(ValueError)" in kernel.source


def test_the_module_opens_with_its_kernels_and_run(kernels):
    """As the Triton modules do: a reader meets the kernels and run() first, the runtime below."""
    source = kernels["matmul_tensor_cores"].source
    body = source[source.index('"""', 3) + 3:]
    statements = [line for line in body.splitlines() if line and not line.startswith((" ", "import ", "from ", ")"))]
    assert statements[0] == "@gluon.jit"
    run, support = source.index("\ndef run("), source.index("\n# --- what run() needs")
    assert source.rindex("\n@gluon.jit") < run < support < source.index("\ndef check_arguments(")
    assert support < source.index("\nPARAMS = ") < source.index("\nLAUNCHERS = ")


def test_the_module_refuses_the_interpreter_by_name(kernels):
    """Gluon has no interpreter: the saved module says so instead of failing inside Triton."""
    module = kernels["transpose"].module()
    if module._INTERPRETED:
        with pytest.raises(module.LaunchError, match="do not run in Triton's interpreter"):
            module.run(torch.zeros(96, 64), torch.zeros(64, 96))


def test_output_is_deterministic():
    first = compile(SCHEDULES["transpose_vectorized"](), backend="gluon", verify=False).source
    assert compile(SCHEDULES["transpose_vectorized"](), backend="gluon", verify=False).source == first


def _unsupported(schedule, message):
    with pytest.raises(UnsupportedConstructError, match=message):
        compile(schedule, backend="gluon", verify=False)


def test_a_split_that_does_not_divide_is_named():
    _unsupported(schedule_transpose(make_transpose(80, 64)), "block A_shared: has a predicate .*does not divide")


def test_a_schedule_without_thread_bindings_is_named():
    _unsupported(make_transpose(64, 64), "shared staging tiles only|blockIdx")


def test_a_tile_loop_that_is_not_a_power_of_two_is_named():
    sch = s_tir.Schedule(make_transpose(96, 96))
    i, _ = sch.get_loops(sch.get_sblock("B"))
    i0, i1 = sch.split(i, [None, 32])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    staged = sch.cache_read(sch.get_sblock("B"), 0, "shared")
    sch.compute_at(staged, i0)
    sch.bind(sch.get_loops(staged)[-2], "threadIdx.x")   # leaves a serial loop of 96 in each thread
    _unsupported(sch.mod, "has extent 96; the Gluon backend needs power-of-two tile loops")


@T.prim_func(s_tir=True)
def _scattered_staging(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    T.func_attr({"global_symbol": "scattered"})
    A_shared = T.sblock_alloc_buffer((64, 64), scope="shared")
    for j_0 in T.thread_binding(2, thread="blockIdx.y"):
        for i_0 in T.thread_binding(2, thread="blockIdx.x"):
            for ax0 in range(32):
                for ax1 in T.thread_binding(32, thread="threadIdx.x"):
                    with T.sblock("A_shared"):
                        v0 = T.axis.spatial(64, i_0 * 32 + ax0)
                        v1 = T.axis.spatial(64, j_0 * 32 + ax1 * 5 % 32)   # a bijection, but not bit-linear
                        A_shared[v0, v1] = A[v0, v1]
            for j_1 in range(32):
                for i_1 in T.thread_binding(32, thread="threadIdx.x"):
                    with T.sblock("B"):
                        vi = T.axis.spatial(64, i_0 * 32 + i_1)
                        vj = T.axis.spatial(64, j_0 * 32 + j_1)
                        B[vj, vi] = A_shared[vi, vj]


def test_threads_that_do_not_map_linearly_are_named():
    _unsupported(_scattered_staging, "block A_shared: the thread bindings do not map "
                 "threads to the block's tile linearly")


def test_shared_layouts_come_from_the_pass_only():
    with pytest.raises(UnsupportedConstructError, match="has no layout decision: run BankConflictFreeTiling"):
        compile(schedule_transpose(make_transpose(64, 64)), backend="gluon", verify=False, passes=[])


def test_cli_compiles_with_the_gluon_backend(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "triton_codegen.cli", "compile",
                           os.path.join(ROOT, "examples", "shared_memory.py") + ":transpose_shared", "--backend", "gluon",
                           "--no-verify", "-o", str(tmp_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())["modules"]["transpose.py"]
    assert manifest["backend"] == "gluon" and manifest["kernels"][0]["shared"]["A_shared"]["kind"] == "swizzled"
    assert "@gluon.jit" in next(tmp_path.glob("*.py")).read_text()
