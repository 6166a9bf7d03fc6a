"""Generate the memory-bound probe's modules here (TVM needed), for benchmarks/elementwise_probe_gpu.py
to time on the GPU with torch + triton only (issue 17: ≥ 95% of copy and ≥ 1.0× torch.compile).

    python benchmarks/elementwise_probe_generate.py generated/elementwise_probe     # here: modules, variants.json
    python3 benchmarks/elementwise_probe_gpu.py generated/elementwise_probe OUT/elementwise_probe.json   # GPU
    python benchmarks/elementwise_probe_generate.py --smoke                          # CPU: tiny sizes, interpreter

The cases are the suite's (benchmarks/suite_cases.py, compiled by suite.generate: the same modules
and manifest), each kernel's variants the configs the tuner may choose (search_space.legal_configs)
with block sizes within PROBE_WINDOW of the default, and 1 warp besides (outside the tuner's
window). Where a kernel has a `_tma` variant its tiles also run forced through it ("descriptors
forced": the runtime otherwise takes the pointer kernel where every tile divides). Each variant's
pointer kernel is compiled here for sm_90 as the GPU launch specializes it (strides of 1 constant),
and its global and shared-memory instructions are counted from the PTX ("listing"): whether the
loads and stores are vectorized, and whether a layout conversion (the transpose's) goes through
shared memory in vectors (st.shared.v4 with ldmatrix, stmatrix with ld.shared.v4) or one element
at a time (docs/benchmarks.md, "The memory-bound probe").
"""

from __future__ import annotations

import json
import os
import re
import sys

from probe_common import ROOT, instruction_counts, load_module, on_path, write_json

CASES = ("transpose_fp32_4096", "bias_gelu_residual_fp16_16384x8192", "rmsnorm_fp16_16384x8192",
         "layernorm_fp16_16384x8192", "layernorm_moments_fp16_16384x8192", "softmax_fp16_16384x8192",
         "quantize_int8_fp16_16384x8192")   # the last: its whole row went from 16 warps to 8 with softmax's
PROBE_WINDOW = 2                  # block sizes from default / 2 to default × 2 (the tuner's window is 4)
EXTRA_WARPS = (1,)
FORCED_DESCRIPTOR_WARPS = 4       # the forced `_tma` variants: each tile of the grid at this many warps
VARIANTS = "variants.json"
_BLOCKED = re.compile(r"#ttg\.blocked<\{sizePerThread = (\[[^\]]*\]), threadsPerWarp = (\[[^\]]*\]), "
                      r"warpsPerCTA = (\[[^\]]*\]), order = (\[[^\]]*\])")


def generate(folder: str, profile: str = "full", listings: bool = True, only: tuple[str, ...] = CASES) -> dict:
    """The cases' modules and manifest (suite.generate at the profile's sizes), then variants.json."""
    on_path()
    import suite

    os.makedirs(folder, exist_ok=True)
    entries = suite.generate(folder, profile, only=set(only))
    table = {}
    for entry in entries:
        module = load_module(os.path.join(folder, entry["module"]))
        variants = case_variants(module, entry)
        if listings:
            for variant in variants:
                variant["listing"] = _listing(folder, entry, module, variant)
        table[entry["name"]] = variants
        print(f"{entry['name']}: {len(variants)} variants", flush=True)
    write_json(os.path.join(folder, VARIANTS), table)
    return table


def case_variants(module, entry: dict) -> list[dict]:
    """The default first, then where a kernel has a `_tma` variant the default forced through it,
    then each kernel's grid (the other kernels at their defaults), nearest the default first; last
    the other tiles forced through the descriptors. The order is what a run cut by its deadline keeps."""
    defaults = {name: module.CONFIGS[name][module.CHOSEN[name]] for name, _ in module.LAUNCHERS}
    variants = [{"label": "default", "assignment": defaults}]
    forced = []
    for name in entry["descriptor_kernels"]:
        grid = kernel_grid(module.TILE_SUMMARY[name], defaults[name], entry["shape_vars"])
        for config in [defaults[name]] + [c for c in grid if c["num_warps"] == FORCED_DESCRIPTOR_WARPS]:
            label = "default" if config == defaults[name] else _label(name, config, len(defaults))
            forced.append({"label": label + ", descriptors forced", "assignment": dict(defaults, **{name: config}),
                           "descriptors": "forced"})
    variants += forced[:1]
    for name in defaults:
        for config in kernel_grid(module.TILE_SUMMARY[name], defaults[name], entry["shape_vars"]):
            assignment = dict(defaults, **{name: config})
            if all(assignment != v["assignment"] for v in variants):
                variants.append({"label": _label(name, config, len(defaults)), "assignment": assignment})
    return variants + forced[1:]


def kernel_grid(summary: dict, default: dict, sizes: dict) -> list[dict]:
    """The tuner's legal configs with block sizes within PROBE_WINDOW of the default, and the same
    at EXTRA_WARPS; ordered by how many settings differ from the default, then as the space lists them."""
    from triton_codegen.search_space import legal_configs

    near = [c for c in legal_configs(summary, default, sizes)
            if all(default[b] / PROBE_WINDOW <= c[b] <= default[b] * PROBE_WINDOW for b in c if b.startswith("BLOCK"))]
    extra = [dict(c, num_warps=warps) for c in near if c["num_warps"] == default["num_warps"] for warps in EXTRA_WARPS]
    grid = [c for c in near + extra if c != default]
    unique = [c for i, c in enumerate(grid) if c not in grid[:i]]
    return sorted(unique, key=lambda c: sum(c.get(k) != default.get(k) for k in c))


def _label(name: str, config: dict, kernels: int) -> str:
    blocks = "x".join(str(config[k]) for k in config if k.startswith("BLOCK"))
    text = f"{blocks} w{config['num_warps']} s{config['num_stages']}"
    return f"{name} {text}" if kernels > 1 else text


def _listing(folder: str, entry: dict, module, variant: dict) -> dict:
    """What the sm_90 compile of each kernel at the variant's config does with memory (its PTX):
    instruction counts, shared bytes and the blocked layouts of its TTGIR."""
    from triton_codegen.aot import SavedKernel, compile_ahead_of_time

    listing = {}
    for name, config in variant["assignment"].items():
        kernel = SavedKernel.of(name, module.TILE_SUMMARY[name])
        try:
            if variant.get("descriptors"):
                result = None   # the `_tma` variant is compiled by the GPU run, with its descriptors
            else:
                result = compile_ahead_of_time(os.path.join(folder, entry["module"]), kernel, config, 90,
                                               values=_launch_values(entry), listings=True)
        except Exception as err:  # noqa: BLE001 - recorded, the probe still times the variant
            listing[name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
            continue
        if result is not None:
            listing[name] = {"instructions": instruction_counts(result.ptx), "shared_bytes": result.shared_bytes,
                             "layouts": ["sizePerThread {} threadsPerWarp {} warpsPerCTA {} order {}".format(*found)
                                         for found in _BLOCKED.findall(result.ttgir)]}
    return listing


def _launch_values(entry: dict) -> dict[str, int]:
    """The integer arguments a launch on contiguous tensors passes: each buffer's strides, the sizes."""
    from tir_passes.infra.names import stride_name

    values = {}
    for param in entry["params"]:
        if param["kind"] != "buffer":
            continue
        stride = 1
        for axis in reversed(range(len(param["shape"]))):
            values[stride_name(param["name"], axis)] = stride
            stride *= param["shape"][axis]
    values.update(entry["shape_vars"])
    return values


def smoke() -> None:
    """The suite's smoke sizes through generate and the probe's run in Triton's interpreter (no GPU)."""
    import tempfile

    import elementwise_probe_gpu

    os.environ["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as folder:
        generate(folder, "smoke", listings=False)
        result = elementwise_probe_gpu.run(folder, "", device="cpu")
    rows = [row for row in result["rows"] if "variant" in row]
    bad = [row for row in rows if not row.get("ok")]
    assert rows and not bad, json.dumps(bad, indent=1)
    print(len(rows), "variants ran")


if __name__ == "__main__":
    if sys.argv[1:] == ["--smoke"]:
        smoke()
    else:
        generate(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "generated", "elementwise_probe"))
