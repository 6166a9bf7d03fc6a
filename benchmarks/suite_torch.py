"""The torch side of the benchmark suite (torch only, no TVM): for each program kind, its
reference in float64 and what a user would run instead (torch eager, torch.compile, cuBLAS through
`torch.matmul` and `F.linear`, SDPA's default path and each of its backends by name).

Arguments arrive as the generated module takes them, in the PrimFunc's parameter order (the
suite builds them from the module's PARAMS). A program kind gives
- `reference(args)`: {parameter index: expected output}, computed in float64;
- `peers(device)`: {peer name: function(args) -> output}, the peer's own output tensor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ATTENTION_CHUNK = 8  # (batch, head) pairs whose float64 scores are held at once


def _f64(args):
    return [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


# --- references (float64) -------------------------------------------------------------------
def _softmax_ref(args):
    return {1: torch.softmax(_f64(args)[0], dim=1)}


def _rmsnorm_ref(args, eps=1e-6):
    x, weight = _f64(args)[:2]
    return {2: x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + eps) * weight}


def _layernorm_ref(args, eps=1e-5):
    x, gamma, beta = _f64(args)[:3]
    return {3: F.layer_norm(x, (x.shape[1],), gamma, beta, eps=eps)}


def _bias_gelu_residual_ref(args):
    x, bias, residual = _f64(args)[:3]
    return {3: F.gelu(x + bias) + residual}


def _transpose_ref(args):
    return {1: _f64(args)[0].T}


def _matmul_ref(args):
    a, b = _f64(args)[:2]
    return {2: a @ b}


def _linear_ref(args):
    x, w = _f64(args)[:2]
    return {2: x @ w.T}


def _scores_ref(args):
    q, k = _f64(args)[:2]
    return {2: torch.softmax((q @ k.T) / math.sqrt(q.shape[1]), dim=1)}


def _attention_ref(args, causal: bool):
    """softmax(Q·Kᵀ/√d [causal]) · V in float64, a few (batch, head) pairs at a time."""
    q, k, v = args[:3]
    batch, heads, seq, dim = q.shape
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    pairs = [(b, h) for b in range(batch) for h in range(heads)]
    for start in range(0, len(pairs), ATTENTION_CHUNK):
        chunk = pairs[start:start + ATTENTION_CHUNK]
        index = tuple(torch.tensor(axis, device=q.device) for axis in zip(*chunk))
        qc, kc, vc = (t[index].double() for t in (q, k, v))
        scores = qc @ kc.transpose(-1, -2) / math.sqrt(dim)
        if causal:
            keep = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~keep, float("-inf"))
        out[index] = torch.softmax(scores, dim=-1) @ vc
    return {3: out}


def _quantize_int8_ref(args):
    """The quantized values (in float32, as the program computes them, so ties round alike); the
    per-row scale is the program's second output, checked by the tests, not here."""
    return {1: _quantize_int8(args[0]).double()}


# --- what users run instead ------------------------------------------------------------------
def _compiled(function, device):
    """torch.compile on a GPU; on the CPU (the smoke run) dynamo's eager backend, so the step
    runs without a C++ toolchain."""
    return torch.compile(function, fullgraph=True, backend="inductor" if device == "cuda" else "eager")


def _softmax(x):
    return torch.softmax(x, dim=1)


def _rmsnorm(x, weight, eps=1e-6):
    h = x.float()
    return (h * torch.rsqrt((h * h).mean(dim=1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _layernorm(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[1],), gamma, beta, eps=eps)


def _bias_gelu_residual(x, bias, residual):
    return (F.gelu(x.float() + bias.float()) + residual.float()).to(x.dtype)


def _transpose(x):
    return x.t().contiguous()


def _scores(q, k):
    return torch.softmax((q @ k.T).float() / math.sqrt(q.shape[1]), dim=1)


def _quantize_int8(x):
    """Row-wise int8: absmax per row (at least 1e-6), x * 127 / absmax rounded and clamped. The
    per-row scale (absmax / 127, M floats next to M·N values) is left out: the peers compare one
    output."""
    h = x.float()
    absmax = h.abs().amax(dim=1, keepdim=True).clamp_min(1e-6)
    return torch.round(h * 127 / absmax).clamp(-127, 127).to(torch.int8)
def _swiglu_ref(args):
    x, wg, wu = _f64(args)[:3]
    gate = x @ wg.T
    return {3: gate * torch.sigmoid(gate) * (x @ wu.T)}


def _swiglu(x, wg, wu):
    """What a user writes in torch: the two projections (fp32 accumulation, fp16 results) and silu."""
    return F.silu(x @ wg.T) * (x @ wu.T)


def _attention_fp32_high_ref(args):
    return _attention_ref(args, causal=False)


def _sdpa_tf32(device):
    """SDPA on fp32 inputs under torch.set_float32_matmul_precision("high") (no flash kernel takes
    fp32: PyTorch picks its memory-efficient or math backend, with TF32 matmuls)."""
    def call(args):
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            return F.scaled_dot_product_attention(*args[:3])
        finally:
            torch.set_float32_matmul_precision(before)
    return {"SDPA tf32": call}


def _eager_and_compiled(function, arity: int):
    def peers(device):
        compiled = _compiled(function, device)
        return {"torch eager": lambda args: function(*args[:arity]),
                "torch.compile": lambda args: compiled(*args[:arity])}
    return peers


def _matmul(a, b):
    return torch.matmul(a, b)


def _linear(x, w):
    return F.linear(x, w)


def _cublas_and_compiled(function, same_output=None):
    """cuBLAS through torch's own call, and torch.compile of the same call (inductor's default mode,
    which may pick cuBLAS or one of its Triton templates). `same_output`: a cuBLAS call writing the
    program's own output type where torch's default writes another (a float16 matmul into a float32
    C: `torch.mm(..., out_dtype=torch.float32)`, CUDA only), shown beside."""
    def peers(device):
        compiled = _compiled(function, device)
        found = {"cuBLAS": lambda args: function(args[0], args[1]),
                 "torch.compile": lambda args: compiled(args[0], args[1])}
        if same_output is not None and device == "cuda":
            found["cuBLAS (torch.mm out_dtype)"] = lambda args: same_output(args[0], args[1], args[2].dtype)
        return found
    return peers


def _matmul_into(a, b, out_dtype):
    """torch.mm writing `out_dtype` (a float16 product accumulated and stored in float32)."""
    return torch.mm(a, b, out_dtype=out_dtype)


# SDPA's backends by name (torch.nn.attention.SDPBackend); "SDPA default" is what a user gets
SDPA_BACKENDS = (("SDPA flash", "FLASH_ATTENTION"), ("SDPA efficient", "EFFICIENT_ATTENTION"),
                 ("SDPA cuDNN", "CUDNN_ATTENTION"))


def _sdpa(causal: bool):
    def peers(device):
        def default(args):
            q, k, v = args[:3]
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def backend(name):
            def call(args):
                from torch.nn.attention import SDPBackend, sdpa_kernel

                q, k, v = args[:3]
                with sdpa_kernel(getattr(SDPBackend, name)):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return call

        found = {"SDPA default": default}
        if device == "cuda":  # the backends by name are GPU kernels; the smoke run has the default
            found.update({label: backend(name) for label, name in SDPA_BACKENDS})
        return found
    return peers


# --- backward programs (tir_passes.differentiate) ---------------------------------------------
# A backward module takes the forward's inputs it reads, then the output's gradient, then writes the
# gradients (differentiate's GradientSignature): (inputs..., dY, dX...). The reference is float64
# autograd of the forward; the peers are torch's own backward of what users run, the forward traced
# once per set of arguments, so what is timed is the backward alone.
def _backward_ref(forward, reads: int, unread=lambda *inputs: []):
    """`unread(*inputs)`: the forward's inputs the backward does not read (their values do not
    change the gradients, e.g. LayerNorm's beta), made up so that the forward can run."""
    def reference(args):
        inputs = [x.requires_grad_() for x in _f64(args)[:reads]]
        leaves = inputs + [x.requires_grad_() for x in unread(*inputs)]
        grads = torch.autograd.grad(forward(*leaves), leaves, _f64(args)[reads])
        return {reads + 1 + k: grad for k, grad in enumerate(grads)}
    return reference


def _autograd_peer(name: str, forward, reads: int, unread=lambda *inputs: []):
    """{name: the backward of `forward` by torch autograd}, returning the gradients in order."""
    def peers(device):
        traced = {}

        def backward(args):
            key = tuple(a.data_ptr() for a in args[:reads + 1])
            if key not in traced:
                inputs = [a.detach().requires_grad_() for a in args[:reads]]
                leaves = inputs + [x.requires_grad_() for x in unread(*inputs)]
                traced.clear()
                traced[key] = (forward(*leaves), leaves)
            out, leaves = traced[key]
            return torch.autograd.grad(out, leaves, args[reads].to(out.dtype), retain_graph=True)
        return {name: backward}
    return peers


def _zero_beta(x, gamma):
    return [torch.zeros_like(gamma.detach())]


def _attention_f64(q, k, v, causal: bool):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _sdpa_backend(name: str | None):
    """SDPA forced onto one backend by name (None: its default choice, what a user gets)."""
    def forward(q, k, v):
        if name is None or q.device.type != "cuda":
            return F.scaled_dot_product_attention(q, k, v)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, name)):
            return F.scaled_dot_product_attention(q, k, v)
    return forward


def _sdpa_backward_peers(device):
    """SDPA's backward at its default (what a user gets: cuDNN on the H200) and by backend name."""
    found = _autograd_peer("SDPA default backward", _sdpa_backend(None), 3)(device)
    if device == "cuda":
        for label, name in (("SDPA flash backward", "FLASH_ATTENTION"), ("SDPA cuDNN backward", "CUDNN_ATTENTION")):
            found.update(_autograd_peer(label, _sdpa_backend(name), 3)(device))
    return found


PROGRAMS = {
    "softmax": (_softmax_ref, _eager_and_compiled(_softmax, 1)),
    "rmsnorm": (_rmsnorm_ref, _eager_and_compiled(_rmsnorm, 2)),
    "layernorm": (_layernorm_ref, _eager_and_compiled(_layernorm, 3)),
    "bias_gelu_residual": (_bias_gelu_residual_ref, _eager_and_compiled(_bias_gelu_residual, 3)),
    "transpose": (_transpose_ref, _eager_and_compiled(_transpose, 1)),
    "matmul": (_matmul_ref, _cublas_and_compiled(_matmul, _matmul_into)),
    "matmul_rounded": (_matmul_ref, _cublas_and_compiled(_matmul)),
    "linear": (_linear_ref, _cublas_and_compiled(_linear)),
    "attention_scores": (_scores_ref, _eager_and_compiled(_scores, 2)),
    "attention": (lambda args: _attention_ref(args, causal=False), _sdpa(causal=False)),
    "attention_causal": (lambda args: _attention_ref(args, causal=True), _sdpa(causal=True)),
    "rmsnorm_backward": (_backward_ref(lambda x, w: x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w, 2),
                         _autograd_peer("torch autograd", _rmsnorm, 2)),
    "layernorm_backward": (_backward_ref(_layernorm, 2, _zero_beta), _autograd_peer("torch autograd", _layernorm, 2,
                                                                                     _zero_beta)),
    "matmul_backward": (_backward_ref(torch.matmul, 2), _autograd_peer("cuBLAS (torch autograd)", torch.matmul, 2)),
    "attention_backward": (_backward_ref(lambda q, k, v: _attention_f64(q, k, v, causal=False), 3),
                           _sdpa_backward_peers),
    "quantize_int8": (_quantize_int8_ref, _eager_and_compiled(_quantize_int8, 1)),
    "swiglu": (_swiglu_ref, _eager_and_compiled(_swiglu, 3)),
    "attention_fp32_high": (_attention_fp32_high_ref, _sdpa_tf32),
}


def reference(program: str, args) -> dict:
    return PROGRAMS[program][0](args)


def peers(program: str, device: str) -> dict:
    return PROGRAMS[program][1](device)
