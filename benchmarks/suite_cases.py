"""The benchmark suite's cases (the generating side, with TVM): programs as users write them
(examples/), at the sizes issue 11 measures and at tiny sizes for the smoke run, with the bytes
and flops they must move and compute, and the goal each is measured against.

`program` names the torch side (benchmarks/suite_torch.py: the float64 reference and the peers).
A goal is data the run evaluates: a fraction of the measured device-copy bandwidth, a speed ratio
against a peer (the peer's time over ours; BEST: whichever peer was fastest in the run), a time
limit, a kernel count. Goals are issue 17's, against the best peer.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

from attention import make_attention  # noqa: E402
from attention_causal import make_causal_attention  # noqa: E402
from attention_forms import make_attention_inline_mask, make_attention_normalize_first  # noqa: E402
from attention_scores import make_attention_scores  # noqa: E402
from bias_gelu_residual import make_bias_gelu_residual  # noqa: E402
from layernorm import make_layernorm  # noqa: E402
from layernorm_moments import make_layernorm_moments  # noqa: E402
from linear import make_linear  # noqa: E402
from matmul import make_matmul, make_matmul_rounded  # noqa: E402
from quantize_int8 import make_quantize_int8  # noqa: E402
from rmsnorm import make_rmsnorm  # noqa: E402
from softmax import make_softmax  # noqa: E402
from swiglu import make_swiglu  # noqa: E402
from transpose import make_transpose  # noqa: E402

from tir_passes import differentiate, training_forward  # noqa: E402
from tir_passes.contracts.autodiff import signature  # noqa: E402


@dataclass(frozen=True)
class Goal:
    copy_fraction: float | None = None            # of the device copy's bandwidth, in the same run
    versus: tuple[tuple[str, float], ...] = ()    # (peer, minimum of the peer's time / ours)
    max_us: float | None = None
    kernels: int | None = None
    baseline: tuple[str, float] | None = None     # (another case of the run, the most ours may be slower)

    def as_json(self) -> dict:
        return {"copy_fraction": self.copy_fraction, "versus": [list(v) for v in self.versus],
                "max_us": self.max_us, "kernels": self.kernels,
                "baseline": list(self.baseline) if self.baseline else None}


@dataclass(frozen=True)
class Case:
    name: str
    program: str                                  # suite_torch.PROGRAMS key
    make: Callable[[dict], object]                # sizes -> PrimFunc
    full: dict
    smoke: dict
    bytes: Callable[[dict], int]                  # floor: every input read once, every output written once
    flops: Callable[[dict], int] = lambda s: 0
    goal: Goal = field(default_factory=Goal)
    shape_vars: Callable[[dict], dict] = lambda s: {}   # symbolic sizes the module binds from tensors
    deterministic: bool = False                   # compile(deterministic=True) (docs/determinism.md)
    options: dict = field(default_factory=dict)   # other compile() options (float32_matmul_precision)
    # a backward with saved forward values: sizes -> its training forward (tir_passes.training_forward), which the
    # run executes first to make the saved values the backward takes; only the backward is timed
    training: Callable[[dict], object] | None = None


def _saved_backward(make_forward: Callable[[dict], object], wrt: list[str]) -> dict:
    """A backward case's `make` and `training`: the backward with the intermediates saved that the cost rule
    saves (differentiate(save="auto")), and the training forward that writes them."""
    def make(s):
        return differentiate(make_forward(s), wrt, save="auto")

    def training(s):
        return training_forward(make_forward(s), signature(make(s)).saved)
    return dict(make=make, training=training)


BEST = "the best peer"   # suite_report.BEST: the goal is against the fastest peer of the run
ROWS = dict(M=16384, N=8192)
BANDWIDTH = Goal(copy_fraction=0.95, versus=(("torch.compile", 1.0),))


def _rows_bytes(s: dict) -> int:
    return 2 * s["M"] * s["N"] * 2


def _matmul_bytes(s: dict) -> int:
    return (s["M"] * s["K"] + s["K"] * s["N"]) * 2 + s["M"] * s["N"] * 4


def _fp16_gemm_bytes(s: dict) -> int:
    """Both operands and the output, 2 bytes each (a linear layer's W is N×K, a matmul's B K×N: the same count)."""
    return (s["M"] * s["K"] + s["N"] * s["K"] + s["M"] * s["N"]) * 2


def _gemm_flops(s: dict) -> int:
    return 2 * s["M"] * s["N"] * s["K"]


# the matmul products the suite times (name, full sizes, smoke sizes, the goal's share of the best peer)
MATMUL_SHAPES = (("4096", dict(M=4096, N=4096, K=4096), dict(M=67, N=48, K=40), 1.0),
                 ("8192", dict(M=8192, N=8192, K=8192), dict(M=64, N=32, K=48), 1.0),
                 ("3000x5000x1000", dict(M=3000, N=5000, K=1000), dict(M=37, N=45, K=21), 0.90))


def _matmul_cases(program: str, make, floor_bytes) -> tuple:
    """One case a shape of MATMUL_SHAPES, `program`'s (a suite_torch.PROGRAMS key and the case's name)."""
    return tuple(Case(f"{program}_fp16_{name}", program, lambda s: make(s["M"], s["N"], s["K"]), full, smoke,
                      floor_bytes, _gemm_flops, Goal(versus=((BEST, share),)))
                 for name, full, smoke, share in MATMUL_SHAPES)


def _swiglu_bytes(s: dict) -> int:
    return (s["M"] * s["K"] + 2 * s["N"] * s["K"] + s["M"] * s["N"]) * 2


def _attention_flops(s: dict, causal: bool) -> int:
    full = 4 * s["B"] * s["H"] * s["S"] * s["S"] * s["D"]  # Q·Kᵀ and P·V
    return full // 2 if causal else full


CASES = (
    Case("softmax_fp16_16384x8192", "softmax", lambda s: make_softmax(s["M"], s["N"], "float16"),
         ROWS, dict(M=37, N=48), _rows_bytes, goal=BANDWIDTH),
    Case("rmsnorm_fp16_16384x8192", "rmsnorm", lambda s: make_rmsnorm(s["N"], "float16"),
         ROWS, dict(M=37, N=48), _rows_bytes, goal=BANDWIDTH, shape_vars=lambda s: {"rows": s["M"]}),
    Case("layernorm_fp16_16384x8192", "layernorm", lambda s: make_layernorm(s["M"], s["N"], "float16"),
         ROWS, dict(M=37, N=48), _rows_bytes, goal=BANDWIDTH),
    Case("layernorm_moments_fp16_16384x8192", "layernorm",
         lambda s: make_layernorm_moments(s["M"], s["N"], "float16"),
         ROWS, dict(M=37, N=48), _rows_bytes, goal=BANDWIDTH),
    Case("bias_gelu_residual_fp16_16384x8192", "bias_gelu_residual",
         lambda s: make_bias_gelu_residual(s["M"], s["N"], "float16"),
         ROWS, dict(M=37, N=48), lambda s: 3 * s["M"] * s["N"] * 2, goal=BANDWIDTH),
    Case("transpose_fp32_4096", "transpose", lambda s: make_transpose(s["M"], s["N"], "float32"),
         dict(M=4096, N=4096), dict(M=36, N=44), lambda s: 2 * s["M"] * s["N"] * 4, goal=BANDWIDTH),
    *_matmul_cases("matmul", make_matmul, _matmul_bytes),
    # the same products as torch.matmul computes them: a float32 accumulator rounded to a float16 C, so ours
    # writes the bytes cuBLAS writes (the float32 C above writes twice as many)
    *_matmul_cases("matmul_rounded", make_matmul_rounded, _fp16_gemm_bytes),
    Case("linear_decode_fp16_16x4096x4096", "linear", lambda s: make_linear(s["M"], s["N"], s["K"]),
         dict(M=16, N=4096, K=4096), dict(M=16, N=64, K=512), _fp16_gemm_bytes,   # memory-bound: rated in bytes
         goal=Goal(copy_fraction=0.80, versus=((BEST, 1.0),))),
    Case("linear_fp16_8192x11008x4096", "linear", lambda s: make_linear(s["M"], s["N"], s["K"]),
         dict(M=8192, N=11008, K=4096), dict(M=40, N=48, K=32), _fp16_gemm_bytes,
         _gemm_flops, Goal(versus=((BEST, 1.0),))),
    Case("attention_scores_fp16_4096x4096x128", "attention_scores",
         lambda s: make_attention_scores(s["M"], s["N"], s["D"]),
         dict(M=4096, N=4096, D=128), dict(M=37, N=48, D=32),
         lambda s: (s["M"] + s["N"]) * s["D"] * 2 + s["M"] * s["N"] * 4,
         lambda s: 2 * s["M"] * s["N"] * s["D"], Goal(max_us=26.0)),
    Case("attention_fp16_b4h32s4096d128", "attention", lambda s: make_attention(s["B"], s["H"], s["S"], s["D"]),
         dict(B=4, H=32, S=4096, D=128), dict(B=1, H=2, S=37, D=16),
         lambda s: 4 * s["B"] * s["H"] * s["S"] * s["D"] * 2, lambda s: _attention_flops(s, causal=False),
         Goal(versus=((BEST, 0.90),), kernels=1)),
    Case("attention_causal_fp16_b4h32s4096d128", "attention_causal",
         lambda s: make_causal_attention(s["B"], s["H"], s["S"], s["D"]),
         dict(B=4, H=32, S=4096, D=128), dict(B=1, H=2, S=37, D=16),
         lambda s: 4 * s["B"] * s["H"] * s["S"] * s["D"] * 2, lambda s: _attention_flops(s, causal=True),
         Goal(versus=((BEST, 0.90),), kernels=1)),
    # backward kernels (tir_passes.differentiate), against torch's own backward of the same forward
    Case("rmsnorm_backward_fp16_16384x8192", "rmsnorm_backward",
         full=ROWS, smoke=dict(M=37, N=48), bytes=lambda s: 3 * s["M"] * s["N"] * 2, goal=Goal(copy_fraction=0.90),
         shape_vars=lambda s: {"rows": s["M"]},
         **_saved_backward(lambda s: make_rmsnorm(s["N"], "float16"), ["X", "weight"])),
    Case("layernorm_backward_fp16_16384x8192", "layernorm_backward",
         full=ROWS, smoke=dict(M=37, N=48), bytes=lambda s: 3 * s["M"] * s["N"] * 2, goal=Goal(copy_fraction=0.90),
         **_saved_backward(lambda s: make_layernorm(s["M"], s["N"], "float16"), ["X", "gamma", "beta"])),
    Case("matmul_backward_fp16_4096", "matmul_backward",
         lambda s: differentiate(make_matmul(s["M"], s["N"], s["K"]), ["A", "B"]),
         dict(M=4096, N=4096, K=4096), dict(M=67, N=48, K=40),
         lambda s: 2 * (s["M"] * s["K"] + s["K"] * s["N"]) * 2 + s["M"] * s["N"] * 4,
         lambda s: 4 * s["M"] * s["N"] * s["K"], Goal(versus=(("cuBLAS (torch autograd)", 0.90),))),
    Case("attention_backward_fp16_b2h16s2048d128", "attention_backward",
         full=dict(B=2, H=16, S=2048, D=128), smoke=dict(B=1, H=2, S=37, D=16),
         bytes=lambda s: 8 * s["B"] * s["H"] * s["S"] * s["D"] * 2,
         flops=lambda s: 5 * _attention_flops(s, causal=False) // 2, goal=Goal(versus=((BEST, 0.70),)),
         **_saved_backward(lambda s: make_attention(s["B"], s["H"], s["S"], s["D"]), ["Q", "K", "V"])),
    # the same computations written as users write them (docs/canonical-forms.md): the same kernel
    Case("attention_causal_inline_mask_fp16_b4h32s4096d128", "attention_causal",
         lambda s: make_attention_inline_mask(s["B"], s["H"], s["S"], s["D"]),
         dict(B=4, H=32, S=4096, D=128), dict(B=1, H=2, S=37, D=16),
         lambda s: 4 * s["B"] * s["H"] * s["S"] * s["D"] * 2, lambda s: _attention_flops(s, causal=True),
         Goal(versus=((BEST, 0.90),), kernels=1)),
    Case("attention_normalize_first_fp16_b4h32s4096d128", "attention",
         lambda s: make_attention_normalize_first(s["B"], s["H"], s["S"], s["D"]),
         dict(B=4, H=32, S=4096, D=128), dict(B=1, H=2, S=37, D=16),
         lambda s: 4 * s["B"] * s["H"] * s["S"] * s["D"] * 2, lambda s: _attention_flops(s, causal=False),
         Goal(versus=((BEST, 0.90),), kernels=1)),
    Case("quantize_int8_fp16_16384x8192", "quantize_int8", lambda s: make_quantize_int8(s["M"], s["N"], "float16"),
         ROWS, dict(M=37, N=48), lambda s: s["M"] * s["N"] * 3 + s["M"] * 4,
         goal=Goal(copy_fraction=0.90, versus=(("torch.compile", 1.0),), kernels=1)),
    # issue 22: two contraction blocks and an elementwise block, one kernel with two tl.dots over one K loop
    Case("swiglu_fp16_4096x11008x4096", "swiglu", lambda s: make_swiglu(s["M"], s["N"], s["K"]),
         dict(M=4096, N=11008, K=4096), dict(M=37, N=45, K=53), _swiglu_bytes,
         lambda s: 4 * s["M"] * s["N"] * s["K"], Goal(versus=(("torch.compile", 1.0),), kernels=1)),
    # issue 22: fp32 attention under float32_matmul_precision="high": both dots on TF32 tensor cores
    Case("attention_fp32_high_b4h32s4096d128", "attention_fp32_high",
         lambda s: make_attention(s["B"], s["H"], s["S"], s["D"], dtype="float32"),
         dict(B=4, H=32, S=4096, D=128), dict(B=1, H=2, S=37, D=16),
         lambda s: 4 * s["B"] * s["H"] * s["S"] * s["D"] * 4, lambda s: _attention_flops(s, causal=False),
         Goal(versus=(("SDPA tf32", 0.80),), kernels=1), options=dict(float32_matmul_precision="high")),
)


# the cost of compile(deterministic=True) (issue 20): the same programs and sizes with the flag, each
# measured against its flag-less case in the same run (at most 5% slower memory-bound, 10% GEMMs and attention)
DETERMINISTIC = {"softmax_fp16_16384x8192": 0.05, "rmsnorm_fp16_16384x8192": 0.05, "layernorm_fp16_16384x8192": 0.05,
                 "matmul_fp16_4096": 0.10, "matmul_fp16_3000x5000x1000": 0.10,
                 "attention_fp16_b4h32s4096d128": 0.10}


def _deterministic(case: Case, slower: float) -> Case:
    goal = replace(case.goal, baseline=(case.name, slower))
    return replace(case, name=case.name + "_deterministic", goal=goal, deterministic=True)


CASES = CASES + tuple(_deterministic(case, DETERMINISTIC[case.name]) for case in CASES if case.name in DETERMINISTIC)
