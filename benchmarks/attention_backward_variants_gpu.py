"""Attention's backward (the streamed kernels) on the GPU: each kernel alone, its tiles, and edits.

    python benchmarks/attention_backward_variants_gpu.py generate DIR      # here (TVM): DIR/*.py + DIR/manifest.json
    python3 benchmarks/attention_backward_variants_gpu.py run DIR OUT.json  # on the GPU (torch + triton only), <= 200 s
    PROBE_SHAPE=1,2,128,16 PROBE_REGISTERS=600 python benchmarks/attention_backward_variants_gpu.py smoke DIR  # CPU

`generate` compiles the suite's case (`differentiate(make_attention(2, 16, 2048, 128), ["Q", "K", "V"])`,
docs/autodiff.md "Attention's backward") and writes it with source variants beside it, each testing one
hypothesis of where the time goes (a probe may edit the generated text; the product may not). The kernels
are read from the compiled program (the statistics walk, dQ's walk, dK/dV's walk since LoopFusion's share
step; 4 kernels before it), so the probe follows the product's structure:

- onek: the dQ kernel's second load of the K tile (the dot's other axis name for the head dimension) as the
  first; oneo: the dK/dV kernel's second load of the dO tile likewise (dP's operand and dV's operand);
- recip: `x / row_sum[..]` in the walk as `x * (1.0 / row_sum)[..]` (one reciprocal per row, not a division
  per element per step);
- all: the three.

`run` times each kernel alone (its launcher on the module's prepared buffers, the statistics kernel run
first) at its default config and at other tiles (rows x walk / warps / stages), checks each kernel's output
against torch autograd in fp32 (dQ, dK, dV) or the default statistics (the statistics kernel), then whole
`run()`s: as generated, with the edits, with the best config found per kernel, and SDPA's backward (default,
cuDNN, flash) as the peers. Compiles happen first in worker processes (Triton's cache keeps them). Medians of
do_bench (L2 flushed), µs.

Measured on the H200 (2026-12-02, the 4-kernel form; benchmarks/results/2026-12-02-h200-attention-backward-variants.json;
the table is in docs/autodiff.md, "Where the time goes"): kernels alone 144.5 / 255.6 / 275.9 / 166.7 µs as
generated; dQ 203.6 and dK 245.9 at 3 stages; dV 144.1 with plscale; dK and dV merged by hand 263.2; SDPA's
default backward 355.5. The 3 stages, the nocast and plscale forms and the merge are the product's since.
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
# (rows, walk, warps, stages): the grid axis's block, the walked axis's block
SWEEP = ((128, 64, 8, 2), (128, 64, 8, 3), (128, 64, 4, 2), (128, 32, 4, 2), (128, 32, 4, 3), (128, 32, 4, 5),
         (128, 32, 8, 3), (64, 64, 4, 2), (64, 64, 4, 3), (128, 128, 8, 2), (64, 32, 4, 3), (64, 128, 4, 2),
         (64, 64, 8, 3))
SWEEP0 = ((128, 64, 4, 2), (128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 4, 3), (128, 32, 4, 3))
TOLERANCE = 1e-2   # relative Frobenius error of each gradient against fp32 autograd
STATISTICS = ("row_max", "row_sum", "d_row_sum")
GRADIENTS = ("d_Q", "d_K", "d_V")


# --- source edits: each takes the module's text and returns it changed (or raises) ---

def _changed(before: str, after: str, what: str) -> str:
    if before == after:
        raise ValueError(f"{what}: the pattern is not in the generated text")
    return after


def _second_load_as_first(text: str, tile: str, what: str) -> str:
    """`<tile>_1 = <load>` as `<tile>_1 = <tile>`: the same rows and the whole head dimension, loaded under
    another axis name (the product's form since Tiling shares a whole tile's axis with every block of its loop:
    then there is no second load and the edit is a no-op)."""
    if not re.search(rf"^\s+{tile}_1 = ", text, flags=re.M):
        return text
    return _changed(text, re.sub(rf"^(\s+){tile}_1 = .*$", rf"\1{tile}_1 = {tile}", text, flags=re.M), what)


def one_k(text: str) -> str:
    return _second_load_as_first(text, "K_tile", "onek")


def one_o(text: str) -> str:
    return _second_load_as_first(text, "d_O_tile", "oneo")


def reciprocal(text: str) -> str:
    out = re.sub(r"\((\w+) / (row_sum_tile\w*)(\[[^\]]*\])\)", r"(\1 * (1.0 / \2)\3)", text)
    return _changed(text, out, "recip")


EDITS = {"onek": one_k, "oneo": one_o, "recip": reciprocal}
VARIANTS = {"base": (), "onek": ("onek",), "oneo": ("oneo",), "recip": ("recip",), "all": ("onek", "oneo", "recip")}


def _writes_of(blocks) -> list:
    """What a kernel writes, from its TIR blocks: the statistics, or the gradients it totals."""
    if "row_max" in blocks:
        return list(STATISTICS)
    return [name for name in GRADIENTS if f"{name}_total" in blocks]


def _plan(kernels: list) -> list:
    """(file, kernel or "run", {kernel: (rows, walk, warps, stages)}, descriptors), most telling first."""
    plan = [("base", "run", {}, True), ("all", "run", {}, True), ("base", "run", {}, False)]
    for variant in ("base", "all"):
        for kernel in kernels:
            statistics = kernel == kernels[0]
            if statistics and variant != "base":
                continue   # no edit reaches the statistics kernel
            for config in (SWEEP0 if statistics else SWEEP):
                plan.append((variant, kernel, {kernel: config}, True))
    for variant in ("onek", "oneo", "recip"):
        plan.append((variant, "run", {}, True))
    plan += [("base", kernel, {}, False) for kernel in kernels]
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
    kernel = compile(differentiate(make_attention(B, H, S, D), ["Q", "K", "V"]), verify=False, **options)
    text = kernel.source
    for variant, edits in VARIANTS.items():
        edited = text
        for edit in edits:
            edited = EDITS[edit](edited)
        builtins.compile(edited, variant, "exec")
        with open(os.path.join(out, f"{variant}.py"), "w") as handle:
            handle.write(edited)
    kernels = {k.name: _writes_of(k.source_blocks) for k in kernel.program.kernels}
    if next(iter(kernels.values())) != list(STATISTICS):
        raise ValueError(f"the first kernel is not the statistics walk: {kernels}")
    manifest = [dict(file=f, kernel=k, config={n: list(c) for n, c in cfg.items()}, descriptors=d)
                for f, k, cfg, d in _plan(list(kernels))]
    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(dict(shape=[B, H, S, D], kernels=kernels, entries=manifest), handle, indent=1)
    print(f"{len(manifest)} entries, {len(VARIANTS)} variants, kernels {kernels} in {out}")


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


def _run_statistics(module, t, s) -> None:
    """The statistics kernel at its default config: the other kernels read what it writes."""
    kernel = _statistics_kernel()
    _launcher(module, kernel)(t, s, dict(module.CONFIGS[kernel][module.CHOSEN[kernel]]))


KERNELS: dict = {}   # kernel name: what it writes, in launch order (the manifest's, read by _entries)


def _entries(folder: str) -> list:
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    KERNELS.clear()
    KERNELS.update(manifest["kernels"])
    return manifest["entries"]


def _statistics_kernel() -> str:
    return next(iter(KERNELS))


def _writes(kernel: str, t: dict) -> list:
    """(name, tensor) the kernel writes: the statistics, or its gradients."""
    return [(name, t[name]) for name in KERNELS[kernel]]


def _relative(got, expected) -> float:
    return ((got.double() - expected.double()).norm() / expected.double().norm()).item()


def _prepared(folder: str, entry: dict, args):
    """(module, the callable the entry times): the whole run(), or one kernel on prepared buffers."""
    module = _load(folder, entry["file"])
    module.USE_DESCRIPTORS = entry["descriptors"]
    configs = {kernel: _config(module, kernel, entry["config"].get(kernel)) for kernel in KERNELS}
    if entry["kernel"] == "run":
        for kernel, config in configs.items():
            module.CONFIGS[kernel].append(config)
            module.CHOSEN[kernel] = len(module.CONFIGS[kernel]) - 1
        return module, lambda: module.run(*args), None
    t, s = module._prepare(args, {})
    _run_statistics(module, t, s)
    kernel, config = entry["kernel"], configs[entry["kernel"]]
    return module, lambda: _launcher(module, kernel)(t, s, config), t


def warm(folder: str, indices: str) -> None:
    """Entries launched once each (a worker: Triton's cache keeps what it compiled); a line per entry."""
    import torch

    entries = _entries(folder)
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
    written = _writes(entry["kernel"], t)
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
    variant = "base" if kernel == _statistics_kernel() else variant
    timed = [r for r in rows if r["file"] == variant and r["kernel"] == kernel and r.get("us") and r["descriptors"]]
    return min(timed, key=lambda r: r["us"]) if timed else None


def run(folder: str, out: str, deadline_s: float = 200, workers: int = 14) -> None:
    import torch

    start = time.time()
    entries = _entries(folder)
    warmed = _warm_all(folder, len(entries), workers, deadline_s * 0.45) if _device() == "cuda" else {}
    args = _inputs()
    expected = _reference(args)
    base = _load(folder, "base")
    t, s = base._prepare(args, {})
    _run_statistics(base, t, s)
    stats = {name: t[name].clone() for name in STATISTICS}
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
    for variant in ("all", "base"):   # the best config found for each kernel, assembled
        picks = {k: _best(rows, variant, k) for k in KERNELS}
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
    entries = _entries(folder)
    seen, picked = set(), []
    for entry in entries:   # one entry per (file, kernel): the edits are what is checked
        if (entry["file"], entry["kernel"]) not in seen and not entry["config"]:
            seen.add((entry["file"], entry["kernel"]))
            picked.append(entry)
    args = _inputs()
    expected = _reference(args)
    base = _load(folder, "base")
    t, s = base._prepare(args, {})
    _run_statistics(base, t, s)
    stats = {name: t[name].clone() for name in STATISTICS}
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
