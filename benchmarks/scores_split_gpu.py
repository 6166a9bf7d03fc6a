"""softmax(Q·Kᵀ/√d) with the scores written, its key axis split: the statistics in chunks, then a 2-D store.

    python benchmarks/scores_split_gpu.py generate DIR       # here (TVM): DIR/today.py, DIR/compiled_split_<n>.py
    python3 benchmarks/scores_split_gpu.py run DIR OUT.json   # on the GPU (torch + triton only), 3-4 minutes
    TRITON_INTERPRET=1 python benchmarks/scores_split_gpu.py smoke  # the split kernels' numbers, no GPU

today.py is the program as compiled (SplitOnlineRows' price decides), compiled_split_<n>.py the split
the pass makes at n chunks (2, 4, 8; three kernels), each module timed through run() (its launches
replayed), per kernel (the profiler's CUDA times) and at each kernel's first four configs. The suite's module walks every key twice in one program per block of query rows (4096/32 = 128
programs on 132 SMs). The split form is two kernels, the ones the online split lowers to
(docs/passes.md, "Split online statistics"): A, on a (row tiles × chunks) grid, writes each chunk's
running max m and sum l; B, on a (row tiles × key tiles) grid, combines its rows' `splits` partials
(m = max m_c, l = Σ l_c·2^(m_c − m)) and recomputes its tile of scores, normalized, and stores it.
"split3" is the three-kernel form (a combine kernel between, B reading the combined m and l),
what the compiler emits (SplitOnlineRows). Timed at splits 1, 2, 4, 8, 16, 32 and a few tiles of each kernel; `do_bench` medians (L2 flushed)
with the Python launches (what the suite times) and of a CUDA graph's replay ("graph_us": the GPU alone),
every output checked against float64 first. torch.compile of the suite's peer beside.
"""

import json
import math
import os
import sys
import time

from probe_common import bench_us, graph_us, load_module, on_path, write_json

M, N, D = 4096, 4096, 128
SPLITS = (1, 2, 4, 8, 16, 32)
# SCORES_PROBE_QUICK=1: the compiled modules only, configs swept in compiled_split_4 alone (no torch.compile,
# no hand-written sweep): about a minute
QUICK = os.environ.get("SCORES_PROBE_QUICK") == "1"
SWEEP_SECONDS = 30   # the hand-written sweep stops here (after the modules'): a full run takes 3 to 4 minutes
STATS_TILES = ((64, 64, 4), (128, 64, 8), (64, 128, 4))      # (rows, keys, warps) of kernel A
STORE_TILES = ((64, 128, 4), (128, 128, 8), (64, 256, 8), (128, 64, 4), (32, 256, 4))   # kernel B


FORCED_SPLITS = (2, 4, 8)   # the compiled split at each of these counts (compiled_split_<n>)
STORE_SWEPT_IN = "compiled_split_4"   # the module whose store tiles are swept (the store is alike in all)


def generate(out: str) -> None:
    on_path()
    from attention_scores import make_attention_scores
    from triton_codegen import compile

    from tir_passes.passes import split_online_rows
    from tir_passes.passes.online_split_sizes import OnlineSplitPrice

    os.makedirs(out, exist_ok=True)
    priced = split_online_rows.online_splits
    for splits in (None, *FORCED_SPLITS):
        # the price decides `today`; compiled_split_<n> is the split the pass makes at n chunks
        if splits is not None:
            split_online_rows.online_splits = lambda spec, walk, chunked=None, n=splits: OnlineSplitPrice(n, 0.0, 1.0)
        try:
            kernel = compile(make_attention_scores(M, N, D), verify=False)
        finally:
            split_online_rows.online_splits = priced
        name = "today" if splits is None else f"compiled_split_{splits}"
        kernel.save(os.path.join(out, f"{name}.py"))
        print(name, len(kernel.program.kernels), "kernel(s)")


def _kernel_us(torch, launch, calls: int = 20) -> dict[str, float]:
    """Each kernel's mean GPU time (the profiler's CUDA events) over `calls` launches of the module."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                launch()
            torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001 - reported in the row, the rest goes on
        return {"error": str(err)[:200]}
    times = {}
    for event in prof.key_averages():   # device_time is the per-call mean (torch 2.11)
        if event.device_type == torch.autograd.DeviceType.CUDA and "kernel" in event.key:
            mean = getattr(event, "device_time", None)
            times[event.key] = mean if mean is not None else event.cuda_time
    return times


# configs appended to a compiled module's CONFIGS (a reader may edit them) by the role of the kernel: the
# hand-written split's best tiles (2026-12-02) and neighbours, one K step of the 128-wide head each
EXTRA_CONFIGS = {
    "stats": [{"BLOCK_I_M": rows, "BLOCK_J": keys, "BLOCK_AX0": 128, "num_warps": 4, "num_stages": 3}
              for rows, keys in ((64, 128), (64, 64), (128, 128))],
    "store": [{"BLOCK_M": rows, "BLOCK_N": cols, "BLOCK_K": 128, "num_warps": warps, "num_stages": 2}
              for rows, cols, warps in ((64, 128, 4), (128, 64, 4), (128, 128, 8), (64, 256, 8), (128, 128, 4))],
}


def _role(module, kernel: str) -> str | None:
    """"stats" (the split's statistics: BLOCK_I_M and BLOCK_J), "store" (its 2-D store: BLOCK_M and
    BLOCK_N) or None (the combine, or the unsplit kernel)."""
    config = module.CONFIGS[kernel][0]
    if "BLOCK_J" in config and "BLOCK_J_2" not in config:
        return "stats"
    return "store" if "BLOCK_N" in config and len(module.CHOSEN) > 1 else None


def _configs(module, store_sweep: bool):
    """(kernel, config index) of each kernel's first four configs, then the EXTRA_CONFIGS of its role
    appended to its CONFIGS; the store's only where `store_sweep`, the combine's not in QUICK mode."""
    chosen = []
    for name in module.CHOSEN:
        configs, role = module.CONFIGS[name], _role(module, name)
        if (role == "store" and not store_sweep) or (QUICK and role is None):
            continue   # the store kernel is the same at every split count: swept in one module
        extra = [config for config in EXTRA_CONFIGS.get(role, []) if config not in configs]
        chosen += [(name, index) for index in range(min(4, len(configs)))]
        chosen += [(name, len(configs) + index) for index in range(len(extra))]
        configs.extend(extra)
    return chosen


def _fastest_alone(kernel: str, pool: list[dict]):
    """The config of `kernel` with the least GPU time (graph_us) among the rows of one module (`pool`)
    that changed it alone and checked right; None where that module's default is as fast."""
    base = next((r for r in pool if "kernel" not in r), None)
    right = [r for r in pool if r.get("kernel") == kernel and isinstance(r.get("graph_us"), float)
             and r.get("max_abs_error", 1.0) < 1e-4]
    best = min(right, key=lambda r: r["graph_us"], default=None)
    if best is None or base is None or not isinstance(base.get("graph_us"), float) \
            or best["graph_us"] >= base["graph_us"]:
        return None
    return best["config"]


def _at_fastest(module, rows: list[dict], variant: str, store_rows: list[dict]) -> None:
    """Each kernel of the module at its fastest config alone: the store's from `store_rows` (the rows of
    the one module that swept it), the others' from this module's rows."""
    for kernel in module.CHOSEN:
        pool = store_rows if _role(module, kernel) == "store" else [r for r in rows if r["variant"] == variant]
        config = _fastest_alone(kernel, pool)
        if config is None:
            continue
        if config not in module.CONFIGS[kernel]:
            module.CONFIGS[kernel].append(config)
        module.CHOSEN[kernel] = module.CONFIGS[kernel].index(config)


def _kernels():
    import triton
    from scores_split_kernels import combine, stats, store

    return triton, stats, store, combine


def _split(kernels, q, k, p, m_part, l_part, splits, a, b, combined=None):
    """The two kernels (B combines its rows' partials); with `combined` (two M-float buffers), three:
    a combine kernel between them, B reading the combined statistics (what the compiler emits today)."""
    _, stats, store, combine = kernels
    scale_log2 = 1.4426950408889634 / math.sqrt(D)

    def launch():
        stats[(M // a[0], splits)](q, k, m_part, l_part, N // splits, scale_log2, D=D, BLOCK_I=a[0],
                                   BLOCK_J=a[1], num_warps=a[2], num_stages=3)
        if combined is None:
            store[(N // b[1], M // b[0])](q, k, p, m_part, l_part, splits, M, scale_log2, D=D, N=N,
                                          BLOCK_I=b[0], BLOCK_J=b[1], num_warps=b[2], num_stages=2)
            return
        combine[(M // min(M, 128),)](m_part, l_part, combined[0], combined[1], splits, M, scale_log2,
                                     BLOCK_I=min(M, 128))
        store[(N // b[1], M // b[0])](q, k, p, combined[0], combined[1], 1, M, scale_log2, D=D, N=N,
                                      BLOCK_I=b[0], BLOCK_J=b[1], num_warps=b[2], num_stages=2)
    return launch


def smoke() -> None:
    """The split kernels' numbers in Triton's interpreter at a small size (no GPU): TRITON_INTERPRET=1."""
    import torch

    global M, N, D
    M, N, D = 64, 256, 32
    kernels = _kernels()
    q, k, p, reference, m_part, l_part = _tensors(torch, "cpu")
    combined = (torch.empty(M), torch.empty(M))
    for splits in (1, 4):
        for three in (None, combined):
            p.fill_(float("nan"))
            _split(kernels, q, k, p, m_part, l_part, splits, (32, 32, 4), (32, 64, 4), three)()
            error = (p.double() - reference).abs().max().item()
            assert error < 1e-5, (splits, error)
            print("splits", splits, "three kernels" if three else "two kernels", "max abs error", error)


def _tensors(torch, device):
    generator = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(M, D, generator=generator, device=device).half()
    k = torch.randn(N, D, generator=generator, device=device).half()
    p = torch.full((M, N), float("nan"), device=device, dtype=torch.float32)
    reference = torch.softmax((q.double() @ k.double().T) / math.sqrt(D), dim=1)
    m_part = torch.empty(max(SPLITS) * M, device=device, dtype=torch.float32)
    return q, k, p, reference, m_part, torch.empty_like(m_part)


def run(folder: str, out: str) -> None:
    import torch

    began = time.time()
    q, k, p, reference, m_part, l_part = _tensors(torch, "cuda")

    def timed(launch):
        """(µs with the Python launches, max error, µs of a CUDA graph's replay: the GPU time alone)."""
        p.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        error = ((p.double() - reference).abs().max()).item()
        return bench_us(launch, rep=25, warmup=5), error, graph_us(launch)

    rows = []
    split_names = [f"compiled_split_{n}" for n in FORCED_SPLITS]
    for name in ("today", *sorted(split_names, key=lambda name: name != STORE_SWEPT_IN)):   # the store's sweep first
        path = os.path.join(folder, f"{name}.py")
        if not os.path.exists(path):
            continue
        module, variant = load_module(path, name), f"{name} (module)"
        us, error, graph = timed(lambda module=module: module.run(q, k, p))
        rows.append({"variant": variant, "us": us, "graph_us": graph, "max_abs_error": error,
                     "kernels": len(module.LAUNCHERS), "kernel_us": _kernel_us(torch, lambda m=module: m.run(q, k, p)),
                     "chosen": {kernel: module.CONFIGS[kernel][index] for kernel, index in module.CHOSEN.items()}})
        print(rows[-1], flush=True)
        default = dict(module.CHOSEN)
        sweep_here = not QUICK or name == STORE_SWEPT_IN
        for kernel, index in _configs(module, store_sweep=name == STORE_SWEPT_IN) if sweep_here else ():
            if index == default[kernel]:
                continue
            module.CHOSEN.update(default, **{kernel: index})
            row = {"variant": variant, "kernel": kernel, "config": module.CONFIGS[kernel][index]}
            try:
                us, error, graph = timed(lambda module=module: module.run(q, k, p))
                rows.append({**row, "us": us, "graph_us": graph, "max_abs_error": error})
            except Exception as err:  # noqa: BLE001 - reported, the rest goes on
                rows.append({**row, "error": str(err)[:200]})
            print(rows[-1], flush=True)
        if len(default) > 1:
            module.CHOSEN.update(default)
            _at_fastest(module, rows, variant, [r for r in rows if r["variant"] == f"{STORE_SWEPT_IN} (module)"])
            us, error, graph = timed(lambda module=module: module.run(q, k, p))
            rows.append({"variant": variant, "kernel": "each at its fastest", "us": us, "graph_us": graph,
                         "max_abs_error": error, "kernel_us": _kernel_us(torch, lambda m=module: m.run(q, k, p)),
                         "chosen": {kernel: module.CONFIGS[kernel][index] for kernel, index in module.CHOSEN.items()}})
            print(rows[-1], flush=True)
        module.CHOSEN.update(default)
    if QUICK:
        write_json(out, {"rows": rows, "summary": {"quick": True, "device": torch.cuda.get_device_name(),
                                                   "seconds": time.time() - began}})
        return
    compiled = torch.compile(lambda a, b: torch.softmax((a @ b.T).float() / math.sqrt(D), dim=1))
    compiled(q, k)
    rows.append({"variant": "torch.compile", "us": bench_us(lambda: compiled(q, k), rep=25, warmup=5),
                 "graph_us": graph_us(lambda: compiled(q, k))})
    print(rows[-1], flush=True)
    sweep_began = time.time()   # after torch.compile's cold compile
    kernels = _kernels()
    combined = (torch.empty(M, device="cuda"), torch.empty(M, device="cuda"))
    for splits in SPLITS:
        for a in STATS_TILES:
            for b in STORE_TILES:
                if N // splits < a[1] or time.time() - sweep_began > SWEEP_SECONDS:
                    continue   # past SWEEP_SECONDS: the rest of the sweep is left out
                forms = [("split", None)] + ([("split3", combined)] if a in STATS_TILES[:2] and b in STORE_TILES[:3]
                                             else [])
                for variant, three in forms:
                    row = {"variant": variant, "splits": splits, "stats": a, "store": b}
                    try:
                        us, error, graph = timed(_split(kernels, q, k, p, m_part, l_part, splits, a, b, three))
                    except Exception as err:  # noqa: BLE001 - reported, the rest goes on
                        rows.append({**row, "error": str(err)[:200]})
                        continue
                    rows.append({**row, "us": us, "graph_us": graph, "max_abs_error": error})
                    print(rows[-1], flush=True)
    best = {}
    for r in rows:
        key = f'{r["variant"]} {r.get("splits")}'
        if r["variant"].startswith("split") and "us" in r and (key not in best or r["us"] < best[key]["us"]):
            best[key] = r
    fastest_gpu = {}
    for r in rows:
        key = f'{r["variant"]} {r.get("splits")}'
        if isinstance(r.get("graph_us"), float) and (key not in fastest_gpu
                                                     or r["graph_us"] < fastest_gpu[key]["graph_us"]):
            fastest_gpu[key] = r
    summary = {"best_graph_per_variant": [fastest_gpu[key] for key in sorted(fastest_gpu)],
               "sweep_complete": time.time() - sweep_began <= SWEEP_SECONDS, "best_per_split": [best[key] for key in sorted(best)], "write_floor_us": M * N * 4 / 4.8e6,
               "device": torch.cuda.get_device_name(), "seconds": time.time() - began}
    write_json(out, {"rows": rows, "summary": summary})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["generate"]:
        generate(sys.argv[2])
    elif sys.argv[1:2] == ["smoke"]:
        smoke()
    elif sys.argv[1:2] == ["run"]:
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
