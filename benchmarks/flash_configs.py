"""Every config of the generated flash-attention modules against SDPA's flash backend, on a GPU.

    python benchmarks/flash_configs.py generate [DIR]     # here (TVM): DIR/attention{,_causal}.py
    python3 benchmarks/flash_configs.py run DIR OUT        # on the GPU, torch + triton: OUT/flash.json

b4 h32 s4096 d128 fp16 (examples/attention.py, causal and not). Each module's output is compared
with SDPA's before any timing; then SDPA and each config of the module's config list are timed
with triton.testing.do_bench. This is how the flash kernel's default warps were chosen.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = (4, 32, 4096, 128)
CASES = (("attention", False), ("attention_causal", True))


def generate(out: str) -> None:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from attention import make_attention
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    for name, causal in CASES:
        kernel = compile(make_attention(*SHAPE, causal=causal), verify=False)
        with open(os.path.join(out, name + ".py"), "w") as handle:
            handle.write(kernel.source)
        print(f"{name}: {len(kernel.program.kernels)} kernel(s), {kernel.source.count('tl.dot(')} tl.dot(s)")


def _module(directory: str, name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(directory, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time_case(module, causal: bool) -> dict:
    import torch
    from triton.testing import do_bench

    torch.manual_seed(0)
    q, k, v = (torch.randn(*SHAPE, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    module.run(q, k, v, out)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        reference = sdpa(q, k, v, is_causal=causal)
        sdpa_ms = do_bench(lambda: sdpa(q, k, v, is_causal=causal), warmup=50, rep=300)
    b, h, s, d = SHAPE
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    row = {"max_abs_error_vs_sdpa": (out.float() - reference.float()).abs().max().item(),
           "sdpa_ms": sdpa_ms, "sdpa_tflops": flops / sdpa_ms / 1e9, "configs": []}
    (name, launch), = module.LAUNCHERS
    tensors, sizes = module._prepare((q, k, v, out), {})
    for config in module.CONFIGS[name]:
        try:
            launch(tensors, sizes, config)
            torch.cuda.synchronize()
            ms = do_bench(lambda: launch(tensors, sizes, config), warmup=25, rep=200)
            row["configs"].append({"config": config, "ms": ms, "tflops": flops / ms / 1e9})
        except Exception as err:  # a config the GPU refuses: reported, the others still run
            row["configs"].append({"config": config, "error": str(err)[:200]})
        print(name, row["configs"][-1], flush=True)
    return row


def run(directory: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    results = {}
    for name, causal in CASES:
        results[name] = _time_case(_module(directory, name), causal)
        print(name, "SDPA", f"{results[name]['sdpa_tflops']:.0f} TFLOP/s", flush=True)
        with open(os.path.join(out, "flash.json"), "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "generate":
        generate(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "generated", "flash"))
    elif command == "run" and len(sys.argv) == 4:
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
