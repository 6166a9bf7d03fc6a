"""Issue 17's two GEMM misses, one GPU call: the generated kernels of the suite's cases
`matmul_fp16_3000x5000x1000` and `linear_decode_fp16_16x4096x4096`, each timed as generated and as
edits of the generated text (tiles, stages, warps, GROUP_M, a persistent grid with and without
`flatten`, TMA stores of the output in sub-tiles, descriptor vs pointer loads, the decode step's dot
swapped so that W's rows are the MMA's M, a one-kernel split-K whose last slice to finish sums the
partials in a fixed order, the two-kernel split), beside cuBLAS and a copy of the case's bytes.

    python benchmarks/suite.py generate DIR --only matmul_fp16_3000x5000x1000,linear_decode_fp16_16x4096x4096
    python3 benchmarks/gemm_variants_gpu.py run DIR OUT.json [--workers 12]   # GPU: torch + triton only
    python benchmarks/gemm_variants_gpu.py smoke                              # CPU: every edit, interpreter

Rows {"case", "variant", "config", "us", "error"} (do_bench median, L2 flushed; "graph_us": a CUDA
graph's replay, the GPU time without Python's launches, where asked). Errors are ‖out − ref‖/‖ref‖
against float64. A variant that does not compile or fit is a row with "failed". Each case's six
fastest variants, ours and the peers are timed again at the end ("round": 2). The run of 2026-12-02
(benchmarks/results/2026-12-02-h200-gemm-variants.json; docs/benchmarks.md) has the first round
only: its second stopped at its first row (a timed call bound the later case's module, fixed since).
"""

import itertools
import json
import os
import re
import subprocess
import sys
import time

from probe_common import RowLog, bench_us, failure, graph_us, load_module

MATMUL = "matmul_fp16_3000x5000x1000"
DECODE = "linear_decode_fp16_16x4096x4096"
SMS = 132
DEADLINE_S = 215       # from the start of `run`, warm-up included (the GPU call's limit is 240 s)
WARM_LIMIT_S = 100
SECOND_ROUND = 6       # the fastest variants of each case timed again, interleaved with the peers


# --- edits of the generated text --------------------------------------------------------------------

def kernel_text(module_text: str, name: str) -> str:
    """The `@triton.jit def name(...)` block of a generated module."""
    start = module_text.index(f"@triton.jit\ndef {name}(")
    end = module_text.index("\n\n\n", start)
    return module_text[start:end] + "\n"


def _sub(text: str, old: str, new: str) -> str:
    if old not in text:
        raise ValueError(f"edit target not found: {old[:80]!r}")
    return text.replace(old, new)


def matmul_edit(text: str, flatten=False, ws=False, store_sub=0) -> str:
    """The `_tma` matmul kernel with its tile loop flattened (pipelined across tiles) or warp
    specialized, and its output stored through a descriptor in `store_sub` column pieces."""
    loop = "tl.range(tl.program_id(0), tiles, tl.num_programs(0))"
    extra = (", flatten=True" if flatten else "") + (", warp_specialize=True" if ws else "")
    text = _sub(text, loop, loop[:-1] + extra + ")")
    if store_sub:
        text = _sub(text, "A_desc, B_desc, BLOCK_M", "A_desc, B_desc, C_desc, BLOCK_M")
        store = re.search(r"\n( +)tl\.store\(C_ptr \+ .*\)\n", text)
        pad = store.group(1)
        lines, pieces = [], ["acc_C_1"]
        while len(pieces) < store_sub:   # halve every piece's columns: reshape, permute, split
            width = f"BLOCK_N // {2 * len(pieces)}"
            halves = []
            for p in pieces:
                lines.append(f"{p}_a, {p}_b = tl.split(tl.permute(tl.reshape({p}, (BLOCK_M, 2, {width})), (0, 2, 1)))")
                halves += [f"{p}_a", f"{p}_b"]
            pieces = halves
        for index, p in enumerate(pieces):
            lines.append(f"C_desc.store([i_0 * BLOCK_M, j_0 * BLOCK_N + {index} * (BLOCK_N // {store_sub})], {p})")
        text = text[:store.start()] + "\n" + "".join(pad + line + "\n" for line in lines) + text[store.end():]
    return text


def decode_swap(text: str) -> str:
    """The linear kernel with the dot written W·Xᵀ: W's BLOCK_N rows become the MMA's M (wgmma
    needs 64), X's 16 rows its N; the accumulator transposed back before the store."""
    text = _sub(text, "acc_acc_1 = tl.full([BLOCK_M, BLOCK_N]", "acc_acc_1 = tl.full([BLOCK_N, BLOCK_M]")
    text = _sub(text, "tl.dot(X_tile, tl.trans(W_tile), acc_acc_1)", "tl.dot(W_tile, tl.trans(X_tile), acc_acc_1)")
    return _sub(text, "acc_2 = acc_acc_1", "acc_2 = tl.trans(acc_acc_1)")


def decode_fixup(text: str, name: str) -> str:
    """The linear pointer kernel split over K on grid axis 1 (SPLIT slices of K // SPLIT), each
    slice writing fp32 partials P[slice]; the slice that finishes last (a per-tile counter) sums
    them in slice order (the same bits every run) and stores Y, then resets the counter."""
    text = _sub(text, "def linear_kernel0(", f"def {name}(")
    text = _sub(text, "GROUP_M: tl.constexpr)", "GROUP_M: tl.constexpr, P_ptr, L_ptr, SPLIT: tl.constexpr)")
    loop = re.search(r"for ax0_0 in range\(0, tl\.cdiv\((\d+), BLOCK_K\)\):", text)
    k = int(loop.group(1))
    text = text.replace(loop.group(0), f"for ax0_0 in range(tl.program_id(1) * ({k} // SPLIT // BLOCK_K), "
                                       f"(tl.program_id(1) + 1) * ({k} // SPLIT // BLOCK_K)):")
    store = re.search(r"\n( +)tl\.store\(Y_ptr \+ (.*), acc_2\.to\(tl\.float16\)\)\n", text)
    pad, offsets = store.group(1), store.group(2)
    body = [
        "tile_offsets = i[:, None] * Y_stride0 + j[None, :]",
        "tile_elements = num_m * BLOCK_M * Y_stride0",
        "tl.store(P_ptr + tl.program_id(1) * tile_elements + tile_offsets, acc_2)",
        "tl.debug_barrier()",
        "arrived = tl.atomic_add(L_ptr + tl.program_id(0), 1, sem='acq_rel', scope='gpu')",
        "if arrived == SPLIT - 1:",
        "    total = tl.load(P_ptr + tile_offsets, cache_modifier='.cg')",
        "    for s in tl.static_range(1, SPLIT):",
        "        total += tl.load(P_ptr + s * tile_elements + tile_offsets, cache_modifier='.cg')",
        f"    tl.store(Y_ptr + {offsets}, total.to(tl.float16))",
        "    tl.atomic_xchg(L_ptr + tl.program_id(0), 0)",
    ]
    return text[:store.start()] + "\n" + "".join(pad + line + "\n" for line in body) + text[store.end():]


SPLIT_SUM = '''
@triton.jit
def split_sum(P, Y, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.load(P + offs)
    for s in tl.static_range(1, SPLIT):
        total += tl.load(P + s * MN + offs)
    tl.store(Y + offs, total.to(tl.float16))
'''


def decode_partial(text: str) -> str:
    """The fixup kernel's split without the fixup: partials only (the two-kernel split's first)."""
    text = decode_fixup(text, "linear_partial")
    return text[:text.index("        tl.debug_barrier()")] if "        tl.debug_barrier()" in text else \
        text[:text.index("    tl.debug_barrier()")]


def variant_module(folder: str, name: str, kernels: list[str]) -> object:
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as handle:
        handle.write("import triton\nimport triton.language as tl\n\n\n" + "\n\n".join(kernels))
    return load_module(path, name)


# --- the variants ------------------------------------------------------------------------------------

def matmul_variants(smoke: bool) -> list[dict]:
    """(label, kernel edit, config, programs an SM: 0 a program a tile)."""
    def v(bm, bn, bk, stages, warps=8, group=8, sms=0, flatten=False, ws=False, sub=0, label=""):
        edit = dict(flatten=flatten, ws=ws, store_sub=sub)
        name = label or (f"{bm}x{bn}x{bk} s{stages} w{warps}" + (f" g{group}" if group != 8 else "") +
                         (f" persistent {sms}/SM" if sms else "") + (" flatten" if flatten else "") +
                         (" warp-specialized" if ws else "") + (f" TMA store /{sub}" if sub else ""))
        return dict(variant=name, edit=edit, config=dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
                                                         num_warps=warps, num_stages=stages), sms=sms)
    if smoke:
        return [v(128, 128, 16, 2, 4), v(128, 128, 16, 2, 4, sms=1, flatten=True, sub=2),
                v(128, 256, 16, 2, 4, sub=4)]
    return [
        v(128, 256, 64, 4), v(128, 256, 64, 3), v(256, 128, 64, 4), v(256, 128, 64, 3),
        v(128, 256, 32, 4), v(128, 256, 32, 6), v(128, 256, 32, 8),
        v(128, 128, 64, 3, 4), v(128, 128, 64, 4, 4), v(128, 128, 64, 4, 8, sms=1, flatten=True),
        v(128, 256, 64, 4, sms=1), v(128, 256, 64, 4, sms=1, flatten=True), v(128, 256, 64, 2, sms=1, flatten=True),
        v(128, 256, 32, 3, sms=1, flatten=True), v(128, 256, 32, 4, sms=1, flatten=True),
        v(128, 256, 64, 3, sub=2), v(128, 256, 64, 3, sub=4), v(128, 256, 64, 4, sub=4),
        v(128, 256, 64, 3, sms=1, flatten=True, sub=4), v(128, 256, 32, 4, sms=1, flatten=True, sub=4),
        v(128, 256, 64, 3, sms=1, sub=4), v(256, 128, 64, 3, sms=1, flatten=True, sub=4),
        v(128, 256, 64, 4, group=1), v(128, 256, 64, 4, group=4), v(128, 256, 64, 4, group=16),
        v(128, 256, 64, 4, sms=1, flatten=True, sub=4), v(128, 256, 64, 3, sms=1, flatten=True, sub=2),
        v(128, 256, 32, 6, sms=1, flatten=True, sub=4), v(256, 128, 64, 4, sms=1, flatten=True, sub=4),
        v(128, 256, 64, 4, sms=1, flatten=True, sub=4, group=4), v(128, 256, 64, 4, sms=2, flatten=True, sub=4),
        v(128, 256, 64, 3, sms=1, flatten=True, ws=True, sub=4),
    ]


def decode_variants(smoke: bool) -> list[dict]:
    """(label, kind: pointers / tma / swap / fixup / two kernels, config)."""
    def v(kind, bn, bk, stages, warps=4, split=1):
        name = f"{kind} 16x{bn}x{bk} s{stages} w{warps}" + (f" split {split}" if split > 1 else "")
        return dict(variant=name, kind=kind, split=split,
                    config=dict(BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages))
    if smoke:
        return [v("pointers", 32, 64, 2), v("tma", 32, 64, 2), v("swap", 64, 64, 2), v("fixup", 32, 64, 2, split=4),
                v("two kernels", 32, 64, 2, split=4)]
    found = []
    for bn, bk, stages in itertools.product((16, 32, 64, 128), (128, 256, 512), (3, 4, 6)):
        if (16 + bn) * bk * 2 * stages <= 200_000 and bn * bk <= 64 * 512:
            found.append(v("pointers", bn, bk, stages))
    found += [v("pointers", 32, 256, 4, 2), v("pointers", 32, 256, 4, 8), v("pointers", 64, 128, 4, 8),
              v("pointers", 64, 256, 4, 8)]
    found += [v("tma", bn, bk, s) for bn, bk, s in ((32, 128, 4), (32, 256, 4), (64, 128, 4), (64, 256, 4),
                                                     (32, 256, 6), (64, 128, 6), (128, 128, 4))]
    found += [v("swap", bn, bk, s) for bn, bk, s in ((64, 128, 4), (64, 256, 4), (128, 128, 4), (64, 256, 6))]
    found += [v("fixup", bn, bk, st, split=s) for bn, bk, s, st in (
        (64, 128, 2, 4), (64, 128, 4, 4), (64, 256, 4, 4), (128, 128, 4, 4), (128, 128, 8, 4), (64, 128, 8, 4),
        (128, 256, 4, 3), (256, 128, 8, 3), (32, 128, 4, 4), (32, 256, 2, 4))]
    found += [v("two kernels", 64, 128, 4, split=s) for s in (2, 4)] + [v("two kernels", 128, 128, 4, split=8)]
    return found


# --- launching ---------------------------------------------------------------------------------------

class Probe:
    def __init__(self, folder: str, scratch: str, smoke: bool):
        import torch

        self.folder, self.scratch, self.smoke = folder, scratch, smoke
        self.device = "cpu" if smoke else "cuda"
        self.torch = torch
        os.makedirs(scratch, exist_ok=True)
        self.texts = {case: open(os.path.join(folder, f"{case}.py")).read() for case in (MATMUL, DECODE)}
        self.modules = {case: load_module(os.path.join(folder, f"{case}.py"), f"generated_{case}")
                        for case in (MATMUL, DECODE)}
        self._made = {}

    def kernel(self, key: str, make) -> object:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    # matmul
    def matmul_call(self, variant: dict, a, b, c):
        import triton
        from triton.tools.tensor_descriptor import TensorDescriptor

        edit, config = variant["edit"], dict(variant["config"])
        key = "matmul_" + "_".join(f"{k}{int(v)}" for k, v in sorted(edit.items()))
        text = matmul_edit(kernel_text(self.texts[MATMUL], "matmul_kernel0_tma"), **edit)
        module = self.kernel(key, lambda: variant_module(self.scratch, key, [text]))
        kernel = module.matmul_kernel0_tma
        bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        tiles = triton.cdiv(a.shape[0], bm) * triton.cdiv(b.shape[1], bn)
        programs = min(tiles, variant["sms"] * self.sms()) if variant["sms"] else tiles
        extra = {}
        if edit["store_sub"]:
            extra["C_desc"] = lambda: TensorDescriptor(c, list(c.shape), list(c.stride()), [bm, bn // edit["store_sub"]])

        def call():
            descs = dict(A_desc=TensorDescriptor(a, list(a.shape), list(a.stride()), [bm, bk]),
                         B_desc=TensorDescriptor(b, list(b.shape), list(b.stride()), [bk, bn]),
                         **{name: make() for name, make in extra.items()})
            kernel[(programs,)](a, a.stride(0), a.stride(1), b, b.stride(0), b.stride(1), c, c.stride(0), c.stride(1),
                                **descs, **config)
        return call

    def sms(self) -> int:
        if self.smoke:
            return 4
        return self.torch.cuda.get_device_properties(0).multi_processor_count

    # decode
    def decode_call(self, variant: dict, x, w, y):
        import triton
        from triton.tools.tensor_descriptor import TensorDescriptor

        kind, config, split = variant["kind"], dict(variant["config"]), variant["split"]
        bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        n_tiles = triton.cdiv(w.shape[0], bn) * triton.cdiv(x.shape[0], bm)
        args = (x, x.stride(0), x.stride(1), w, w.stride(0), w.stride(1), y, y.stride(0), y.stride(1))
        pointer_text = kernel_text(self.texts[DECODE], "linear_kernel0")
        if kind == "pointers":
            kernel = self.kernel("decode_pointers", lambda: variant_module(self.scratch, "decode_pointers",
                                                                           [pointer_text])).linear_kernel0
            return lambda: kernel[(n_tiles,)](*args, **config)
        if kind == "tma":
            text = kernel_text(self.texts[DECODE], "linear_kernel0_tma")
            kernel = self.kernel("decode_tma", lambda: variant_module(self.scratch, "decode_tma", [text])).linear_kernel0_tma

            def call():
                kernel[(n_tiles,)](*args, X_desc=TensorDescriptor(x, list(x.shape), list(x.stride()), [bm, bk]),
                                   W_desc=TensorDescriptor(w, list(w.shape), list(w.stride()), [bn, bk]), **config)
            return call
        if kind == "swap":
            kernel = self.kernel("decode_swap", lambda: variant_module(self.scratch, "decode_swap",
                                                                       [decode_swap(pointer_text)])).linear_kernel0
            return lambda: kernel[(n_tiles,)](*args, **config)
        partials = self.torch.empty(split * x.shape[0] * w.shape[0], device=x.device, dtype=self.torch.float32)
        if kind == "fixup":
            kernel = self.kernel("decode_fixup", lambda: variant_module(
                self.scratch, "decode_fixup", [decode_fixup(pointer_text, "linear_fixup")])).linear_fixup
            counters = self.torch.zeros(n_tiles, device=x.device, dtype=self.torch.int32)
            return lambda: kernel[(n_tiles, split)](*args, **config, P_ptr=partials, L_ptr=counters, SPLIT=split)
        module = self.kernel("decode_two", lambda: variant_module(self.scratch, "decode_two",
                                                                  [decode_partial(pointer_text), SPLIT_SUM]))
        mn = x.shape[0] * w.shape[0]
        block = min(1024, mn)

        def call():
            module.linear_partial[(n_tiles, split)](*args, **config, P_ptr=partials, L_ptr=None, SPLIT=split)
            module.split_sum[(triton.cdiv(mn, block),)](partials, y, mn, SPLIT=split, BLOCK=block)
        return call


def _error(torch, out, expected) -> float:
    return float(torch.linalg.norm(out.double() - expected) / torch.linalg.norm(expected))


def _measure(log: RowLog, probe: Probe, case: str, variant: str, call, out, expected, config=None, graph=False,
             started=None, timing=True):
    torch = probe.torch
    row = {"case": case, "variant": variant}
    if config is not None:
        row["config"] = config
    if started is not None and time.time() - started > DEADLINE_S:
        row["failed"] = "not run: past the deadline"
        return log.emit(row)
    row["_call"] = call
    try:
        if out is not None:
            out.fill_(float("nan"))
        produced = call()
        if probe.device == "cuda":
            torch.cuda.synchronize()
        result = out if out is not None else produced
        row["error"] = _error(torch, result, expected)
        if timing and probe.device == "cuda":
            row["us"] = bench_us(call)
            if graph:
                row["graph_us"] = graph_us(call)
    except Exception as err:  # noqa: BLE001 - one variant's failure is a row
        row["failed"] = failure(err, 300)
    return log.emit(row)


def run(folder: str, out: str, *flags: str) -> None:
    started = time.time()
    workers = int(flags[flags.index("--workers") + 1]) if "--workers" in flags else 0
    if workers:
        _warm_all(folder, out, workers)
    _run(folder, out, smoke=False, started=started)


class _Log(RowLog):
    """RowLog keeping each row's timed call aside (`calls`, by the row's position), not in the JSON."""

    def __init__(self, out: str):
        super().__init__(out)
        self.calls = {}

    def emit(self, row: dict) -> dict:
        call = row.pop("_call", None)
        if call is not None:
            self.calls[len(self.rows)] = call
        return super().emit(row)


def second_round(log: RowLog, rows: list[dict], started: float) -> None:
    """The SECOND_ROUND fastest variants of each case and its peers timed once more, interleaved."""
    picked = []
    for case in (MATMUL, DECODE):
        timed = [i for i, r in enumerate(rows) if r["case"] == case and "us" in r and i in log.calls]
        ours = [i for i in timed if rows[i]["variant"].startswith(("ours", "cuBLAS", "copy"))]
        picked += ours + sorted([i for i in timed if i not in ours], key=lambda i: rows[i]["us"])[:SECOND_ROUND]
    for i in picked:
        if time.time() - started > DEADLINE_S + 15:
            return
        again = {k: v for k, v in rows[i].items() if k not in ("us", "graph_us", "elapsed_s", "read-only: W.sum() us")}
        again["round"] = 2
        again["us"] = bench_us(log.calls[i])
        log.emit(again)


def _run(folder: str, out: str, smoke: bool, index: int = 0, workers: int = 0, started: float = 0.0) -> list[dict]:
    """Every variant checked and timed (or with `workers`, only the index-th share compiled)."""
    import tempfile

    import torch
    import torch.nn.functional as F

    warm = workers > 0
    scratch = os.path.join(tempfile.gettempdir(), "gemm_variants", f"variants{index}")
    probe = Probe(folder, scratch, smoke)
    log = _Log("" if warm else out)
    started = started or time.time()
    device = probe.device
    gen = torch.Generator(device=device).manual_seed(0)
    shapes = _shapes(probe)
    mine = (lambda i: i % workers == index) if warm else (lambda i: True)
    count = itertools.count()

    # the matmul: A[M, K]·B[K, N] into fp32
    m, n, k = shapes[MATMUL]
    a = torch.randn(m, k, generator=gen, device=device).half()
    b = torch.randn(k, n, generator=gen, device=device).half()
    c = torch.empty(m, n, device=device, dtype=torch.float32)
    expected = a.double() @ b.double()
    if not warm:
        module = probe.modules[MATMUL]
        _measure(log, probe, MATMUL, "ours: run() as generated",
                 lambda module=module, a=a, b=b, c=c: module.run(a, b, c), c, expected, config=module.CONFIGS["matmul_kernel0"][0], graph=True)
        _measure(log, probe, MATMUL, "cuBLAS torch.matmul (fp16 out)", lambda a=a, b=b: torch.matmul(a, b), None, expected)
        if device == "cuda":   # the peer that writes what ours writes (fp32); CPU torch has no such mm
            _measure(log, probe, MATMUL, "cuBLAS torch.mm out_dtype=fp32",
                     lambda a=a, b=b: torch.mm(a, b, out_dtype=torch.float32), None, expected)
    for variant in matmul_variants(smoke):
        if mine(next(count)):
            _measure(log, probe, MATMUL, variant["variant"], probe.matmul_call(variant, a, b, c), c, expected,
                     config=dict(variant["config"], PROGRAMS_PER_SM=variant["sms"]), started=started, timing=not warm)

    # the decode step: X[M, K]·W[N, K]ᵀ into fp16
    m, n, k = shapes[DECODE]
    x = torch.randn(m, k, generator=gen, device=device).half()
    w = torch.randn(n, k, generator=gen, device=device).half()
    y = torch.empty(m, n, device=device, dtype=torch.float16)
    expected = x.double() @ w.double().T
    if not warm:
        module = probe.modules[DECODE]
        _measure(log, probe, DECODE, "ours: run() as generated", lambda module=module: module.run(x, w, y), y, expected,
                 config=module.CONFIGS["linear_kernel0"][0], graph=True)
        _measure(log, probe, DECODE, "cuBLAS F.linear", lambda: F.linear(x, w), None, expected, graph=True)
        moved = (x.numel() + w.numel() + y.numel()) * 2 // 2
        source = torch.empty(moved, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        row = {"case": DECODE, "variant": f"copy of the case's bytes ({2 * moved} moved)"}
        if device == "cuda":
            row["_call"] = lambda: target.copy_(source)
            row["us"] = bench_us(lambda: target.copy_(source))
            row["graph_us"] = graph_us(lambda: target.copy_(source))
            row["read-only: W.sum() us"] = bench_us(lambda: w.sum(dtype=torch.float32))
        log.emit(row)
    for variant in decode_variants(smoke):
        if mine(next(count)):
            _measure(log, probe, DECODE, variant["variant"], probe.decode_call(variant, x, w, y), y, expected,
                     config=dict(variant["config"], SPLIT=variant["split"]), graph=variant["kind"] != "pointers",
                     started=started, timing=not warm)
    if not warm and device == "cuda":
        second_round(log, list(log.rows), started)
    return log.rows


def _shapes(probe: Probe) -> dict:
    found = {}
    for case in (MATMUL, DECODE):
        params = probe.modules[case].PARAMS
        (m, k), (n_or_k, n_or_n) = params[0][3], params[1][3]
        found[case] = (m, n_or_n, k) if case == MATMUL else (m, n_or_k, k)
    return found


def warm(folder: str, out: str, index: str, workers: str) -> None:
    _run(folder, out, smoke=False, index=int(index), workers=int(workers))


def _warm_all(folder: str, out: str, workers: int, limit_s: float = WARM_LIMIT_S) -> None:
    started = time.time()
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "warm", folder, out, str(i), str(workers)],
                              stdout=subprocess.DEVNULL) for i in range(workers)]
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, limit_s - (time.time() - started)))
        except subprocess.TimeoutExpired:
            proc.kill()
    print(json.dumps({"warm_s": round(time.time() - started, 1)}), flush=True)


SMOKE_SHAPES = {MATMUL: ("matmul", 2000, 2112, 48), DECODE: ("linear", 16, 64, 512)}   # the matmul's tiles outnumber SMs


def smoke() -> None:
    """Every edit in Triton's interpreter, on shapes whose kernels keep the edited forms (the
    matmul's tile loop is written only where its tiles outnumber the SMs)."""
    import tempfile

    from probe_common import compiled_into, gemm_program

    os.environ["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as folder:
        for case, shape in SMOKE_SHAPES.items():
            compiled_into(folder, case, gemm_program(*shape))
        rows = _run(folder, "", smoke=True)
    bad = [row for row in rows if "failed" in row or row.get("error", 0) > 1e-2]
    assert not bad, bad
    print(len(rows), "variants ran")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1] == "smoke":
        smoke()
    elif sys.argv[1] == "warm":
        warm(*sys.argv[2:6])
    else:
        run(*sys.argv[2:])
