"""Norms' backward (RowPartials' two kernels) against copy bandwidth on the GPU, one hypothesis per variant.

    python benchmarks/norm_backward_variants_gpu.py generate DIR       # here (TVM): DIR/*.py
    python3 benchmarks/norm_backward_variants_gpu.py run DIR OUT.json  # on the GPU (torch + triton only), <= 60 s
    PROBE_ROWS=37 PROBE_COLS=48 python benchmarks/norm_backward_variants_gpu.py smoke DIR   # CPU interpreter

`generate` compiles the backward of examples/layernorm.py (static rows) and examples/rmsnorm.py
(symbolic rows: one predicated walk) at 16384×8192 fp16 and writes each module as generated. The
row kernel is one program per 64 rows, each row a whole 8192-wide tile; compiled here for sm_90 its
registers are 125 (LayerNorm) and 127 (RMSNorm) per thread at 16 warps, 230/254 at 8 and spills at 4
(triton_codegen.aot), so one program per multiprocessor is resident and it walks its rows with the
loads of a row waiting for the reductions of the one before (LayerNorm's chain: mean, var, d_var,
d_mean). Variants of the generated text (a probe may edit it; the product may not):

- w8: the row kernel at its 8-warp config (CHOSEN), w4 at 4;
- pipe2 / pipe3: the row walk as `tl.range(0, 64, num_stages=N)` (Triton's software pipeliner; compiled
  here for sm_90 it issues no asynchronous copy for these loads, so it is expected to change nothing);
- prefetch, prefetch_w8: row r + 1's loads issued at the top of iteration r, double-buffered in registers,
  in flight while row r reduces (compiled here for sm_90, LayerNorm's at 16 warps: 127 registers, no spill).

`run` checks each variant's gradients against the module as generated (max |diff| ≤ 1e-2, fp16
outputs), times each with triton.testing.do_bench (median, µs) and a torch copy of the same bytes
(X, dY read and dX written: 3 × rows × cols × 2 bytes), and writes the fraction of copy per variant.
"""

import importlib.util
import json
import os
import re
import sys

ROWS, COLS = int(os.environ.get("PROBE_ROWS", 16384)), int(os.environ.get("PROBE_COLS", 8192))
CASES = ("layernorm", "rmsnorm")


ROW = re.compile(r"\br\b")   # the walked row variable (not r_k)


def _prefetched(source: str, walk) -> str | None:
    """The row walk with each row-indexed load of row r + 1 issued at the top of iteration r (registers
    double-buffered), so it is in flight while row r reduces; the loop-invariant offsets it uses hoisted."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == walk.group(0))
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    body = indent + "    "
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].startswith(body))
    loads = [(i, m) for i in range(start + 1, end)
             if (m := re.match(r"\s+(\w+) = tl\.load\((.*)\)$", lines[i])) and ROW.search(m.group(2))]
    if not loads:
        return None
    helpers = {m.group(1): i for i in range(start + 1, end) if (m := re.match(r"\s+(t_\d+) = \(r_k \* \w+\)$", lines[i]))}
    hoisted = sorted(i for name, i in helpers.items() if any(re.search(rf"\b{name}\b", m.group(2)) for _, m in loads))
    before = [indent + lines[i].strip() for i in hoisted]
    following = f"tl.minimum(r + 1, {walk.group(1)} - 1)"   # the last row re-read: always in bounds
    top = []
    for _, m in loads:
        name, expr = m.group(1), m.group(2)
        before.append(f"{indent}{name}_next = tl.load({ROW.sub('0', expr)})")
        top += [f"{body}{name} = {name}_next", f"{body}{name}_next = tl.load({ROW.sub(following, expr)})"]
    skipped = set(hoisted) | {i for i, _ in loads}
    walked = [lines[i] for i in range(start + 1, end) if i not in skipped]
    return "\n".join(lines[:start] + before + [lines[start]] + top + walked + lines[end:]) + "\n"


def _variants(source: str) -> dict:
    walk = re.search(r"for r in range\(0, (\d+)\):", source)
    chosen = re.search(r"CHOSEN = \{'(\w+kernel0)': 0", source)
    out = {"base": source}
    if chosen:
        configs = re.search(r"CONFIGS = \{'\w+kernel0': \[(.*?)\]", source, re.S).group(1)
        warps = [int(w) for w in re.findall(r"'num_warps': (\d+)", configs)]
        for want in (8, 4):
            if want in warps:
                out[f"w{want}"] = source.replace(chosen.group(0), f"CHOSEN = {{'{chosen.group(1)}': {warps.index(want)}")
    if walk:
        for stages in (2, 3):
            out[f"pipe{stages}"] = source.replace(walk.group(0), f"for r in tl.range(0, {walk.group(1)}, "
                                                                 f"num_stages={stages}):")
        prefetched = _prefetched(source, walk)
        if prefetched is not None:
            out["prefetch"] = prefetched
            if chosen and "w8" in out:
                out["prefetch_w8"] = _prefetched(out["w8"], walk)
    return out


def generate(folder: str) -> None:
    sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")]
    from layernorm import make_layernorm
    from rmsnorm import make_rmsnorm
    from tir_passes import differentiate
    from triton_codegen import compile

    os.makedirs(folder, exist_ok=True)
    programs = {"layernorm": (make_layernorm(ROWS, COLS, "float16"), ["X", "gamma", "beta"]),
                "rmsnorm": (make_rmsnorm(COLS, "float16"), ["X", "weight"])}
    for name, (func, wrt) in programs.items():
        kernel = compile(differentiate(func, wrt), verify=False)
        for variant, text in _variants(kernel.source).items():
            with open(os.path.join(folder, f"{name}__{variant}.py"), "w") as handle:
                handle.write(text)
        print(name, len(kernel.program.kernels), "kernels,", len(_variants(kernel.source)), "variants")


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
                if not entry["max_diff"] <= 1e-2:
                    entry["error"] = "differs from the generated module"
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
