"""The GPU smoke-run cases: each example at a realistic size, with what it must move and compute.

Shared by generate.py (here, with TVM) and nothing else: run_gpu.py reads the JSON it writes.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

from argmax import make_argmax  # noqa: E402
from attention_scores import make_attention_scores  # noqa: E402
from batch_matmul import make_batch_matmul  # noqa: E402
from conv2d_nhwc import make_conv2d_nhwc  # noqa: E402
from cumsum import make_cumsum  # noqa: E402
from elementwise import make_scale_shift_relu  # noqa: E402
from layernorm import make_layernorm  # noqa: E402
from layernorm_moments import make_layernorm_moments  # noqa: E402
from matmul import make_matmul  # noqa: E402
from matmul_bias_gelu import make_matmul_bias_gelu  # noqa: E402
from max_pool2d import make_max_pool2d  # noqa: E402
from rmsnorm import make_rmsnorm  # noqa: E402
from softmax import make_softmax  # noqa: E402
from transpose import make_transpose  # noqa: E402

M16K, N8K = 16384, 8192


def cases() -> list[dict]:
    """name, PrimFunc, symbolic sizes, floor bytes (each input read once, output written once), flops."""
    return [
        dict(name="elementwise_fp32_8192x8192", func=make_scale_shift_relu(8192, 8192), sizes={},
             bytes=2 * 8192 * 8192 * 4, flops=0),
        dict(name="softmax_fp16_16384x8192", func=make_softmax(M16K, N8K, "float16"), sizes={},
             bytes=2 * M16K * N8K * 2, flops=0),
        dict(name="layernorm_fp16_16384x8192", func=make_layernorm(M16K, N8K, "float16"), sizes={},
             bytes=2 * M16K * N8K * 2, flops=0),
        dict(name="rmsnorm_fp16_16384x8192", func=make_rmsnorm(N8K, "float16"), sizes={"rows": M16K},
             bytes=2 * M16K * N8K * 2, flops=0),
        dict(name="matmul_fp16_4096", func=make_matmul(4096, 4096, 4096), sizes={},
             bytes=2 * 4096 * 4096 * 2 + 4096 * 4096 * 4, flops=2 * 4096**3),
        dict(name="matmul_fp32_2048", func=make_matmul(2048, 2048, 2048, "float32", "float32"), sizes={},
             bytes=3 * 2048 * 2048 * 4, flops=2 * 2048**3),
        dict(name="matmul_bias_gelu_fp16_4096", func=make_matmul_bias_gelu(4096, 4096, 4096), sizes={},
             bytes=3 * 4096 * 4096 * 2, flops=2 * 4096**3),
        dict(name="batch_matmul_fp16_32x1024x1024x256", func=make_batch_matmul(32, 1024, 1024, 256), sizes={},
             bytes=32 * (2 * 1024 * 256 * 2 + 1024 * 1024 * 4), flops=2 * 32 * 1024 * 1024 * 256),
        dict(name="attention_scores_fp16_4096x4096x128", func=make_attention_scores(4096, 4096, 128), sizes={},
             bytes=2 * 4096 * 128 * 2 + 4096 * 4096 * 4, flops=2 * 4096 * 4096 * 128),
        dict(name="attention_scores_fp16_8192x512x64", func=make_attention_scores(8192, 512, 64), sizes={},
             bytes=(8192 + 512) * 64 * 2 + 8192 * 512 * 4, flops=2 * 8192 * 512 * 64),
        dict(name="transpose_fp32_8192x8192", func=make_transpose(8192, 8192), sizes={},
             bytes=2 * 8192 * 8192 * 4, flops=0),
        dict(name="conv2d_nhwc_fp16_32x56x56x64x64", func=make_conv2d_nhwc(32, 56, 56, 64, 64), sizes={},
             bytes=32 * 56 * 56 * 64 * (2 + 4), flops=2 * 32 * 56 * 56 * 64 * 64 * 9),
        dict(name="max_pool2d_fp32_32x64x112x112", func=make_max_pool2d(32, 64, 112, 112), sizes={},
             bytes=32 * 64 * (112 * 112 + 55 * 55) * 4, flops=0),
        dict(name="layernorm_moments_fp16_16384x8192", func=make_layernorm_moments(M16K, N8K, "float16"), sizes={},
             bytes=2 * M16K * N8K * 2, flops=0),
        dict(name="cumsum_fp32_16384x8192", func=make_cumsum(M16K, N8K), sizes={}, bytes=2 * M16K * N8K * 4, flops=0),
        dict(name="argmax_fp32_16384x8192", func=make_argmax(M16K, N8K), sizes={}, bytes=M16K * N8K * 4 + M16K * 4,
             flops=0),
    ]
