"""matmul's backward (dA = dC·Bᵀ, dB = Aᵀ·dC of C = A·B, fp16 operands, fp32 C and dC) against torch
autograd's (cuBLAS), one hypothesis per variant:

    python benchmarks/matmul_backward_variants_gpu.py generate DIR     # here (TVM): DIR/matmul_backward.py
    python3 benchmarks/matmul_backward_variants_gpu.py run DIR OUT.json   # on the GPU (torch + triton only), < 60 s
    python benchmarks/matmul_backward_variants_gpu.py smoke            # CPU: every variant checked, interpreter

- "as generated": the module, dC fp32 (each kernel loads it at 4 bytes and rounds it to fp16 in
  registers; dB = Aᵀ·dC stages it again after the cast, as the MMA's B operand);
- "dC rounded first": `dC.half()` by torch, then the same kernels on the fp16 tensor (the launcher's
  dtype check relaxed by an edit of the module's text): what rounding the gradient once, in its own
  pass, would cost and save (torch autograd does this: its peer includes the same cast);
- "dC rounded first, 4 stages": the same with dB's kernel at 4 stages (an fp16 dC leaves room).

Each output checked against torch in float32 ("error": the largest relative to the largest) before timing (`do_bench` medians, L2 flushed, µs).
"""

import os
import sys

from probe_common import RowLog, bench_us, command, compiled_into, failure, interpreted_smoke, load_module, on_path

SIZE = int(os.environ.get("PROBE_SIZE", "4096"))


def generate(folder: str) -> None:
    on_path()
    from matmul import make_matmul
    from tir_passes import differentiate

    os.makedirs(folder, exist_ok=True)
    compiled_into(folder, "matmul_backward", differentiate(make_matmul(SIZE, SIZE, SIZE), ["A", "B"]))


def _fp16_gradient_module(folder: str):
    """The module with d_C declared fp16: the kernels are dtype-generic, `.to(tl.float16)` of fp16 is nothing."""
    path = os.path.join(folder, "matmul_backward.py")
    with open(path) as handle:
        text = handle.read()
    edited = text.replace("('d_C', 'buffer', 'float32'", "('d_C', 'buffer', 'float16'")
    if edited == text:
        raise ValueError("d_C's parameter entry is not in the generated text")
    edited_path = os.path.join(folder, "matmul_backward_fp16_dc.py")
    with open(edited_path, "w") as handle:
        handle.write(edited)
    return load_module(edited_path)


def _variants(folder: str):
    generated = load_module(os.path.join(folder, "matmul_backward.py"))
    rounded = _fp16_gradient_module(folder)
    staged = _fp16_gradient_module(folder)
    staged.CONFIGS = {name: [dict(configs[0], num_stages=4)] + configs[1:] if name.endswith("kernel1") else configs
                      for name, configs in staged.CONFIGS.items()}
    return (("as generated", lambda a, b, dc, da, db: generated.run(a, b, dc, da, db)),
            ("dC rounded first", lambda a, b, dc, da, db: rounded.run(a, b, dc.half(), da, db)),
            ("dC rounded first, 4 stages", lambda a, b, dc, da, db: staged.run(a, b, dc.half(), da, db)))


def _measure(folder: str, out: str | None, timed: bool) -> list[dict]:
    import torch

    device = "cuda" if timed else "cpu"
    gen = torch.Generator(device="cpu").manual_seed(0)
    a, b = (torch.randn(SIZE, SIZE, generator=gen).half().to(device) for _ in range(2))
    dc = torch.randn(SIZE, SIZE, generator=gen).to(device)
    expected = (dc.half().float() @ b.float().T, a.float().T @ dc.half().float())
    log = RowLog(out)
    for name, fn in _variants(folder):
        da, db = (torch.empty(SIZE, SIZE, dtype=torch.float16, device=device) for _ in range(2))
        try:
            fn(a, b, dc, da, db)
            error = max(float(((got.float() - want).abs().max() / want.abs().max())) for got, want in
                        zip((da, db), expected))
            row = {"variant": name, "error": error}
            if timed:
                row["us"] = bench_us(lambda: fn(a, b, dc, da, db))
        except Exception as err:  # noqa: BLE001 - a variant that fails is a row
            row = {"variant": name, "failed": failure(err)}
        log.emit(row)
    if timed:
        leaves = [a.detach().requires_grad_(), b.detach().requires_grad_()]
        product = torch.matmul(*leaves)
        peer = lambda: torch.autograd.grad(product, leaves, dc.to(product.dtype), retain_graph=True)  # noqa: E731
        log.emit({"variant": "cuBLAS (torch autograd, dC cast to fp16 inside)", "us": bench_us(peer)})
        log.emit({"variant": "torch dC.half() alone", "us": bench_us(lambda: dc.half())})
    return log.rows


def run(folder: str, out: str) -> None:
    _measure(folder, out, timed=True)


def smoke() -> None:
    os.environ.setdefault("PROBE_SIZE", "64")
    global SIZE
    SIZE = int(os.environ["PROBE_SIZE"])

    def generate_and_run(folder):
        generate(folder)
        return _measure(folder, None, timed=False)

    interpreted_smoke(generate_and_run)


if __name__ == "__main__":
    command(sys.argv, generate, smoke, run)
