"""Tensor-descriptor (TMA) variants: which accesses a kernel's `_tma` variant makes through
descriptors, that both variants compute the same as TVM in the interpreter, that both compile
ahead of time (the variant with TMA copies for sm_90), and how the launcher picks one."""

import pytest
import torch
from tvm.script import tirx as T

from helpers import compile_and_check
from lowering.rewrites.tile_access import with_tile_accesses
from triton_codegen import check_against_tvm, compile
from triton_codegen.aot import compile_ahead_of_time
from triton_codegen.configs import config_space
from triton_codegen.descriptors import plan_descriptors
from tir_passes.passes.tile_sizes import WIDE_STAGES

from attention import make_attention
from batch_matmul import make_batch_matmul
from matmul import make_matmul
from softmax import make_softmax
from transpose import make_transpose


@T.prim_func(s_tir=True)
def lower_triangle(X: T.Buffer((40, 48), "float32"), Y: T.Buffer((40, 48), "float32")):
    for i, j in T.grid(40, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            if vj <= vi:
                Y[vi, vj] = X[vi, vj] * T.float32(2)


@T.prim_func(s_tir=True)
def permute3d(A: T.Buffer((4, 8, 12), "float32"), B: T.Buffer((12, 4, 8), "float32")):
    for k, i, j in T.grid(12, 4, 8):
        with T.sblock("B"):
            vk, vi, vj = T.axis.remap("SSS", [k, i, j])
            B[vk, vi, vj] = A[vi, vj, vk] * T.float32(3)


@T.prim_func(s_tir=True)
def add_in_place(A: T.Buffer((32, 48), "float32"), B: T.Buffer((32, 48), "float32")):
    for i, j in T.grid(32, 48):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = B[vi, vj] + A[vi, vj]


@T.prim_func(s_tir=True)
def threshold(X: T.Buffer((32, 48), "float32"), Y: T.Buffer((32, 48), "bool")):
    for i, j in T.grid(32, 48):
        with T.sblock("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] > T.float32(0)


# sizes whose rows are multiples of 16 bytes, so the descriptor variant runs; tiles do not divide them
ALIGNED = {
    "matmul": (make_matmul(67, 48, 40), {"A": ("A", ("BLOCK_M", "BLOCK_K")), "B": ("B", ("BLOCK_K", "BLOCK_N"))}),
    "batch_matmul": (make_batch_matmul(3, 37, 32, 24), {"A": ("A", (None, "BLOCK_M", "BLOCK_K"))}),
    "transpose": (make_transpose(36, 44), {"B": ("B", ("BLOCK_J", "BLOCK_I"))}),
    "lower_triangle": (lower_triangle, {"X": ("X", ("BLOCK_I", "BLOCK_J"))}),
    "permute3d": (permute3d, {"B": ("B", ("BLOCK_K", None, "BLOCK_J"))}),
}


def _plan(kernel):
    (tile_kernel,) = with_tile_accesses(kernel.program).kernels
    return tile_kernel, plan_descriptors(tile_kernel)


@pytest.mark.parametrize("name", sorted(ALIGNED))
def test_both_variants_match_tvm_in_the_interpreter(name, monkeypatch):
    func, expected = ALIGNED[name]
    kernel = compile_and_check(func)  # the descriptor variant: checked, and compiled for sm_90
    module = kernel.module()
    assert set(module.VARIANTS_RUN.values()) == {"descriptors"}
    (descriptors,) = module.DESCRIPTORS.values()
    for buffer, (param_buffer, blocks) in expected.items():
        assert (param_buffer, blocks) in descriptors.values(), f"{buffer} has no descriptor {blocks}"
    monkeypatch.setattr(module, "USE_DESCRIPTORS", False)
    report = check_against_tvm(kernel, func)
    assert report.ok, str(report)
    assert all(ran.startswith("pointers: descriptors switched off") for ran in module.VARIANTS_RUN.values())


def test_the_variant_loads_through_descriptors_and_stores_a_contraction_through_pointers():
    """A plain contraction's output tile is stored with masked pointer stores from registers: a TMA
    store would stage it in shared memory beside the operand stages (gemm_price.CONTRACTION_OUTPUT_STORE)."""
    kernel = compile(make_matmul(67, 45, 33), verify=False)
    variant = kernel.source[kernel.source.index("def matmul_kernel0_tma("):kernel.source.index("\nCONFIGS = ")]
    assert "A_desc.load([(i_0 * BLOCK_M), (k_0 * BLOCK_K)])" in variant
    # B's buffer axes are (k, j); the kernel holds the tile as (j, k)
    assert "B_tile = tl.trans(B_desc.load([(k_0 * BLOCK_K), (j_0 * BLOCK_N)]))" in variant
    assert "tl.load(" not in variant and "C_desc" not in variant
    assert "tl.store(C_ptr + " in variant and "mask=mask_i[:, None] & mask_j[None, :]" in variant
    _, plan = _plan(kernel)
    assert plan.stores == "pointers" and [d.buffer for d in plan.descriptors] == ["A", "B"]


def test_stores_stay_on_descriptors_outside_plain_contractions(monkeypatch):
    """A transpose stores through its descriptor; attention (a contraction reading another's
    result) keeps its output's; a plain contraction too when the switch says descriptors."""
    from tir_passes.contracts import gemm_price

    _, plan = _plan(compile(make_transpose(36, 44), verify=False))
    assert plan.stores == "descriptors" and "B" in [d.buffer for d in plan.descriptors]
    _, plan = _plan(compile(make_attention(1, 2, 64, 16), verify=False))
    assert plan.stores == "descriptors" and "O" in [d.buffer for d in plan.descriptors]
    monkeypatch.setattr(gemm_price, "CONTRACTION_OUTPUT_STORE", "descriptors")
    kernel = compile(make_matmul(67, 45, 33), verify=False)
    assert "C_desc.store([(i_0 * BLOCK_M), (j_0 * BLOCK_N)], acc_C_1)" in kernel.source


def test_a_predicate_masks_the_loaded_tile_and_keeps_its_store_on_pointers():
    kernel = compile(lower_triangle, verify=False)
    variant = kernel.source[kernel.source.index("def lower_triangle_kernel0_tma("):kernel.source.index("\nCONFIGS = ")]
    assert "tl.where(" in variant and "X_desc.load(" in variant
    assert "tl.store(Y_ptr" in variant


def test_accesses_that_stay_on_pointers():
    # whole rows (one tile axis) stream as vector loads: softmax at a realistic width has no variant
    assert _plan(compile(make_softmax(256, 4096, "float16"), verify=False))[1] is None
    # a buffer read and written by one kernel (a TMA store would need fences before the next read)
    # stays on pointers; the other operand goes through its descriptor
    _, plan = _plan(compile(add_in_place, verify=False))
    assert [d.buffer for d in plan.descriptors] == ["A"]
    # bool has no TMA element type: the output stays on pointers, the input goes through its descriptor
    _, plan = _plan(compile(threshold, verify=False))
    assert [d.buffer for d in plan.descriptors] == ["X"]


def test_variants_compile_ahead_of_time():
    kernel = compile(make_matmul(3000, 5000, 1000), verify=False)
    tile_kernel, plan = _plan(kernel)
    config = config_space(tile_kernel)[0]
    variant = compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=plan)
    pointers = compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90)
    assert variant.kernel == "matmul_kernel0_tma" and variant.tma_copies >= 2  # A and B at least
    # the size model's tiles for it on sm_90 (128×256) fit with the output stored through pointers
    assert (config["BLOCK_M"], config["BLOCK_N"], config["num_stages"]) == (128, 256, WIDE_STAGES)
    assert variant.shared_bytes is not None and variant.shared_bytes <= 232448
    assert pointers.tma_copies == 0
    assert compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 80).tma_copies == 0


# --- the launcher's choice -------------------------------------------------------------------
M, N, K = 67, 48, 40


@pytest.fixture(scope="module")
def matmul():
    return compile(make_matmul(M, N, K), verify=False)


def _operands(a=None, b=None):
    generator = torch.Generator().manual_seed(0)
    a = a if a is not None else torch.randn(M, K, generator=generator).to(torch.float16)
    b = b if b is not None else torch.randn(K, N, generator=generator).to(torch.float16)
    return a, b, torch.full((M, N), float("nan"))


def _run(matmul, a, b, c):
    matmul(a, b, c)
    torch.testing.assert_close(c, a.double().matmul(b.double()).float(), rtol=1e-3, atol=1e-3)
    return matmul.module().VARIANTS_RUN["matmul_kernel0"]


def test_contiguous_aligned_tensors_run_the_descriptor_variant(matmul):
    assert _run(matmul, *_operands()) == "descriptors"


def test_a_transposed_operand_runs_the_pointer_variant(matmul):
    a, b, c = _operands()
    ran = _run(matmul, a.t().contiguous().t(), b, c)
    assert ran == "pointers: A has last stride 67: TMA needs 1"


def test_a_misaligned_operand_runs_the_pointer_variant(matmul):
    a, b, c = _operands()
    shifted = torch.empty(M * K + 1, dtype=torch.float16)[1:].view(M, K)
    shifted.copy_(a)
    assert _run(matmul, shifted, b, c) == "pointers: A starts at an address that is not a multiple of 16 bytes"


def test_rows_that_are_not_multiples_of_16_bytes_run_the_pointer_variant(matmul):
    a, b, c = _operands()
    padded = torch.zeros(M, K + 1, dtype=torch.float16)[:, :K]  # 82-byte rows
    padded.copy_(a)
    ran = _run(matmul, padded, b, c)
    assert ran == "pointers: A.stride(0) is 41 elements (82 bytes): TMA needs a positive multiple of 16 bytes"


def test_gpus_before_sm_90_run_the_pointer_variant(matmul, monkeypatch):
    module = matmul.module()
    monkeypatch.setattr(module, "_INTERPRETED", False)  # the capability is asked of the device then
    monkeypatch.setitem(module._CAPABILITIES, None, (8, 0))
    a, b, c = _operands()
    assert module._descriptor_problem({"A": a}, {"A_desc": ("A", (16, 16))}, module.launch_directly) == \
        "sm_80 has no TMA (sm_90 or newer)"
    monkeypatch.setitem(module._CAPABILITIES, None, (9, 0))
    assert module._descriptor_problem({"A": a}, {"A_desc": ("A", (16, 16))}, module.launch_directly) is None


def test_launches_through_a_wrapper_take_the_pointer_variant(matmul):
    module = matmul.module()
    a, _, _ = _operands()
    wrapped = module._descriptor_problem({"A": a}, {"A_desc": ("A", (16, 16))}, lambda kernel: ("wrapped", kernel))
    assert wrapped.startswith("launched through a wrapper")


def test_block_rows_under_16_bytes_run_the_pointer_variant(matmul):
    module = matmul.module()
    a, _, _ = _operands()
    assert module._descriptor_problem({"A": a}, {"A_desc": ("A", (16, 4))}, module.launch_directly) == \
        "A's block rows are 8 bytes: TMA needs 16 or more"


def test_a_variant_that_does_not_fit_falls_back_to_pointers(matmul, monkeypatch):
    from triton.runtime.errors import OutOfResources

    class TooLarge:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise OutOfResources(300000, 232448, "shared memory")
            return launch

    module = matmul.module()
    monkeypatch.setattr(module, "matmul_kernel0_tma", TooLarge())
    ran = _run(matmul, *_operands())
    assert ran.startswith("pointers: the descriptor variant does not fit this GPU (out of resource: shared memory")


def test_tiles_that_divide_every_tensor_run_the_pointer_variant(matmul):
    """The pointer kernel is then unmasked, and measured faster than descriptors on the H200."""
    module = matmul.module()
    a = torch.zeros(64, 48, dtype=torch.float16)
    problem = module._descriptor_problem
    assert problem({"A": a}, {"A_desc": ("A", (16, 16))}, module.launch_directly, "pointers") == \
        "every tile divides its tensor: the pointer kernel needs no masks"
    assert problem({"A": a}, {"A_desc": ("A", (32, 32))}, module.launch_directly, "pointers") is None
    # a plan that measured descriptors faster on dividing tiles keeps them there
    assert problem({"A": a}, {"A_desc": ("A", (16, 16))}, module.launch_directly, "descriptors") is None


def test_a_loop_whose_contraction_reads_another_keeps_descriptors_where_tiles_divide():
    """Attention's P·V reads Q·Kᵀ in the key loop: descriptors measured 4-20% faster there; a
    matmul's independent K steps stay on unmasked pointers."""
    [attention_kernel] = with_tile_accesses(compile(make_attention(1, 2, 64, 16), verify=False).program).kernels
    plan = plan_descriptors(attention_kernel)
    assert plan.divided == "descriptors" and plan.why.startswith("loop j_0: a contraction reads another's result")
    [matmul_kernel] = with_tile_accesses(compile(make_matmul(64, 64, 256), verify=False).program).kernels
    assert plan_descriptors(matmul_kernel).divided == "pointers"


def test_a_chained_loop_of_tf32_dots_runs_pointers_where_tiles_divide():
    """fp32 attention under TF32 (two head sizes): its key loop chains two dots like fp16 attention's,
    but there the pointer kernel measured 5-7% faster (docs/hopper-loads.md); in IEEE precision, not
    measured, the loop keeps the 16-bit rule."""
    for head in (16, 32):
        program = compile(make_attention(1, 2, 64, head, dtype="float32"), verify=False,
                          float32_matmul_precision="high").program
        [kernel] = with_tile_accesses(program).kernels
        plan = plan_descriptors(kernel)
        assert plan.divided == "pointers" and "TF32" in plan.why, plan
    program = compile(make_attention(1, 2, 64, 16, dtype="float32"), verify=False).program
    [kernel] = with_tile_accesses(program).kernels
    assert plan_descriptors(kernel).divided == "descriptors"



def test_the_tf32_rule_holds_for_causal_attention_however_its_mask_is_written():
    """The same causal program written with its mask as a block or inline in the scores' expression."""
    from attention_causal import make_causal_attention
    from attention_forms import make_attention_inline_mask

    for make in (make_causal_attention, make_attention_inline_mask):
        program = compile(make(1, 2, 64, 16, dtype="float32"), verify=False, float32_matmul_precision="high").program
        [kernel] = with_tile_accesses(program).kernels
        assert plan_descriptors(kernel).divided == "pointers", make.__name__


def test_rows_that_start_inside_16_bytes_stay_on_pointers():
    """`A[i, j + 1]` in fp32 starts its rows 4 bytes in: a TMA copy there faults on the H200."""

    @T.prim_func(s_tir=True)
    def shifted(A: T.Buffer((36, 45), "float32"), B: T.Buffer((36, 44), "float32")):
        for i, j in T.grid(36, 44):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj + 1] * T.float32(2)

    _, plan = _plan(compile(shifted, verify=False))
    assert plan is not None and [d.buffer for d in plan.descriptors] == ["B"]


def test_the_wide_tiles_of_a_backward_with_transposed_operands_fit_the_h200():
    """matmul's backward (dC·Bᵀ, Aᵀ·dC) at 128×256 and 4 stages asked for 245,760 bytes of shared
    memory on the H200 (the final suite run of 2026-12-02), where the price counted 196,608: its fp32
    dC is staged at 4 bytes and, as dB's MMA B operand, again after the cast to fp16. The price
    counts that (DotNest.staged_bytes): with dC rounded in the dots (RoundOperandsOnce disabled), 4
    stages wherever Triton's 4-stage kernel fits (the forward, dA), 3 where it does not (dB); with dC
    rounded once (the default), both dots are fp16 GEMMs at 4 stages, after the rounding kernel.
    Every default fits in both variants."""
    from tir_passes import differentiate

    forward = make_matmul(4096, 4096, 4096, "float16", "float32")
    backward = differentiate(forward, ["A", "B"])
    stages = {}
    for label, func, disable in (("", forward, ()), ("cast in the dots: ", backward, ("RoundOperandsOnce",)),
                                 ("rounded once: ", backward, ())):
        kernel = compile(func, verify=False, disable=disable)
        for tile_kernel in with_tile_accesses(kernel.program).kernels:
            config = config_space(tile_kernel)[0]
            plan = plan_descriptors(tile_kernel)
            for built in (compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90, plan=plan),
                          compile_ahead_of_time(kernel.module_file(), tile_kernel, config, 90)):
                assert built.shared_bytes is not None and built.shared_bytes <= 232448, (tile_kernel.name, config)
            if tile_kernel.group_m is None:   # the rounding kernel: elementwise, no dot
                continue
            four = config if config["num_stages"] == 4 else {**config, "num_stages": 4}
            at_four = compile_ahead_of_time(kernel.module_file(), tile_kernel, four, 90, plan=plan).shared_bytes
            stages[label + tile_kernel.name] = (config["num_stages"], at_four <= 232448)
    assert stages == {"matmul_kernel0": (4, True), "cast in the dots: matmul_backward_kernel0": (4, True),
                      "cast in the dots: matmul_backward_kernel1": (3, False),
                      "rounded once: matmul_backward_kernel1": (4, True),
                      "rounded once: matmul_backward_kernel2": (4, True)}, stages
