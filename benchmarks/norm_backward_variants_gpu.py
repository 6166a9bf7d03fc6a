"""Norms' backward (RowPartials' two kernels) against copy bandwidth on the GPU, one hypothesis per variant.

    python benchmarks/norm_backward_variants_gpu.py generate DIR       # here (TVM): DIR/*.py
    python3 benchmarks/norm_backward_variants_gpu.py run DIR OUT.json  # on the GPU (torch + triton only), <= 60 s
    PROBE_ROWS=37 PROBE_COLS=48 python benchmarks/norm_backward_variants_gpu.py smoke DIR   # CPU interpreter

`generate` compiles the backward of examples/layernorm.py (static rows) and examples/rmsnorm.py
(symbolic rows: one predicated walk) at 16384×8192 fp16 and writes each module. The row kernel is one
program per 64 rows, each row a whole 8192-wide tile, 1 program per multiprocessor resident (registers).
Since 2026-12-02 the product prefetches the walk (Tiling's LoopPrefetch, docs/autodiff.md): row r + 1's
loads issued at the top of iteration r into registers (compiled here for sm_90, LayerNorm's at 16 warps:
127 registers, no spill). The probe of that day (benchmarks/results/2026-12-02-h200-normvar-3.json, text
edits of the unprefetched kernel) measured LayerNorm 449.2 → 279.8 µs (44.0% → 70.6% of copy), RMSNorm
354.9 → 223.5 µs (55.7% → 88.4%); `tl.range(0, 64, num_stages=3)` alone 300.5 / 234.0 µs.

Variants, each a product compile (a constant of the deciding pass set for the compile) or a one-line edit
of the product's text (a probe may edit it; the product may not):

- base: as generated (the prefetch one row ahead);
- noprefetch: the walk without it (tiling_prefetch.PREFETCH_REGISTERS = 0: every walk refused), the old base;
- prefetch2: two rows ahead (tiling_prefetch.DISTANCE = 2, its register budget raised to 64 for RMSNorm's
  three loads: three register tiles per load, in flight for two rows' reductions);
- rows32: 32 rows per program (row_partials.PROGRAMS_PER_SM = 4, DETERMINISTIC_ROWS = 32 for the symbolic
  rows): 512 programs, a shorter walk and a second wave to hide the first's tail, twice the partials;
- pipe3: base with the walk as `tl.range(0, 64, num_stages=3)` (the pipeliner beside the prefetch);
- unroll2: base with the walk as `tl.range(0, 64, loop_unroll_factor=2)` (two rows' reduction chains in
  one loop body, for the scheduler to interleave);
- w32: base at 32 warps (CHOSEN config edited; here for sm_90: LayerNorm 64 registers, no spill; RMSNorm
  64 with 24 bytes spilled): twice the warps issuing loads and reducing per multiprocessor.

`run` checks each variant's gradients against the module as generated (each output within 2e-3 of its
largest magnitude: another partials order (rows32) rounds d_weight otherwise; `bits_equal` says whether
all are identical, as the prefetch variants must be), times each with triton.testing.do_bench (median,
µs) and a torch copy of the same bytes (X, dY read and dX written: 3 × rows × cols × 2 bytes), and writes
the fraction of copy per variant.
"""

import importlib.util
import json
import os
import re
import sys

ROWS, COLS = int(os.environ.get("PROBE_ROWS", 16384)), int(os.environ.get("PROBE_COLS", 8192))
CASES = ("layernorm", "rmsnorm")
TOLERANCE = 2e-3   # of each output's largest magnitude
# product variants: (module, constant) -> value, set for the compile and restored after
PRODUCT_VARIANTS = {
    "base": {},
    "noprefetch": {("tiling_prefetch", "PREFETCH_REGISTERS"): 0},
    "prefetch2": {("tiling_prefetch", "DISTANCE"): 2, ("tiling_prefetch", "PREFETCH_REGISTERS"): 64},
    "rows32": {("row_partials", "PROGRAMS_PER_SM"): 4, ("row_partials", "DETERMINISTIC_ROWS"): 32},
}


def _walk_edits(source: str) -> dict:
    """The product's text with its row walk (`for r in range(0, R):`) as a tl.range, or at 32 warps."""
    walk = re.search(r"for r in range\(0, (\d+)\):", source)
    out = {}
    if walk:
        for name, option in (("pipe3", "num_stages=3"), ("unroll2", "loop_unroll_factor=2")):
            out[name] = source.replace(walk.group(0), f"for r in tl.range(0, {walk.group(1)}, {option}):")
    chosen = re.search(r"CHOSEN = \{'(\w+kernel0)': (\d+)", source)
    configs = re.search(r"CONFIGS = \{'\w+kernel0': \[(.*?)\]", source, re.S)
    if chosen and configs:
        entries = re.findall(r"\{[^{}]*\}", configs.group(1))
        entry = entries[int(chosen.group(2))]
        edited = re.sub(r"'num_warps': \d+", "'num_warps': 32", entry)
        out["w32"] = source.replace(configs.group(1), configs.group(1).replace(entry, edited, 1), 1)
    return out


def _compiled(func, wrt, constants: dict) -> str:
    from tir_passes import differentiate
    from tir_passes.passes import row_partials, tiling_prefetch
    from triton_codegen import compile

    modules = {"row_partials": row_partials, "tiling_prefetch": tiling_prefetch}
    saved = {key: getattr(modules[key[0]], key[1]) for key in constants}
    try:
        for (module, name), value in constants.items():
            setattr(modules[module], name, value)
        return compile(differentiate(func, wrt), verify=False).source
    finally:
        for (module, name), value in saved.items():
            setattr(modules[module], name, value)


def generate(folder: str) -> None:
    sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")]
    from layernorm import make_layernorm
    from rmsnorm import make_rmsnorm

    os.makedirs(folder, exist_ok=True)
    programs = {"layernorm": (make_layernorm(ROWS, COLS, "float16"), ["X", "gamma", "beta"]),
                "rmsnorm": (make_rmsnorm(COLS, "float16"), ["X", "weight"])}
    for name, (func, wrt) in programs.items():
        variants = {variant: _compiled(func, wrt, constants) for variant, constants in PRODUCT_VARIANTS.items()}
        variants.update(_walk_edits(variants["base"]))
        for variant, text in variants.items():
            with open(os.path.join(folder, f"{name}__{variant}.py"), "w") as handle:
                handle.write(text)
        print(name, len(variants), "variants:", ", ".join(variants))


def _load(path: str):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _arguments(name: str, device: str):
    import torch

    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(ROWS, COLS, generator=generator).half().to(device)
    w = (1 + 0.1 * torch.randn(COLS, generator=generator)).half().to(device)
    dy = torch.randn(ROWS, COLS, generator=generator).half().to(device)
    outs = [torch.empty_like(x)] + [torch.empty_like(w) for _ in range(2 if name == "layernorm" else 1)]
    return [x, w, dy, *outs], outs


def run(folder: str, out: str, time_it: bool = True) -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = {"rows": ROWS, "cols": COLS, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    bytes_moved = 3 * ROWS * COLS * 2
    if time_it:
        import triton.testing

        source = torch.empty(bytes_moved // 4, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)   # a copy reads and writes bytes_moved / 2 each: bytes_moved in all
        copy_us = triton.testing.do_bench(lambda: target.copy_(source)) * 1000 * 2
        results["copy_us_same_bytes"] = copy_us
    for name in CASES:
        files = sorted(f for f in os.listdir(folder) if f.startswith(name + "__"))
        args, outs = _arguments(name, device)
        base = None
        for file in sorted(files, key=lambda f: not f.endswith("__base.py")):
            variant = file[len(name) + 2:-3]
            entry = {}
            try:
                module = _load(os.path.join(folder, file))
                for output in outs:
                    output.fill_(float("nan"))   # an output a variant does not write shows as NaN
                module.run(*args)
                got = [o.float().clone() for o in outs]
                base = base or got
                entry["max_diff"] = max((a - b).abs().max().item() for a, b in zip(got, base))
                entry["bits_equal"] = all(torch.equal(a, b) for a, b in zip(got, base))
                relative = max(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item() for a, b in zip(got, base))
                if not relative <= TOLERANCE:
                    entry["error"] = f"differs from the generated module by {relative:.1e} of an output's largest"
                elif time_it:
                    us = triton.testing.do_bench(lambda: module.run(*args)) * 1000
                    entry.update(us=us, fraction_of_copy=copy_us / us)
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
    elif command == "smoke":   # the interpreter: every variant runs and agrees with the module as generated
        os.environ.setdefault("TRITON_INTERPRET", "1")
        generate(sys.argv[2])
        run(sys.argv[2], os.path.join(sys.argv[2], "smoke.json"), time_it=False)
