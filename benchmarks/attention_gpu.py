"""Attention's launch decisions measured: the generated kernels (no -inf restart where the first key
is proven finite, Q read once per program, descriptors kept where tiles divide, 128×128 tiles with
8 warps and 3 stages on sm_90) at their default, against the same module with one decision undone,
and SDPA's default path (what a user gets) beside.

    python benchmarks/attention_gpu.py generate DIR          # here (TVM): DIR/attention{,_causal}.py
    python3 benchmarks/attention_gpu.py run DIR OUT.json      # on the GPU (torch + triton only)

Variants per module: "default" (the module as generated), "pointers" (USE_DESCRIPTORS = False),
"128x64/4w/2s" (the previous tile default, descriptors as the plan says) and the same on pointers.
Each output is checked against SDPA's; times are `do_bench` medians (L2 flushed), µs.
"""

import glob
import importlib.util
import json
import os
import sys
import time

B, H, S, D = 4, 32, 4096, 128
PREVIOUS = {"BLOCK_I": 128, "BLOCK_J": 64, "num_warps": 4, "num_stages": 2}


def generate(out: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    from attention import make_attention
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    for name, causal in (("attention", False), ("attention_causal", True)):
        kernel = compile(make_attention(B, H, S, D, causal=causal), verify=False)
        kernel.save(os.path.join(out, f"{name}.py"))
        print(name, kernel.module().CONFIGS)


def _load(path: str):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _variants(module) -> dict:
    [name] = module.CONFIGS
    default = dict(module.CONFIGS[name][module.CHOSEN.get(name, 0)])
    previous = {**default, **PREVIOUS}
    return {"default": (default, True), "pointers": (default, False),
            "128x64/4w/2s": (previous, True), "128x64/4w/2s pointers": (previous, False)}


def _time_variant(module, config: dict, descriptors: bool, args, expected) -> dict:
    import torch
    from triton.testing import do_bench

    [name] = module.CONFIGS
    configs, saved = module.CONFIGS[name], dict(module.CHOSEN)
    added = config not in configs
    if added:
        configs.append(config)
    module.CHOSEN[name], module.USE_DESCRIPTORS = configs.index(config), descriptors
    try:
        args[-1].fill_(float("nan"))
        module.run(*args)
        torch.cuda.synchronize()
        error = ((args[-1].double() - expected).norm() / expected.norm()).item()
        us = 1e3 * do_bench(lambda: module.run(*args), warmup=10, rep=60, return_mode="median")
        return dict(config=config, us=us, error=error, ran=dict(module.VARIANTS_RUN))
    except Exception as err:  # noqa: BLE001 - a config the GPU refuses: reported, the rest goes on
        return dict(config=config, error=f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        module.CHOSEN.update(saved)
        module.USE_DESCRIPTORS = True
        if added:
            configs.pop()


def run(folder: str, out: str, deadline_s: float = 400) -> None:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    start, rows = time.time(), []
    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, generator=generator, device="cuda").half() for _ in range(3))
    o = torch.empty_like(q)
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        module, causal = _load(path), "causal" in os.path.basename(path)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()
        sdpa = 1e3 * do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                              warmup=10, rep=60, return_mode="median")
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        row = dict(module=os.path.basename(path), sdpa_default_us=sdpa, variants={})
        for label, (config, descriptors) in _variants(module).items():
            if time.time() - start > deadline_s:
                row["variants"][label] = "skipped: past the deadline"
                continue
            timed = _time_variant(module, config, descriptors, (q, k, v, o), expected)
            if "us" in timed:
                timed["tflops"], timed["of_sdpa"] = flops / timed["us"] / 1e6, sdpa / timed["us"]
            row["variants"][label] = timed
            print(row["module"], label, json.dumps(timed), flush=True)
        rows.append(row)
    with open(out, "w") as handle:
        json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3], *(float(a) for a in sys.argv[4:5]))
