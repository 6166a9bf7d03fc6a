"""Norms' backward: the row kernel's chain of dependent block reductions, one hypothesis per variant.

    python benchmarks/norm_backward_chains_gpu.py generate DIR       # here (TVM): DIR/*.py
    python3 benchmarks/norm_backward_chains_gpu.py run DIR OUT.json  # on the GPU (torch + triton only)
    PROBE_ROWS=37 PROBE_COLS=64 python benchmarks/norm_backward_chains_gpu.py smoke DIR   # CPU interpreter

The product's row kernel (RowPartials' walk, one row ahead: docs/autodiff.md) is latency bound: one
program per multiprocessor, each row's block reductions wait for each other (LayerNorm: mean, var,
d_var, d_mean_1, d_mean_0, four levels; RMSNorm: sum_sq, d_sum_sq, two). `generate` compiles both
backwards at R = 64 rows per program (the product) and at R = 126 (one wave of programs on the H200:
cdiv(16384, 126) = 131 ≤ 132 multiprocessors; 128 rows a multiprocessor in two waves otherwise), and
writes, beside the product's modules, its kernel 0 replaced by hand-written forms (`_ln_kernel`,
`_rms_kernel`; the launcher, partials and sum kernel are the product's):

- fact: every factor of a sum that is a value of the row (rsqrt(var), d_var) taken out of the sum,
  so a sum waits only for what its terms read: LayerNorm's chain is two levels (mean with Σ dy·γ,
  then var with Σ dy·(x - m)·γ and Σ (x - m)), RMSNorm's one (Σ x², Σ dy·x·w);
- tup: the independent sums of one level as one multi-operand tl.reduce (one shared-memory round
  trip for the level instead of one per sum);
- p2: two rows a step ([2, K] tiles, two chains reduced by one reduction), the next two prefetched;
- w8 / w32: the kernel at 8 or 32 warps; g126: at R = 126.
- RMSNorm's weight is loaded once per program in the hand forms (the product loads it every row
  under the row's mask); `whoist` is that alone, `p2` (RMSNorm) two rows a step unfactored.

Measured 2026-12-02 (benchmarks/results/2026-12-02-h200-normchains.json, docs/autodiff.md "The row's
sums"): fact_tup won (LayerNorm 280.9 → 235.1 µs, RMSNorm 225.2 → 220.6), and is the product since
(FactorOutOfSums takes the row factors out, Tiling's `sums_together`): `base` is then that form.

`run` checks every variant against the product (each output within 2e-3 of its largest magnitude)
and every variant and the product against float64 torch autograd (`vs_torch`: each output's largest
error over its largest magnitude), times each with do_bench (median µs) and a copy of the same bytes.
Results are written after each variant, so a run cut short keeps what it measured.
"""

import json
import os
import re
import sys

ROWS, COLS = int(os.environ.get("PROBE_ROWS", 16384)), int(os.environ.get("PROBE_COLS", 8192))
TOLERANCE = 2e-3
WAVE_ROWS = 126


def _kernel0(source: str) -> re.Match:
    return re.search(r"@triton.jit\ndef (\w+_kernel0)\(.*?(?=\n\n\n@triton.jit)", source, re.S)


def _set_warps(source: str, warps: int) -> str:
    chosen = re.search(r"CHOSEN = \{'(\w+kernel0)': (\d+)", source)
    configs = re.search(r"CONFIGS = \{'\w+kernel0': \[(.*?)\]", source, re.S)
    entry = re.findall(r"\{[^{}]*\}", configs.group(1))[int(chosen.group(2))]
    edited = re.sub(r"'num_warps': \d+", f"'num_warps': {warps}", entry)
    return source.replace(configs.group(1), configs.group(1).replace(entry, edited, 1), 1)


HELPERS = '''
@triton.jit
def _add2(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _add3(a0, b0, c0, a1, b1, c1):
    return a0 + a1, b0 + b1, c0 + c1
'''


class _Rows:
    """Text of a step's row indices, loads and broadcasts: p rows a step (1: 1-D tiles, as the product)."""

    def __init__(self, p: int, per: int, bound: str | None):
        self.p, self.per, self.bound = p, per, bound
        self.axis = 1 if p == 2 else 0
        self.b = "[:, None]" if p == 2 else ""

    def rows(self, step: str) -> str:
        base = f"(t * {self.per} + ({step}) * {self.p})"
        return f"({base} + tl.arange(0, 2))" if self.p == 2 else base

    def offsets(self, name: str, step: str) -> str:
        rows = f"{self.rows(step)}.to(tl.int64)"
        return (f"{name}_ptr + ({rows}[:, None] * {name}_stride0 + (r_k * {name}_stride1)[None, :])" if self.p == 2
                else f"{name}_ptr + ({rows} * {name}_stride0 + r_k * {name}_stride1)")

    def mask(self, step: str) -> str:
        if self.bound is None:
            return ""
        return f", mask=tl.full([], 1, tl.int1) & ({self.rows(step)} < {self.bound}){self.b}"

    def load(self, name: str, step: str) -> str:
        mask = self.mask(step)
        return f"tl.load({self.offsets(name, step)}{mask}{', other=0.0' if mask else ''})"

    def step_sum(self, expr: str) -> str:   # a [K] accumulator's term: the step's rows summed
        return f"tl.sum({expr}, axis=0)" if self.p == 2 else expr

    def live(self) -> str:   # the step's rows that exist (a ragged last program), broadcast over K
        return "tl.full([], 1, tl.int1)" if self.bound is None else f"(({self.rows('r')}) < {self.bound}){self.b}"


def _walk(rows: _Rows, buffers, body: list[str], tail: list[str]) -> list[str]:
    steps = rows.per // rows.p
    last = steps - 1
    out = [f"    {b}_next = {rows.load(b, '0')}" for b in buffers]
    out.append(f"    for r in range(0, {steps}):")
    for b in buffers:
        out += [f"        {b}_row = {b}_next", f"        {b}_next = {rows.load(b, f'tl.minimum(r + 1, {last})')}"]
    return out + ["        " + line for line in body] + ["    " + line for line in tail]


def _sums(rows: _Rows, terms: list[str], tup: bool) -> str:
    if tup and len(terms) > 1:
        helper = "_add2" if len(terms) == 2 else "_add3"
        return f"tl.reduce(({', '.join(terms)}), axis={rows.axis}, combine_fn={helper})"
    return ", ".join(f"tl.sum({term}, axis={rows.axis})" for term in terms)


def _ln_kernel(signature: str, rows: _Rows, tup: bool) -> str:
    b, c = rows.b, repr(1.0 / COLS)
    g = "g[None, :]" if rows.p == 2 else "g"
    body = ["x = X_row.to(tl.float32)", "dy = d_Y_row.to(tl.float32)",
            f"mean_s, s_dyg = {_sums(rows, ['x', f'dy * {g}'], tup)}",
            f"xm = x - (mean_s * {c}){b}",
            f"var_s, s_dyxg, s_xm = {_sums(rows, ['xm * xm', f'(dy * xm) * {g}', '(-1.0 * xm) + (xm * -1.0)'], tup)}",
            f"v = var_s * {c} + 1e-05", "rs = tl.rsqrt(v)",
            "d_var = ((-0.5 * rs) / v) * s_dyxg", "d_mean_1 = d_var * s_xm", "d_mean_0 = rs * s_dyg",
            f"dx = (dy * (rs{b} * {g})) + (d_var{b} * ((xm + xm) * {c})) + (((d_mean_0 * -1.0) + (d_mean_1 * {c})) * {c}){b}",
            f"tl.store({rows.offsets('d_X', 'r')}, dx.to(tl.float16){rows.mask('r')})",
            f"live = {rows.live()}",
            f"acc_g = acc_g + {rows.step_sum(f'tl.where(live, dy * (xm * rs{b}), 0.0)')}",
            f"acc_b = acc_b + {rows.step_sum('tl.where(live, dy, 0.0)')}"]
    head = ["    t = tl.program_id(0)", "    r_k = tl.arange(0, BLOCK_K)",
            "    acc_g = tl.full([BLOCK_K], 0.0, tl.float32)", "    acc_b = tl.full([BLOCK_K], 0.0, tl.float32)",
            "    g = tl.load(gamma_ptr + r_k * gamma_stride0).to(tl.float32)"]
    tail = ["tl.store(d_gamma_0_rows_ptr + (t * d_gamma_0_rows_stride0 + r_k * d_gamma_0_rows_stride1), acc_g)",
            "tl.store(d_beta_0_rows_ptr + (t * d_beta_0_rows_stride0 + r_k * d_beta_0_rows_stride1), acc_b)"]
    return "\n".join([signature] + head + _walk(rows, ("X", "d_Y"), body, tail))


def _rms_kernel(signature: str, rows: _Rows, fact: bool, tup: bool) -> str:
    b, c = rows.b, repr(1.0 / COLS)
    w = "w[None, :]" if rows.p == 2 else "w"
    if fact:
        sums = [f"sum_sq, s_dyxw = {_sums(rows, ['x * x', f'(dy * x) * {w}'], tup)}",
                "v = sum_sq * " + c + " + 1e-06", "rs = tl.rsqrt(v)", "d_ss = ((-0.5 * rs) / v) * s_dyxw"]
    else:
        sums = [f"sum_sq = tl.sum(x * x, axis={rows.axis})", "v = sum_sq * " + c + " + 1e-06", "rs = tl.rsqrt(v)",
                f"d_ss = tl.sum(((dy * x) * ((-0.5 * rs) / v){b}) * {w}, axis={rows.axis})"]
    body = ["x = X_row.to(tl.float32)", "dy = d_Y_row.to(tl.float32)", *sums,
            f"dx = (dy * (rs{b} * {w})) + ((d_ss * {c}){b} * (x + x))",
            f"tl.store({rows.offsets('d_X', 'r')}, dx.to(tl.float16){rows.mask('r')})",
            f"live = {rows.live()}",
            f"acc_w = acc_w + {rows.step_sum(f'tl.where(live, dy * (x * rs{b}), 0.0)')}"]
    head = ["    t = tl.program_id(0)", "    r_k = tl.arange(0, BLOCK_K)",
            "    acc_w = tl.full([BLOCK_K], 0.0, tl.float32)",
            "    w = tl.load(weight_ptr + r_k * weight_stride0).to(tl.float32)"]
    tail = ["tl.store(d_weight_0_rows_ptr + (t.to(tl.int64) * d_weight_0_rows_stride0 + "
            "r_k * d_weight_0_rows_stride1), acc_w)"]
    return "\n".join([signature] + head + _walk(rows, ("X", "d_Y"), body, tail))


# name: (host module: the product's R or the wave's, rows a step, fact, tup, warps or None)
HAND = {"whoist": ("product", 1, False, False, None), "fact": ("product", 1, True, False, None),
        "fact_tup": ("product", 1, True, True, None), "fact_tup_g126": ("wave", 1, True, True, None),
        "fact_tup_w8": ("product", 1, True, True, 8), "fact_tup_p2": ("product", 2, True, True, None),
        "fact_tup_p2_w32": ("product", 2, True, True, 32), "fact_tup_p2_g126": ("wave", 2, True, True, None),
        "fact_tup_w32": ("product", 1, True, True, 32), "fact_tup_p2_w32_g126": ("wave", 2, True, True, 32),
        "p2": ("product", 2, False, False, None)}
RMS_ONLY = ("whoist", "p2")   # the hand LayerNorm is factored: its unfactored forms are the product's


def _hand(name: str, host: str, p: int, fact: bool, tup: bool, warps) -> str:
    found = _kernel0(host)
    signature = found.group(0).split("\n")[1]
    per = int(re.search(r"for r in range\(0, (\d+)\):", found.group(0)).group(1))
    bound = "rows" if "rows: tl.int32" in signature else (str(ROWS) if ROWS % per else None)
    rows = _Rows(p, per, bound)
    kernel = _ln_kernel(signature, rows, tup) if name == "layernorm" else _rms_kernel(signature, rows, fact, tup)
    text = host.replace(found.group(0), "@triton.jit\n" + kernel + "\n\n" + HELPERS.strip("\n"), 1)
    return _set_warps(text, warps) if warps else text


def _compiled(func, wrt, per: int | None) -> str:
    from tir_passes import differentiate
    from tir_passes.passes import row_partials
    from triton_codegen import compile

    saved = row_partials.rows_per_program, row_partials.DETERMINISTIC_ROWS
    try:
        if per is not None:
            row_partials.rows_per_program = lambda spec, rows, deterministic: per
            row_partials.DETERMINISTIC_ROWS = per
        return compile(differentiate(func, wrt), verify=False).source
    finally:
        row_partials.rows_per_program, row_partials.DETERMINISTIC_ROWS = saved


def generate(folder: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    from layernorm import make_layernorm
    from rmsnorm import make_rmsnorm

    os.makedirs(folder, exist_ok=True)
    programs = {"layernorm": (make_layernorm(ROWS, COLS, "float16"), ["X", "gamma", "beta"]),
                "rmsnorm": (make_rmsnorm(COLS, "float16"), ["X", "weight"])}
    for name, (func, wrt) in programs.items():
        hosts = {"product": _compiled(func, wrt, None), "wave": _compiled(func, wrt, WAVE_ROWS)}
        variants = {"base": hosts["product"], "g126": hosts["wave"]}
        for variant, (host, p, fact, tup, warps) in HAND.items():
            if name == "layernorm" and variant in RMS_ONLY:
                continue
            variants[variant] = _hand(name, hosts[host], p, fact, tup, warps)
        for variant, text in variants.items():
            with open(os.path.join(folder, f"{name}__{variant}.py"), "w") as handle:
                handle.write(text)
        print(name, len(variants), "variants:", ", ".join(variants))


def _arguments(name: str, device: str):
    import torch

    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(ROWS, COLS, generator=generator).half().to(device)
    w = (1 + 0.1 * torch.randn(COLS, generator=generator)).half().to(device)
    dy = torch.randn(ROWS, COLS, generator=generator).half().to(device)
    outs = [torch.empty_like(x)] + [torch.empty_like(w) for _ in range(2 if name == "layernorm" else 1)]
    return [x, w, dy, *outs], outs


def _reference(name: str, args):
    """float64 torch autograd's gradients of the forward (eps as the examples': 1e-5, 1e-6)."""
    import torch

    x, w, dy = (a.double().requires_grad_(True) for a in args[:3])
    if name == "layernorm":
        b = torch.zeros_like(w, requires_grad=True)
        y = torch.nn.functional.layer_norm(x, (COLS,), w, b, 1e-5)
        return torch.autograd.grad(y, (x, w, b), dy.detach())
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    return torch.autograd.grad(y, (x, w), dy.detach())


def _relative(got, want) -> float:
    return max(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item() for a, b in zip(got, want))


def _registers(module) -> dict:
    """Kernel 0's registers and spills as Triton compiled it (its JIT cache), where readable."""
    try:
        kernel = next(getattr(module, name) for name in dir(module) if name.endswith("_kernel0"))
        compiled = [k for cache in kernel.device_caches.values() for k in cache[0].values()]
        return {"registers": compiled[-1].n_regs, "spills": compiled[-1].n_spills}
    except Exception as err:  # noqa: BLE001 - the counts are a note, not the measurement
        return {"registers": f"unread ({type(err).__name__})"}


def run(folder: str, out: str, time_it: bool = True) -> None:
    import importlib.util

    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = {"rows": ROWS, "cols": COLS, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    if time_it:
        import triton.testing

        source = torch.empty(3 * ROWS * COLS // 2, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        results["copy_us_same_bytes"] = copy_us = triton.testing.do_bench(lambda: target.copy_(source)) * 1000 * 2
    for name in ("rmsnorm", "layernorm"):
        files = sorted((f for f in os.listdir(folder) if f.startswith(name + "__")), key=lambda f: "__base" not in f)
        args, outs = _arguments(name, device)
        reference = [g.float() for g in _reference(name, args)]
        base = None
        for file in files:
            variant, entry = file[len(name) + 2:-3], {}
            try:
                spec = importlib.util.spec_from_file_location(file[:-3], os.path.join(folder, file))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                for output in outs:
                    output.fill_(float("nan"))
                module.run(*args)
                got = [o.float().clone() for o in outs]
                base = base or got
                entry["vs_base"], entry["vs_torch"] = _relative(got, base), _relative(got, reference)
                if not entry["vs_base"] <= TOLERANCE:
                    entry["error"] = "differs from the product's module"
                elif time_it:
                    us = triton.testing.do_bench(lambda: module.run(*args)) * 1000
                    entry.update(us=us, fraction_of_copy=copy_us / us, **_registers(module))
            except Exception as err:  # noqa: BLE001 - a variant that fails is reported, the others still run
                entry["error"] = f"{type(err).__name__}: {str(err)[:300]}"
            results[f"{name}/{variant}"] = entry
            print(name, variant, entry, flush=True)
            with open(out, "w") as handle:
                json.dump(results, handle, indent=1)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "generate":
        generate(sys.argv[2])
    elif command == "run":
        run(sys.argv[2], sys.argv[3])
    elif command == "smoke":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        generate(sys.argv[2])
        run(sys.argv[2], os.path.join(sys.argv[2], "smoke.json"), time_it=False)
