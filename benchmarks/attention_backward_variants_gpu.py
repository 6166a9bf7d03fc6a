"""Attention's backward (the streamed 4 kernels) on the GPU: each kernel alone, its tiles, and edits.

    python benchmarks/attention_backward_variants_gpu.py generate DIR      # here (TVM): DIR/*.py + DIR/manifest.json
    python3 benchmarks/attention_backward_variants_gpu.py run DIR OUT.json  # on the GPU (torch + triton only), <= 200 s
    PROBE_SHAPE=1,2,128,16 PROBE_REGISTERS=300 python benchmarks/attention_backward_variants_gpu.py smoke DIR  # CPU

`generate` compiles the suite's case (`differentiate(make_attention(2, 16, 2048, 128), ["Q", "K", "V"])`,
docs/autodiff.md "Attention's backward") and writes it with source variants beside it, each testing one
hypothesis of where the time goes (a probe may edit the generated text; the product may not):

- nocast: `x.to(tl.float32).to(tl.float16)` on a loaded fp16 operand as `x` (the round trip keeps a
  dot's shared-memory operand from being read by the tensor cores as loaded: registers, convert, shared);
- onek: the dQ kernel's second load of the K tile (descriptor K_desc1, the dot's other axis name) as the first;
- recip: `x / row_sum[..]` in the walk as `x * (1.0 / row_sum)[..]` (one reciprocal per row, not a division
  per element per step);
- plscale: the dV kernel's `1 / row_sum` on the probabilities (registers, dot operand A) instead of on dO
  (operand B, loaded: scaled in registers, then written to shared memory again), FA-2's form;
- all: the four; merged: all, and dV accumulated in the dK kernel beside dK (one walk of i for both, its
  P recomputed once: FA-2's dK/dV kernel), the dV kernel dropped (3 kernels, 8 S²·D products).

`run` times each kernel alone (its launcher on the module's prepared buffers, the statistics kernel run
first) at its default config and at the tiles of Triton's fused-attention backward (rows 128 × walk 32,
4 warps, 3-5 stages) and others, checks each kernel's output against torch autograd in fp32 (dQ, dK, dV)
or the default statistics (kernel 0), then whole `run()`s: as generated, with the edits, with the best
config found per kernel, and SDPA's backward (default, cuDNN, flash) as the peers. Compiles happen first
in worker processes (Triton's cache keeps them). Medians of do_bench (L2 flushed), µs.

Measured on the H200 (2026-12-02, benchmarks/results/2026-12-02-h200-attention-backward-variants.json; the
table is in docs/autodiff.md, "Where the time goes"): kernels alone 144.5 / 255.6 / 275.9 / 166.7 µs as
generated; dQ 203.6 and dK 245.9 at 3 stages; dV 144.1 with plscale; dK and dV merged 263.2; SDPA's default
backward 355.5. The 3 stages and the nocast and plscale forms are the product's decisions since.
"""

import builtins
import concurrent.futures
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

B, H, S, D = (int(n) for n in os.environ.get("PROBE_SHAPE", "2,16,2048,128").split(","))
KERNELS = tuple(f"attention_backward_kernel{k}" for k in range(4))
# (rows, walk, warps, stages): the grid axis's block, the walked axis's block
SWEEP = ((128, 64, 8, 2), (128, 64, 8, 3), (128, 64, 4, 2), (128, 32, 4, 2), (128, 32, 4, 3), (128, 32, 4, 5),
         (128, 32, 8, 3), (64, 64, 4, 2), (64, 64, 4, 3), (128, 128, 8, 2), (64, 32, 4, 3))
SWEEP0 = ((128, 64, 4, 2), (128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 4, 3), (128, 32, 4, 3))
TOLERANCE = 1e-2   # relative Frobenius error of each gradient against fp32 autograd


# --- source edits: each takes the module's text and returns it changed (or raises) ---

def _changed(before: str, after: str, what: str) -> str:
    if before == after:
        raise ValueError(f"{what}: the pattern is not in the generated text")
    return after


def no_cast(text: str) -> str:
    out = text.replace(".to(tl.float32).to(tl.float16)", "")
    return out if "d_O_tile, acc_d_V" in text else _changed(text, out, "nocast")   # the product's form since


def one_k(text: str) -> str:
    return _changed(text, re.sub(r"^(\s+)K_tile_1 = .*$", r"\1K_tile_1 = K_tile", text, flags=re.M), "onek")


def reciprocal(text: str) -> str:
    out = re.sub(r"\((\w+) / (row_sum_tile\w*)(\[[^\]]*\])\)", r"(\1 * (1.0 / \2)\3)", text)
    return _changed(text, out, "recip")


def p_scale(text: str) -> str:
    out = re.sub(r"tl\.dot\((tl\.exp2\([^()]*\))\.to\(tl\.float16\), \(d_O_tile\.to\(tl\.float32\) \* "
                 r"\(1\.0 / row_sum_tile\)\[:, None\]\)\.to\(tl\.float16\), (acc_d_V_0_1)\)",
                 r"tl.dot((\1 * (1.0 / row_sum_tile)[None, :]).to(tl.float16), d_O_tile, \2)", text)
    return out if "d_O_tile, acc_d_V" in text else _changed(text, out, "plscale")   # the product's form since


def _dv_address(text: str) -> str:
    """d_V's address in the dK kernel: the pointer kernel's d_K store with d_V's pointer and strides."""
    kernel = re.search(r"^def attention_backward_kernel2\(.*?(?=^@triton\.jit)", text, flags=re.M | re.S).group(0)
    address = re.search(r"tl\.store\((d_K_ptr \+ .*), d_K_\w+\.to\(tl\.float16\)\)", kernel).group(1)
    for name, value in re.findall(r"^    (t_\d+) = (.*)$", kernel, flags=re.M):
        address = re.sub(rf"\b{name}\b", value, address)
    return address.replace("d_K_", "d_V_")


def merged(text: str) -> str:
    """dV accumulated in the dK kernel (both of its variants): P = exp2(..) of its dK dot, scaled by 1/l."""
    out = text.replace("d_K_stride3, row_max_ptr", "d_K_stride3, d_V_ptr, d_V_stride0, d_V_stride1, d_V_stride2, "
                       "d_V_stride3, row_max_ptr")
    out = out.replace('        t["d_K"].stride(3),\n        t["row_max"],\n',
                      '        t["d_K"].stride(3),\n' + "".join(f'        t["d_V"]{s},\n' for s in
                      ("", ".stride(0)", ".stride(1)", ".stride(2)", ".stride(3)")) + '        t["row_max"],\n')
    out = out.replace("    acc_d_K_0_1 = tl.full([BLOCK_J, BLOCK_AX0], 0.0, tl.float32)\n",
                      "    acc_d_K_0_1 = tl.full([BLOCK_J, BLOCK_AX0], 0.0, tl.float32)\n"
                      "    acc_d_V_m = tl.full([BLOCK_J, BLOCK_AX0], 0.0, tl.float32)\n")
    parts = re.split(r"(?=^@triton\.jit\n)", out, flags=re.M)
    for n, part in enumerate(parts):
        if not re.search(r"^def attention_backward_kernel2(_tma)?\(", part, flags=re.M):
            continue
        exponent = re.search(r"dot_2 = tl\.dot\(.*?(tl\.exp2\([^()]*\))", part).group(1)
        part = part.replace("        acc_d_K_0_1 = dot_2\n", "        acc_d_K_0_1 = dot_2\n"
                            f"        acc_d_V_m = tl.dot(({exponent} * (1.0 / row_sum_tile)[None, :]).to(tl.float16), "
                            "d_O_tile, acc_d_V_m)\n")
        parts[n] = part.replace("    # block d_K_total\n", f"    tl.store({_dv_address(out)}, acc_d_V_m.to(tl.float16))\n"
                                "    # block d_K_total\n")
    out = "".join(parts)
    out = out.replace('("attention_backward_kernel3", _launch_attention_backward_kernel3), ', "")
    if out.count("acc_d_V_m = tl.dot") != 2 or "_launch_attention_backward_kernel3)" in out:
        raise ValueError("merged: the dK kernel's pattern is not in the generated text")
    return out


EDITS = {"nocast": no_cast, "onek": one_k, "recip": reciprocal, "plscale": p_scale, "merged": merged}
VARIANTS = {"base": (), "nocast": ("nocast",), "onek": ("onek",), "recip": ("recip",), "plscale": ("plscale",),
            "all": ("nocast", "onek", "recip", "plscale"), "merged": ("nocast", "onek", "recip", "plscale", "merged")}


def _kernels(variant: str) -> tuple:
    return KERNELS[:3] if variant == "merged" else KERNELS


def _plan() -> list:
    """(file, kernel or "run", {kernel: (rows, walk, warps, stages)}, descriptors), most telling first."""
    plan = [("base", "run", {}, True), ("all", "run", {}, True), ("merged", "run", {}, True),
            ("base", "run", {}, False)]
    for variant in ("base", "all", "merged"):
        for kernel in _kernels(variant):
            if kernel == KERNELS[0] and variant != "base":
                continue   # no edit reaches the statistics kernel
            for config in (SWEEP0 if kernel == KERNELS[0] else SWEEP):
                plan.append((variant, kernel, {kernel: config}, True))
    for variant in ("nocast", "onek", "recip", "plscale"):
        plan.append((variant, "run", {}, True))
    plan += [("base", kernel, {}, False) for kernel in KERNELS]
    return plan


def generate(out: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    from attention import make_attention
    from tir_passes import differentiate
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    options = {}
    if os.environ.get("PROBE_REGISTERS"):   # the smoke's small shapes take the long rows' path (streamed walks)
        from tir_passes.contracts.backend_limits import BackendLimits
        from tir_passes.pipeline import default_pipeline

        limits = BackendLimits(register_row_elements=int(os.environ["PROBE_REGISTERS"]))
        options["passes"] = default_pipeline("H200", limits=limits)
    text = compile(differentiate(make_attention(B, H, S, D), ["Q", "K", "V"]), verify=False, **options).source
    for variant, edits in VARIANTS.items():
        edited = text
        for edit in edits:
            edited = EDITS[edit](edited)
        builtins.compile(edited, variant, "exec")
        with open(os.path.join(out, f"{variant}.py"), "w") as handle:
            handle.write(edited)
    manifest = [dict(file=f, kernel=k, config={n: list(c) for n, c in cfg.items()}, descriptors=d)
                for f, k, cfg, d in _plan()]
    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(dict(shape=[B, H, S, D], entries=manifest), handle, indent=1)
    print(f"{len(manifest)} entries, {len(VARIANTS)} variants in {out}")


# --- on the GPU (torch + triton only) ---

_MODULES = {}


def _load(folder: str, variant: str):
    if variant not in _MODULES:
        path = os.path.join(folder, f"{variant}.py")
        spec = importlib.util.spec_from_file_location(f"probe_{variant}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[variant] = module
    return _MODULES[variant]


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _inputs():
    import torch

    generator = torch.Generator(device="cpu").manual_seed(0)
    q, k, v, d_o = (torch.randn(B, H, S, D, generator=generator).half().to(_device()) for _ in range(4))
    return [q, k, v, d_o] + [torch.empty_like(q) for _ in range(3)]


def _reference(args) -> list:
    """dQ, dK, dV by torch autograd of softmax(Q·Kᵀ/√D)·V (fp32 on the GPU, float64 on the CPU)."""
    import torch

    dtype = torch.float32 if _device() == "cuda" else torch.float64
    q, k, v = (a.to(dtype).requires_grad_() for a in args[:3])
    out = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, dim=-1) @ v
    return list(torch.autograd.grad(out, (q, k, v), args[3].to(dtype)))


def _config(module, kernel: str, override) -> dict:
    """The kernel's default config with (rows, walk, warps, stages) applied: rows is the grid's block."""
    config = dict(module.CONFIGS[kernel][module.CHOSEN[kernel]])
    if override:
        rows_block = module.TILE_SUMMARY[kernel]["grid"][-1][2]
        walk_block = "BLOCK_J" if rows_block == "BLOCK_I" else "BLOCK_I"
        rows, walk, warps, stages = override
        config.update({rows_block: rows, walk_block: walk, "num_warps": warps, "num_stages": stages})
    return config


def _launcher(module, kernel: str):
    return getattr(module, f"_launch_{kernel}")


def _writes(module, kernel: str, t: dict) -> list:
    """(name, tensor) the kernel writes: kernel0 the statistics, the others their gradients."""
    if kernel == KERNELS[0]:
        return [(name, t[name]) for name in ("row_max", "row_sum", "d_row_sum")]
    names = {KERNELS[1]: ["d_Q"], KERNELS[2]: ["d_K"], KERNELS[3]: ["d_V"]}[kernel]
    if kernel == KERNELS[2] and not any(name == KERNELS[3] for name, _ in module.LAUNCHERS):
        names.append("d_V")
    return [(name, t[name]) for name in names]


def _relative(got, expected) -> float:
    return ((got.double() - expected.double()).norm() / expected.double().norm()).item()


def _prepared(folder: str, entry: dict, args):
    """(module, the callable the entry times): the whole run(), or one kernel on prepared buffers."""
    module = _load(folder, entry["file"])
    module.USE_DESCRIPTORS = entry["descriptors"]
    configs = {kernel: _config(module, kernel, entry["config"].get(kernel)) for kernel in _kernels(entry["file"])}
    if entry["kernel"] == "run":
        for kernel, config in configs.items():
            module.CONFIGS[kernel].append(config)
            module.CHOSEN[kernel] = len(module.CONFIGS[kernel]) - 1
        return module, lambda: module.run(*args), None
    t, s = module._prepare(args, {})
    defaults = dict(module.CONFIGS[KERNELS[0]][module.CHOSEN[KERNELS[0]]])
    _launcher(module, KERNELS[0])(t, s, defaults)
    kernel, config = entry["kernel"], configs[entry["kernel"]]
    return module, lambda: _launcher(module, kernel)(t, s, config), t


def warm(folder: str, indices: str) -> None:
    """Entries launched once each (a worker: Triton's cache keeps what it compiled); a line per entry."""
    import torch

    entries = json.load(open(os.path.join(folder, "manifest.json")))["entries"]
    args = _inputs()
    for index in (int(i) for i in indices.split(",")):
        try:
            _module, call, _t = _prepared(folder, entries[index], args)
            call()
            torch.cuda.synchronize()
            print(json.dumps([index, "ok"]), flush=True)
        except Exception as err:  # noqa: BLE001 - reported per entry
            print(json.dumps([index, f"{type(err).__name__}: {str(err)[:300]}"]), flush=True)


def _warm_all(folder: str, count: int, workers: int, budget_s: float) -> dict:
    chunks = [list(range(k, count, workers)) for k in range(workers)]
    found = {}

    def one(chunk):
        if not chunk:
            return
        try:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "warm", folder,
                                   ",".join(map(str, chunk))], capture_output=True, text=True, timeout=budget_s)
            lines = done.stdout
        except subprocess.TimeoutExpired as err:
            lines = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        for line in lines.splitlines():
            if line.startswith("["):
                index, status = json.loads(line)
                found[index] = status

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, chunks))
    return found


def _check(module, entry, t, args, expected, stats) -> float:
    if entry["kernel"] == "run":
        return max(_relative(got, want) for got, want in zip(args[4:], expected))
    written = _writes(module, entry["kernel"], t)
    wanted = {"d_Q": expected[0], "d_K": expected[1], "d_V": expected[2], **stats}
    return max(_relative(tensor, wanted[name]) for name, tensor in written)


def _bench(call) -> float:
    from triton.testing import do_bench

    return 1e3 * do_bench(call, warmup=5, rep=30, return_mode="median")


def _peers(args) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = {}
    for label, backend in (("sdpa default", None), ("sdpa cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("sdpa flash", SDPBackend.FLASH_ATTENTION)):
        try:
            q, k, v = (a.detach().clone().requires_grad_() for a in args[:3])
            if backend is None:
                o = F.scaled_dot_product_attention(q, k, v)
            else:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, k, v)
            out[label] = _bench(lambda: torch.autograd.grad(o, (q, k, v), args[3], retain_graph=True))
        except Exception as err:  # noqa: BLE001
            out[label] = f"{type(err).__name__}: {str(err)[:200]}"
    return out


def _best(rows: list, variant: str, kernel: str):
    """The fastest timed config of the kernel in the variant (the statistics kernel: base's, no edit reaches it)."""
    variant = "base" if kernel == KERNELS[0] else variant
    timed = [r for r in rows if r["file"] == variant and r["kernel"] == kernel and r.get("us") and r["descriptors"]]
    return min(timed, key=lambda r: r["us"]) if timed else None


def run(folder: str, out: str, deadline_s: float = 200, workers: int = 14) -> None:
    import torch

    start = time.time()
    entries = json.load(open(os.path.join(folder, "manifest.json")))["entries"]
    warmed = _warm_all(folder, len(entries), workers, deadline_s * 0.45) if _device() == "cuda" else {}
    args = _inputs()
    expected = _reference(args)
    base = _load(folder, "base")
    t, s = base._prepare(args, {})
    _launcher(base, KERNELS[0])(t, s, dict(base.CONFIGS[KERNELS[0]][base.CHOSEN[KERNELS[0]]]))
    stats = {name: t[name].clone() for name in ("row_max", "row_sum", "d_row_sum")}
    result = dict(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)), shape=[B, H, S, D],
                  device=torch.cuda.get_device_name() if _device() == "cuda" else "cpu", torch=torch.__version__,
                  triton=__import__("triton").__version__, warm_s=round(time.time() - start, 1), rows=[])
    if _device() == "cuda":
        result["peers"] = _peers(args)
        print(json.dumps(result["peers"]), flush=True)
    rows = result["rows"]
    for index, entry in enumerate(entries):
        rows.append(_measure(folder, entry, args, expected, stats, warmed.get(index), start, deadline_s))
        _write(out, result)
    for variant in ("all", "merged", "base"):   # the best config found for each kernel, assembled
        picks = {k: _best(rows, variant, k) for k in _kernels(variant)}
        if all(picks.values()):
            entry = dict(file=variant, kernel="run", descriptors=True,
                         config={k: r["config"][k] for k, r in picks.items() if r["config"]})
            rows.append(dict(_measure(folder, entry, args, expected, stats, "ok", start, deadline_s + 30),
                             label="best per kernel"))
            _write(out, result)
    result["total_s"] = round(time.time() - start, 1)
    _write(out, result)


def _measure(folder, entry, args, expected, stats, warm_status, start, deadline_s) -> dict:
    import torch

    row = dict(entry)
    if time.time() - start > deadline_s:
        return dict(row, note="skipped: past the deadline")
    if warm_status not in (None, "ok"):
        return dict(row, note=f"not timed: {warm_status}")
    try:
        module, call, t = _prepared(folder, entry, args)
        for tensor in args[4:]:
            tensor.fill_(float("nan"))
        call()
        if _device() == "cuda":
            torch.cuda.synchronize()
        row["error"] = _check(module, entry, t, args, expected, stats)
        row["ran"] = dict(module.VARIANTS_RUN)
        if not row["error"] < TOLERANCE:
            row["note"] = "wrong result: not timed"
        elif _device() == "cuda":
            row["us"] = _bench(call)
    except Exception as err:  # noqa: BLE001 - a variant the GPU refuses: reported, the rest goes on
        row["failed"] = f"{type(err).__name__}: {str(err)[:300]}"
    print(json.dumps(row), flush=True)
    return row


def _write(out: str, result: dict) -> None:
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)


def smoke(folder: str) -> None:
    """Every variant's run() and each kernel alone at PROBE_SHAPE in Triton's interpreter (CPU)."""
    os.environ["TRITON_INTERPRET"] = "1"
    generate(folder)
    entries = json.load(open(os.path.join(folder, "manifest.json")))["entries"]
    seen, picked = set(), []
    for entry in entries:   # one entry per (file, kernel): the edits are what is checked
        if (entry["file"], entry["kernel"]) not in seen and not entry["config"]:
            seen.add((entry["file"], entry["kernel"]))
            picked.append(entry)
    picked += [dict(file="merged", kernel=KERNELS[2], config={}, descriptors=True)]
    args = _inputs()
    expected = _reference(args)
    base = _load(folder, "base")
    t, s = base._prepare(args, {})
    _launcher(base, KERNELS[0])(t, s, dict(base.CONFIGS[KERNELS[0]][base.CHOSEN[KERNELS[0]]]))
    stats = {name: t[name].clone() for name in ("row_max", "row_sum", "d_row_sum")}
    rows = [_measure(folder, entry, args, expected, stats, None, time.time(), 1e9) for entry in picked]
    bad = [row for row in rows if "failed" in row or not row.get("error", 1) < TOLERANCE]
    assert not bad, bad
    print(len(rows), "entries ran")


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    elif sys.argv[1] == "smoke":
        smoke(sys.argv[2])
    elif sys.argv[1] == "warm":
        warm(sys.argv[2], sys.argv[3])
    else:
        run(sys.argv[2], sys.argv[3], *(float(a) for a in sys.argv[4:5]))
