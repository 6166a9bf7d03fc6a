"""The GPU probes' shared code (benchmarks/probe_common.py) and the memory-bound probe
(benchmarks/elementwise_probe_*.py) on the CPU: their run sides import no TVM, the probe's config
grid stays inside the tuner's rules, its interpreter run checks every variant, and the transpose it
times loads and stores 128-bit vectors on both sides (its sm_90 PTX)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import elementwise_probe_generate as generate  # noqa: E402
import elementwise_probe_gpu as probe  # noqa: E402
import probe_common  # noqa: E402

_RUN_SIDES = ("probe_common", "elementwise_probe_gpu", "gemm_tiles_gpu", "gemm_misses_gpu", "multi_dot_gpu",
              "scores_split_gpu", "matmul_backward_variants_gpu", "replay_host", "suite", "suite_torch", "triton_codegen.gpu_timing", "triton_codegen.hardware_model")


def test_the_probes_run_sides_import_without_tvm():
    script = ("import sys\nsys.modules['tvm'] = None\nsys.modules['tvm_ffi'] = None\n"
              f"sys.path[:0] = [{ROOT!r}, {os.path.join(ROOT, 'benchmarks')!r}]\n"
              + "".join(f"import {name}\n" for name in _RUN_SIDES)
              + "assert 'tvm' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_configs_keep_their_first_name_and_rows_are_written_as_measured(tmp_path):
    found = {"default": {"BLOCK": 64}, "grid 64": {"BLOCK": 64}, "grid 32": {"BLOCK": 32}}
    assert probe_common.first_names(found) == {"default": {"BLOCK": 64}, "grid 32": {"BLOCK": 32}}
    out = tmp_path / "rows.json"
    log = probe_common.RowLog(str(out), header={"device": "cpu"})
    log.emit({"case": "a", "us": 1.0})
    assert json.loads(out.read_text()) == {"device": "cpu", "rows": [log.rows[0]]} and "elapsed_s" in log.rows[0]


def test_the_grid_keeps_the_tuners_rules_within_the_probes_window(tmp_path):
    generate.generate(str(tmp_path), "full", listings=False, only=("transpose_fp32_4096",))
    module = probe_common.load_module(str(tmp_path / "transpose_fp32_4096.py"))
    (name, _), = module.LAUNCHERS
    default = module.CONFIGS[name][0]
    grid = generate.kernel_grid(module.TILE_SUMMARY[name], default, {})
    assert default not in grid and len(grid) == len({json.dumps(c, sort_keys=True) for c in grid})
    for config in grid:
        for block in ("BLOCK_I", "BLOCK_J"):
            assert default[block] // generate.PROBE_WINDOW <= config[block] <= default[block] * generate.PROBE_WINDOW
    assert {c["num_warps"] for c in grid} >= {1, 2, 8}
    distances = [sum(c[k] != default[k] for k in c) for c in grid]
    assert distances == sorted(distances)
    table = json.loads((tmp_path / "variants.json").read_text())["transpose_fp32_4096"]
    assert table[0] == {"label": "default", "assignment": {name: default}}
    forced = [v for v in table if v.get("descriptors") == "forced"]
    assert table[1] == forced[0] == dict(table[0], label="default, descriptors forced", descriptors="forced")
    assert all(v["assignment"][name]["num_warps"] == generate.FORCED_DESCRIPTOR_WARPS for v in forced)


def test_the_transpose_loads_and_stores_128_bit_vectors_on_both_sides(tmp_path):
    """docs/benchmarks.md: the default transpose tile is coalesced on both sides (v4 global loads and
    stores, no scalar ones); its transposing layout conversion goes through shared memory."""
    generate.generate(str(tmp_path), "full", listings=False, only=("transpose_fp32_4096",))
    with open(tmp_path / "suite_cases.json") as handle:
        (entry,) = json.load(handle)
    module = probe_common.load_module(str(tmp_path / entry["module"]))
    default = {"label": "default", "assignment": {name: module.CONFIGS[name][0] for name, _ in module.LAUNCHERS}}
    (listing,) = generate._listing(str(tmp_path), entry, module, default).values()
    counts = listing["instructions"]
    assert counts.get("ld.global.v4.b32") and counts.get("st.global.v4.b32"), counts
    assert not any(key in counts for key in ("ld.global.b32", "st.global.b32")), counts
    assert listing["shared_bytes"] and any(key.startswith(("ld.shared", "ldmatrix")) for key in counts), counts


def test_the_probe_checks_every_variant_in_the_interpreter(tmp_path, monkeypatch):
    generate.generate(str(tmp_path), "smoke", listings=False, only=("transpose_fp32_4096", "rmsnorm_fp16_16384x8192"))
    result = probe.run(str(tmp_path), str(tmp_path / "OUT" / "out.json"), device="cpu")
    rows = [row for row in result["rows"] if "variant" in row]
    assert rows and all(row["ok"] for row in rows), [row for row in rows if not row.get("ok")]
    assert {row["case"] for row in rows} == {"transpose_fp32_4096", "rmsnorm_fp16_16384x8192"}
    assert [row["case"] for row in rows][0] == "transpose_fp32_4096"   # the misses first
    forced = [row for row in rows if row["variant"].endswith("descriptors forced")]
    assert forced and all(set(row["ran"].values()) == {"descriptors"} for row in forced)
    assert json.loads((tmp_path / "OUT" / "out.json").read_text())["rows"] == result["rows"]


def test_a_forced_variant_runs_the_descriptor_kernel_where_every_tile_divides(tmp_path):
    import torch

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from transpose import make_transpose

    probe_common.compiled_into(str(tmp_path), "transpose_64", make_transpose(64, 64))
    module = probe_common.load_module(str(tmp_path / "transpose_64.py"))
    a, b = torch.randn(64, 64), torch.empty(64, 64)
    config = {"BLOCK_J": 32, "BLOCK_I": 32, "num_warps": 4, "num_stages": 2}
    ran = {}
    for forced in (None, "forced", None):
        variant = {"assignment": {"transpose_kernel0": config}, "descriptors": forced}
        row = probe._variant(module, variant, [a, b], {1: a.double().T}, 1e-6, timed=False)
        assert row["ok"], row
        ran.setdefault(forced, set()).add(row["ran"]["transpose_kernel0"].split(":")[0])
    assert ran == {None: {"pointers"}, "forced": {"descriptors"}}   # and forcing does not outlive its variant


def test_a_probes_command_line_keeps_its_words():
    calls = []
    commands = dict(generate=lambda folder: calls.append(("generate", folder)), smoke=lambda: calls.append(("smoke",)),
                    run=lambda *words: calls.append(("run",) + words), host=lambda *words: calls.append(("host",) + words))
    for argv in (["p", "generate", "DIR"], ["p", "smoke"], ["p", "run", "DIR", "OUT", "--deadline", "9"], ["p", "host"]):
        probe_common.command(argv, **commands)
    assert calls == [("generate", "DIR"), ("smoke",), ("run", "DIR", "OUT", "--deadline", "9"), ("host",)]


def test_the_replay_probe_times_a_module_with_scratch_buffers_on_both_paths(tmp_path):
    """benchmarks/replay_host.py on a two-kernel backward whose partials are scratch buffers: the
    positional call is replayed (the stubs launch nothing), the keyword call takes the full path."""
    import replay_host

    from layernorm import make_layernorm
    from tir_passes import differentiate
    from triton_codegen import compile

    path = str(tmp_path / "layernorm_backward.py")
    compile(differentiate(make_layernorm(64, 24), ["X", "gamma", "beta"]), verify=False).save(path)
    row = replay_host.host_times(path, calls=20)
    assert row["kernels"] == 2 and row["scratch"] == 2 and row["replayable"]
    assert 0 < row["replayed_us"] and 0 < row["full_path_us"]


def _gluon_probe_rows(probe: str, variants: str) -> list[dict]:
    """benchmarks/`probe`.py's `aot` rows for these variants, compiled for sm_90 in a fresh Python
    with compiled mode's environment (no interpreter)."""
    from triton_codegen.environment import compiled_mode_environment

    script = ("import json, sys\n"
              f"sys.path[:0] = [{ROOT!r}, {os.path.join(ROOT, 'benchmarks')!r}]\n"
              f"import {probe}\n"
              f"print(json.dumps({probe}.aot('90', {variants!r})))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env=compiled_mode_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_gluon_gemm_probes_kernels_compile_for_sm_90():
    """benchmarks/gluon_gemm_kernels.py on this Triton (CI's; the GPU image's 3.6 takes the old TMA
    names): the persistent kernel and the warp-specialized ping-pong, each with fp32 C over a K×N B and
    fp16 C over an N×K B, within shared memory; the ping-pong hands registers between its partitions."""
    rows = _gluon_probe_rows("gluon_gemm_gpu", "0,2")
    assert [(row["variant"].split()[0], row["out"], row["b_nk"]) for row in rows] == [
        ("persistent", "fp32", False), ("persistent", "fp16", True), ("pingpong", "fp32", False),
        ("pingpong", "fp16", True)]
    assert all(0 < row["shared"] <= 232_448 and row["wgmma"] for row in rows), rows
    assert all(row["setmaxnreg"] for row in rows if row["variant"].startswith("pingpong")), rows
    # launched at the partitions' mean, which fits an SM's 65536 registers across its 12 warps
    assert [row["maxnreg"] for row in rows] == [None, None, 168, 168], rows
    # asynchronous as written: ptxas serializes no wgmma (it did for the ping-pong's fp16 stores)
    assert not any(row["wgmma_serialized"] for row in rows), rows


def test_the_gluon_attention_probes_kernels_compile_for_sm_90():
    """benchmarks/gluon_attention_kernels.py on this Triton: the in-order consumers and the overlapped
    ones taking turns, non-causal and causal, within shared memory, every warpgroup's registers
    handed out by setmaxnreg from a launch that fits an SM (12 warps at 168)."""
    rows = _gluon_probe_rows("gluon_attention_gpu", "0,2")
    assert [(row["variant"], row["causal"]) for row in rows] == [
        ("in order 128x128 2 stages", False), ("in order 128x128 2 stages", True),
        ("overlapped, ping-pong 128x128 2 stages", False), ("overlapped, ping-pong 128x128 2 stages", True)]
    assert all(0 < row["shared"] <= 232_448 and row["setmaxnreg"] and row["maxnreg"] == 168 for row in rows), rows
    assert not any(row["wgmma_serialized"] for row in rows), rows
    # the overlapped consumer issues S_j and P_{j-1}·V_{j-1} in one step: twice the in-order's wgmma sites
    assert rows[2]["wgmma"] == 2 * rows[0]["wgmma"] > 0, rows
