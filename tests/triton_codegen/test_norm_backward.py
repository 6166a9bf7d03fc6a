"""Norms' backward as one walk of the rows (RowPartials, docs/autodiff.md): d_X and the column partials of
the weight gradients in one kernel, the partials summed by a second; the record, against torch autograd
(fp32, rel. 1e-3) in the interpreter, for norms written in different ways."""

import torch
import torch.nn.functional as F
from tvm.script import tirx as T

from helpers import compile_and_check
from tir_passes import differentiate
from tir_passes.contracts.row_partials import row_partials
from tir_passes.passes.row_partials import row_partials as rewrite
from tir_passes.contracts.gpu_specs import gpu_spec
from triton_codegen import compile

from test_backward_kernels import run_backward, torch_reference

ROWS, COLS = 64, 24


def ln(x, g, b):
    return F.layer_norm(x, (COLS,), g, b, 1e-5)


def _check(func, names, reference, shapes, kernels, aot=False):
    backward = differentiate(func, names)
    # aot: the kernel against TVM's llvm build too, and compiled for sm_90/sm_80
    kernel = compile_and_check(backward, verify=False) if aot else compile(backward, verify=False)
    assert len(kernel.program.kernels) == kernels, kernel.source.count("# TIR blocks")
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator) for shape in shapes]
    _, grad, expected = torch_reference(reference, inputs)
    params = [p.name for p in func.params[:len(shapes)]]
    ours = run_backward(kernel, backward, params, inputs, grad, {})
    for param, value in zip(params, expected):
        if param not in names:
            continue
        error = ((ours[param] - value).abs().max() / value.abs().max()).item()
        assert error <= 1e-3, f"d{param} differs from torch autograd by {error:.2e} (relative)"
    return backward, kernel


def test_layernorm_backward_is_one_row_kernel_and_a_sum_of_partials():
    import layernorm

    backward, kernel = _check(layernorm.make_layernorm(ROWS, COLS), ["X", "gamma", "beta"], ln,
                              [(ROWS, COLS), (COLS,), (COLS,)], kernels=2, aot=True)
    rows_kernel = kernel.source.split("# TIR blocks: ")[1].splitlines()[0]
    assert rows_kernel.startswith("mean, var") and rows_kernel.endswith(
        "d_gamma_from_normalize_rows, d_beta_from_normalize_rows")
    # X and d_Y are each loaded once per row in the row kernel (every block reads the same whole-row tile),
    # the next row's issued a row ahead (Tiling's prefetch): one load before the walk, one in it
    first = _row_kernel(kernel)
    assert first.count("tl.load(X_ptr") == 2 and first.count("tl.load(d_Y_ptr") == 2
    assert _prefetched(kernel) == ["X", "d_Y"]


def _row_kernel(kernel) -> str:
    """The row kernel's text (after the helpers the module writes first: the sums reduced together)."""
    return next(k for k in kernel.source.split("@triton.jit")[1:] if "_kernel0(" in k.split("\n", 2)[1])


def _prefetched(kernel) -> list[str]:
    """The buffers whose rows the row kernel's walk loads ahead (Tiling's LoopPrefetch, in the tile IR)."""
    walk = next(stmt for stmt in kernel.program.kernels[0].body if hasattr(stmt, "prefetched"))
    return [prefetch.first[0].buffer for prefetch in walk.prefetched]


def test_the_decision_is_a_typed_record_in_the_dump(tmp_path):
    import layernorm

    backward = differentiate(layernorm.make_layernorm(ROWS, COLS), ["X", "gamma", "beta"])
    [plan] = row_partials(rewrite(backward, gpu_spec("H200")))
    assert plan.taken and (plan.rows_per_program, plan.programs) == (16, 4)
    assert plan.column_blocks == ("d_gamma_from_normalize", "d_beta_from_normalize")
    assert plan.partials == ("d_gamma_rows", "d_beta_rows") and plan.row_blocks[:2] == ("mean", "var")
    compile(backward, verify=False, dump_dir=str(tmp_path))
    dumped = next(p for p in sorted(tmp_path.iterdir()) if p.name.endswith("RowPartials.py")).read_text()
    assert '"rows.partials"' in dumped and '"rows_per_program": 16' in dumped
    tiled = next(p for p in sorted(tmp_path.iterdir()) if p.name.endswith("_Tiling.py")).read_text()
    assert '"prefetch": {"buffers": ["X", "d_Y"], "distance": 1' in tiled   # the walk's row loads, one ahead


def test_both_moments_in_one_block_keep_the_plan():
    """LayerNorm written with the sum and the sum of squares in one block: the same two kernels."""
    import layernorm_moments

    backward, kernel = _check(layernorm_moments.make_layernorm_moments(ROWS, COLS), ["X", "gamma", "beta"], ln,
                              [(ROWS, COLS), (COLS,), (COLS,)], kernels=2)
    [plan] = row_partials(rewrite(backward, gpu_spec("H200")))
    assert plan.taken and plan.row_blocks[0] == "moments" and _prefetched(kernel) == ["X", "d_Y"]


def make_rms_static(rows: int):
    """RMSNorm written differently: static rows, other names, a mean of squares."""

    @T.prim_func(s_tir=True)
    def rms_static(A: T.Buffer((rows, 20), "float32"), scale: T.Buffer((20,), "float32"),
                   B: T.Buffer((rows, 20), "float32")):
        ms = T.sblock_alloc_buffer((rows,), "float32")
        for row, col in T.grid(rows, 20):
            with T.sblock("mean_square"):
                r, c = T.axis.remap("SR", [row, col])
                with T.init():
                    ms[r] = T.float32(0)
                ms[r] = ms[r] + A[r, c] * A[r, c] / T.float32(20)
        for row, col in T.grid(rows, 20):
            with T.sblock("out"):
                r, c = T.axis.remap("SS", [row, col])
                B[r, c] = scale[c] * (A[r, c] / T.sqrt(ms[r] + T.float32(1e-6)))

    return rms_static


rms_static = make_rms_static(48)
rms_prime_rows = make_rms_static(37)


def rms_reference(a, s):
    return s * (a / torch.sqrt((a * a).mean(-1, keepdim=True) + 1e-6))


def test_rmsnorm_written_differently_keeps_the_plan():
    backward, kernel = _check(rms_static, ["A", "scale"], rms_reference, [(48, 20), (20,)], kernels=2)
    [plan] = row_partials(rewrite(backward, gpu_spec("H200")))
    assert plan.taken and plan.column_blocks == ("d_scale_from_out",) and plan.rows_per_program == 16
    assert _prefetched(kernel) == ["A", "d_B"]   # other names, the same prefetch


def test_rmsnorm_without_weight_has_no_partials():
    backward, _ = _check(rms_static, ["A"], rms_reference, [(48, 20), (20,)], kernels=1)
    assert row_partials(rewrite(backward, gpu_spec("H200"))) == []


def test_symbolic_rows_are_one_predicated_walk_that_verifies():
    """examples/rmsnorm.py (symbolic rows): cdiv(rows, 64) programs of 64 rows, the last one's rows past `rows`
    masked by a predicate the bounds check proves: 2 kernels as for static rows, compiled with every check,
    right at 37 rows (one ragged program), 64 (one whole), 150 (two whole and a ragged one) and 1."""
    import rmsnorm

    def reference(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w

    backward = differentiate(rmsnorm.make_rmsnorm(20), ["X", "weight"])
    [plan] = row_partials(rewrite(backward, gpu_spec("H200")))
    assert plan.taken and plan.rows_per_program == 64 and "symbolic" in plan.reason
    assert plan.partial_blocks == ("d_weight_from_normalize_rows",)
    kernel = compile(backward)   # verify=True: bounds, numerics, contracts, every check
    assert len(kernel.program.kernels) == 2
    rows_kernel = _row_kernel(kernel)
    assert rows_kernel.count("tl.load(X_ptr") == 2 and rows_kernel.count("tl.load(d_Y_ptr") == 2   # + the prefetch
    # the ragged rows' early loads are masked by their clamped row: min(r + 1, 63) < rows
    assert _prefetched(kernel) == ["X", "d_Y", "weight"] and "tl.minimum((r + 1), 63)) < rows)" in rows_kernel
    # the predicated rows together write every row of d_X (param_reads.py): an output the op allocates
    assert "OUTPUTS = ('d_X', 'd_weight')" in kernel.source
    for rows in (37, 64, 150, 1):
        generator = torch.Generator().manual_seed(rows)
        inputs = [torch.randn(shape, generator=generator) for shape in ((rows, 20), (20,))]
        _, grad, expected = torch_reference(reference, inputs)
        ours = run_backward(kernel, backward, ["X", "weight"], inputs, grad, {})
        for param, value in zip(["X", "weight"], expected):
            error = ((ours[param] - value).abs().max() / value.abs().max()).item()
            assert error <= 1e-3, f"{rows} rows: d{param} differs from torch autograd by {error:.2e} (relative)"


def test_static_rows_without_a_near_divisor_take_a_ragged_last_program():
    """37 static rows (prime): no divisor within [16, 32], so 3 programs of 16 rows, the last one predicated
    (before: the smallest divisor at least 16, 37 itself, one program walking every row)."""
    backward = differentiate(rms_prime_rows, ["A", "scale"])
    [plan] = row_partials(rewrite(backward, gpu_spec("H200")))
    assert (plan.rows_per_program, plan.programs) == (16, 3) and "ragged" in plan.reason
    _check(rms_prime_rows, ["A", "scale"], rms_reference, [(37, 20), (20,)], kernels=2)
    compile(backward)   # every check


def test_deterministic_row_partials_verify_against_tvm():
    """deterministic=True on both norms' backward (LayerNorm at 40 static rows, RMSNorm's symbolic rows): the
    row walk's column partials add their rows serially (no tl.sum, so no layout pin: a pinned 16-wide column
    tile of a 24-wide row had been walked in chunks its one accumulator did not hold, writing d_gamma from
    stale columns, 2026-12-02), and every check passes, the kernel against TVM's build included."""
    import layernorm
    import rmsnorm

    for func, names in ((layernorm.make_layernorm(40, COLS, "float32"), ["X", "gamma", "beta"]),
                        (rmsnorm.make_rmsnorm(COLS), ["X", "weight"])):
        kernel = compile(differentiate(func, names), deterministic=True)   # verify=True
        assert kernel.check_report.ok, kernel.check_report
        assert "for j_0 in range(" not in _row_kernel(kernel)   # no column chunks in the walk
