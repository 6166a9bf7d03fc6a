"""Attention's remaining gap to SDPA's default (cuDNN) on Hopper, one hypothesis per variant.

    python benchmarks/attention_variants_gpu.py generate DIR      # here (TVM): DIR/*.py + DIR/manifest.json
    python3 benchmarks/attention_variants_gpu.py run DIR OUT.json  # on the GPU (torch + triton only), <= 120 s
    PROBE_SHAPE=1,2,256,32 python benchmarks/attention_variants_gpu.py smoke DIR   # CPU: every edit checked

`generate` compiles examples/attention.py and examples/attention_causal.py (b4 h32 s4096 d128 fp16)
and writes, beside each module as generated, source variants of it that each test one hypothesis
(a probe may edit the generated text; the product may not):

- noguard: the rescale `where(max_prev == max, 1, exp2(..))` as a plain `exp2(..)`;
- log2m: the running maximum kept in the log2 domain (`max(s) * c`, then `s * c - m`), the
  fused-attention tutorial's form; tutorial: both;
- ws: `tl.range(..., warp_specialize=True)` on the key loop(s) (Triton's automatic warp
  specialization: producer warps for TMA, consumers for the dots and the softmax);
- hoistq: the query tile read once before the key loops (the causal kernel reads it every step);
- lpt: the query tiles of a head walked last-first (causal: the longest rows start first);
- persistent: one program per SM walking the tiles in launch order.

Configs (block rows / keys / warps / stages) are turned through the module's CONFIGS, descriptors
through USE_DESCRIPTORS. `run` compiles every variant first in parallel worker processes (they
fill Triton's cache), then times them one after another in one process: each output checked
against torch's SDPA in float64 before `do_bench` (median, L2 flushed), µs. SDPA's default, cuDNN
and flash by name are timed beside. Variants still untimed at the deadline are reported skipped.
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

# PROBE_SHAPE="1,2,256,32" shrinks the problem for `smoke` (the interpreter, on the CPU)
B, H, S, D = (int(n) for n in os.environ.get("PROBE_SHAPE", "4,32,4096,128").split(","))
CASES = (("attention", False), ("attention_causal", True))
WIDE = {"BLOCK_I": 128, "BLOCK_J": 128, "num_warps": 8, "num_stages": 3}
NARROW = {"BLOCK_I": 128, "BLOCK_J": 64, "num_warps": 4, "num_stages": 2}


def _config(rows, keys, warps, stages):
    return {"BLOCK_I": rows, "BLOCK_J": keys, "num_warps": warps, "num_stages": stages}


# --- source edits: each takes the module's text and returns it changed (or raises: not applicable) ---

def _scale(text: str) -> str:
    [scale] = set(re.findall(r"\* ([0-9.e+-]+) - acc_row_max", text))
    return scale


def _changed(before: str, after: str, what: str) -> str:
    if before == after:
        raise ValueError(f"{what}: the pattern is not in the generated text")
    return after


def no_guard(text: str) -> str:
    out = re.sub(r"tl\.where\(mask_i\w*, 1\.0, (tl\.exp2\([^()]*\))\)", r"\1", text)
    return out if " == acc_row_max" not in text else _changed(text, out, "noguard")   # the generator may drop it


def log2_max(text: str) -> str:
    scale = re.escape(_scale(text))
    out = re.sub(r"(acc_row_max\w*(?:\[:, None\])?) \* " + scale, r"\1", text)
    out = re.sub(r"(max_j\w* = )tl\.max\((\w+), axis=1\)", r"\1(tl.max(\2, axis=1) * " + _scale(text) + ")", out)
    return _changed(text, out, "log2m")


def tutorial(text: str) -> str:
    return log2_max(no_guard(text))


def warp_specialize(text: str) -> str:
    out = re.sub(r"for (j_0) in range\((.*)\):\n", r"for \1 in tl.range(\2, warp_specialize=True):\n", text)
    return _changed(text, out, "ws")


def device_descriptors(text: str) -> str:
    """The `_tma` kernel's host descriptors replaced by `tl.make_tensor_descriptor` ones built in the
    kernel (Hopper's warp specialization of attention takes on-device descriptors only: Triton
    PR 7658); needs `triton.set_allocator`, which `run` and `warm` install."""
    blocks = {"Q": "BLOCK_I, BLOCK_AX0", "K": "BLOCK_J, BLOCK_AX0", "V": "BLOCK_J, BLOCK_D", "O": "BLOCK_I, BLOCK_D"}
    made = "".join(f"    {name}dev = tl.make_tensor_descriptor({name}_ptr, shape=[{B}, {H}, {S}, {D}], strides=["
                   f"{name}_stride0, {name}_stride1, {name}_stride2, 1], block_shape=[1, 1, {block}])\n"
                   for name, block in blocks.items())
    out = text.replace("    # tensor descriptors: Q_desc, K_desc, V_desc, O_desc\n",
                       "    # tensor descriptors: Q_desc, K_desc, V_desc, O_desc\n" + made)
    for name in blocks:
        out = out.replace(f"{name}_desc.load(", f"{name}dev.load(").replace(f"{name}_desc.store(", f"{name}dev.store(")
    return _changed(text, out, "devdesc")


def _install_allocator() -> None:
    import torch
    import triton

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))


def hoist_query(text: str) -> str:
    """Every `Q_tile* = <load>` inside a key loop dropped, one hoisted before the first loop."""
    out, count = [], 0
    for kernel in re.split(r"(?=^@triton\.jit\n)", text, flags=re.M):
        loads = re.findall(r"^        (Q_tile\w*) = (.*)\n", kernel, flags=re.M)
        if not loads:
            out.append(kernel)
            continue
        name, load = loads[0]
        # the pointer load's column offsets are a temporary of the loop: spelled out
        load = re.sub(r"\+ \w+\[None, :\]\)\)$", "+ (r_ax0 * Q_stride3)[None, :]))", load)
        kernel = re.sub(r"^        Q_tile\w* = .*\n", "", kernel, flags=re.M)
        kernel = re.sub(r"tl\.dot\(Q_tile\w*, ", "tl.dot(Q_hoisted, ", kernel)
        kernel = re.sub(r"^(    # tiles of j inside|    for j_0 in)", f"    Q_hoisted = {load}\n\\1", kernel,
                        count=1, flags=re.M)
        count += len(loads)
        out.append(kernel)
    if not count and "    Q_tile = " not in text:
        raise ValueError("hoistq: no query load in the kernel")
    return "".join(out)   # unchanged where the generator already reads Q before the loops


def longest_first(text: str) -> str:
    out = re.sub(r"i_0 = pid % \((tl\.cdiv\(\d+, BLOCK_I\))\)", r"i_0 = (\1 - 1) - pid % (\1)", text)
    return out if "- 1) - pid" in text else _changed(text, out, "lpt")   # the generator's own order (causal)


def persistent(text: str) -> str:
    """The kernel body in a loop over tiles `pid, pid + programs, ...`; the launch on one program per SM."""
    out = []
    for kernel in re.split(r"(?=^@triton\.jit\n)", text, flags=re.M):
        head, sep, body = kernel.partition("    pid = tl.program_id(0)\n")
        if not sep:
            out.append(kernel)
            continue
        stop = body.index("\n\n\n")
        total = f"({B} * {H} * tl.cdiv({S}, BLOCK_I))"
        loop = f"    for pid in tl.range(tl.program_id(0), {total}, tl.num_programs(0)):\n"
        body = "".join("    " + line if line.strip() else line for line in body[:stop].splitlines(True)) + body[stop:]
        out.append(head + loop + body)
    text2 = "".join(out)
    text2 = text2.replace('check_grid("attention_kernel0", programs)\n',
                          'check_grid("attention_kernel0", programs)\n'
                          '    programs = min(programs, torch.cuda.get_device_properties(0).multi_processor_count'
                          ' if torch.cuda.is_available() else 3)\n')
    return _changed(text, text2, "persistent")


_SCORES_STEP = re.compile(
    r"^        acc_scores_\d+ = tl\.full\(\[BLOCK_I, BLOCK_J\], 0\.0, tl\.float32\)\n"
    r"        K_tile = tl\.reshape\(K_desc\.load\(\[(?P<head>\w+, \w+), \(j_0 \* BLOCK_J\), 0\]\), \[BLOCK_J, BLOCK_AX0\]\)\n"
    r"        dot = tl\.dot\((?P<q>Q_tile\w*), tl\.trans\(K_tile\), acc_scores_\d+\)\n"
    r"        acc_scores_\d+ = dot\n"
    r"        (?P<scores>scores_\d+) = acc_scores_\d+\n", re.M)


def next_first(text: str) -> str:
    """FA3's intra-warpgroup overlap by hand: the scores of key tile j + 1 issued (an asynchronous wgmma)
    before tile j's softmax and P·V, so the tensor cores work while the softmax runs; the descriptor
    kernel's walk only (the one Hopper runs). The last step computes a redundant tile (clamped). Assumes the
    non-causal walk: key tiles 0 to cdiv(S, BLOCK_J) - 1 (the prologue loads tile 0; the clamp is the last)."""
    out = []
    for kernel in re.split(r"(?=^@triton\.jit\n)", text, flags=re.M):
        match = _SCORES_STEP.search(kernel)
        if not match:
            out.append(kernel)
            continue
        last = f"(tl.cdiv({S}, BLOCK_J) - 1)"
        load = "tl.reshape(K_desc.load([" + match["head"] + ", ({} * BLOCK_J), 0]), [BLOCK_J, BLOCK_AX0])"
        step = (f"        {match['scores']} = scores_next\n"
                f"        K_tile = {load.format(f'tl.minimum(j_0 + 1, {last})')}\n"
                f"        scores_next = tl.dot({match['q']}, tl.trans(K_tile))\n")
        kernel = kernel[:match.start()] + step + kernel[match.end():]
        prologue = (f"    K_tile = {load.format('0')}\n"
                    f"    scores_next = tl.dot({match['q']}, tl.trans(K_tile))\n")
        kernel = re.sub(r"^(    for j_0 in range)", prologue.replace("\\", "\\\\") + r"\1", kernel, count=1, flags=re.M)
        out.append(kernel)
    return _changed(text, "".join(out), "nextfirst")


EDITS = {"nextfirst": next_first, "noguard": no_guard, "log2m": log2_max, "tutorial": tutorial, "ws": warp_specialize,
         "devdesc": device_descriptors, "hoistq": hoist_query, "lpt": longest_first, "persistent": persistent}


def _plan(causal: bool) -> list:
    """(label, source variant or None, config overrides, descriptors), most telling first."""
    base = [("default", None, {}, True), ("default pointers", None, {}, False)]
    if causal:
        return base + [
            ("hoistq", "hoistq", {}, True),
            ("hoistq+tutorial", "hoistq+tutorial", {}, True),
            ("hoistq+tutorial+lpt", "hoistq+tutorial+lpt", {}, True),
            ("hoistq 128x64/4w/2s", "hoistq", NARROW, True),
            ("hoistq+tutorial 128x64/8w/2s", "hoistq+tutorial", _config(128, 64, 8, 2), True),
            ("hoistq+tutorial 128x128/8w/2s", "hoistq+tutorial", _config(128, 128, 8, 2), True),
            ("hoistq+tutorial pointers", "hoistq+tutorial", {}, False),
            ("noguard", "noguard", {}, False),
            ("lpt", "lpt", {}, False),
            ("hoistq+tutorial+ws 128x128/8w/2s", "hoistq+tutorial+ws", _config(128, 128, 8, 2), True),
            ("hoistq+tutorial+ws 128x64/4w/2s", "hoistq+tutorial+ws", NARROW, True),
            ("hoistq+tutorial+persistent", "hoistq+tutorial+persistent", {}, True),
            ("hoistq+tutorial 128x64/4w/3s", "hoistq+tutorial", _config(128, 64, 4, 3), True),
            ("hoistq+tutorial+lpt+persistent", "hoistq+tutorial+lpt+persistent", {}, True),
            ("hoistq+tutorial+devdesc+ws 128x128/8w/2s", "hoistq+tutorial+devdesc+ws", _config(128, 128, 8, 2), True),
            ("hoistq+tutorial+devdesc+ws 128x64/4w/3s", "hoistq+tutorial+devdesc+ws", _config(128, 64, 4, 3), True),
        ]
    return base + [
        ("tutorial+nextfirst 128x64/8w/2s", "tutorial+nextfirst", _config(128, 64, 8, 2), True),
        ("tutorial+nextfirst 128x128/8w/2s", "tutorial+nextfirst", _config(128, 128, 8, 2), True),
        ("tutorial+nextfirst 128x64/8w/3s", "tutorial+nextfirst", _config(128, 64, 8, 3), True),
        ("tutorial+nextfirst 128x64/4w/2s", "tutorial+nextfirst", NARROW, True),
        ("noguard", "noguard", {}, True),
        ("log2m", "log2m", {}, True),
        ("tutorial", "tutorial", {}, True),
        ("tutorial 128x64/8w/2s", "tutorial", _config(128, 64, 8, 2), True),
        ("tutorial 128x64/4w/3s", "tutorial", _config(128, 64, 4, 3), True),
        ("tutorial 128x128/8w/3s", "tutorial", WIDE, True),
        ("tutorial 128x128/8w/2s", "tutorial", _config(128, 128, 8, 2), True),
        ("tutorial 128x64/8w/3s", "tutorial", _config(128, 64, 8, 3), True),
        ("tutorial+ws 128x64/4w/2s", "tutorial+ws", NARROW, True),
        ("tutorial+ws 128x128/8w/2s", "tutorial+ws", _config(128, 128, 8, 2), True),
        ("tutorial+ws 128x64/8w/3s", "tutorial+ws", _config(128, 64, 8, 3), True),
        ("tutorial 256x64/8w/2s", "tutorial", _config(256, 64, 8, 2), True),
        ("tutorial+persistent", "tutorial+persistent", {}, True),
        ("tutorial+lpt", "tutorial+lpt", {}, True),
        ("tutorial+devdesc", "tutorial+devdesc", {}, True),
        ("tutorial+devdesc+ws 128x128/8w/2s", "tutorial+devdesc+ws", _config(128, 128, 8, 2), True),
        ("tutorial+devdesc+ws 128x64/4w/3s", "tutorial+devdesc+ws", _config(128, 64, 4, 3), True),
        ("tutorial+devdesc+ws 128x128/4w/2s", "tutorial+devdesc+ws", _config(128, 128, 4, 2), True),
    ]


def _apply(text: str, variant: str) -> str:
    for edit in variant.split("+"):
        text = EDITS[edit](text)
    return text


def generate(out: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    from attention import make_attention
    from triton_codegen import compile

    os.makedirs(out, exist_ok=True)
    manifest = []
    for name, causal in CASES:
        path = os.path.join(out, f"{name}.py")
        compile(make_attention(B, H, S, D, causal=causal), verify=False).save(path)
        with open(path) as handle:
            text = handle.read()
        for label, variant, config, descriptors in _plan(causal):
            file, same = f"{name}.py", False
            if variant:
                file = f"{name}__{variant.replace('+', '_')}.py"
                edited = _apply(text, variant)
                same = edited == text
                builtins.compile(edited, file, "exec")
                with open(os.path.join(out, file), "w") as handle:
                    handle.write(edited)
            manifest.append(dict(case=name, causal=causal, label=label, file=file, config=config,
                                 descriptors=descriptors, source_as_generated=same))
    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
    print(f"{len(manifest)} variants in {out}/manifest.json")


# --- on the GPU ---

def _load(path: str):
    key = "probe_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs():
    import torch

    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, generator=generator, device="cuda").half() for _ in range(3))
    return q, k, v, torch.empty_like(q)


def _select(module, entry) -> None:
    [name] = module.CONFIGS
    config = {**module.CONFIGS[name][module.CHOSEN.get(name, 0)], **entry["config"]}
    module.CONFIGS[name].append(config)
    module.CHOSEN[name] = len(module.CONFIGS[name]) - 1
    module.USE_DESCRIPTORS = entry["descriptors"]


def warm(folder: str, index: int) -> None:
    """One variant launched once (a worker: Triton's cache keeps what it compiled)."""
    import torch

    entry = json.load(open(os.path.join(folder, "manifest.json")))[index]
    _install_allocator()
    module = _load(os.path.join(folder, entry["file"]))
    _select(module, entry)
    module.run(*_inputs())
    torch.cuda.synchronize()


def _time_entry(folder, entry, args, expected) -> dict:
    import torch
    from triton.testing import do_bench

    try:
        module = _load(os.path.join(folder, entry["file"]))
        _select(module, entry)
        args[-1].fill_(float("nan"))
        module.run(*args)
        torch.cuda.synchronize()
        error = ((args[-1].double() - expected).norm() / expected.norm()).item()
        if not error < 1e-2:
            return dict(error=error, ran=dict(module.VARIANTS_RUN), us=None, note="wrong result: not timed")
        us = 1e3 * do_bench(lambda: module.run(*args), warmup=5, rep=40, return_mode="median")
        return dict(us=us, error=error, ran=dict(module.VARIANTS_RUN))
    except Exception as err:  # noqa: BLE001 - a variant the GPU refuses: reported, the rest goes on
        return dict(error=f"{type(err).__name__}: {str(err)[:400]}")


def _peers(q, k, v, causal) -> dict:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    peers = {"sdpa default": None, "sdpa cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa flash": SDPBackend.FLASH_ATTENTION}
    out = {}
    for label, backend in peers.items():
        def call(backend=backend):
            if backend is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            out[label] = 1e3 * do_bench(call, warmup=5, rep=40, return_mode="median")
        except Exception as err:  # noqa: BLE001
            out[label] = f"{type(err).__name__}: {str(err)[:200]}"
    return out


def run(folder: str, out: str, deadline_s: float = 100, workers: int = 12) -> None:
    import torch
    import torch.nn.functional as F

    start = time.time()
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    order = _interleaved(manifest)
    warmed = _warm_all(folder, order, workers, deadline_s * 0.55)
    _install_allocator()
    q, k, v, o = _inputs()
    result = dict(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)),
                  gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=__import__("triton").__version__,
                  warm_s=time.time() - start, cases={})
    expected = {}
    for name, causal in CASES:
        expected[name] = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()
        result["cases"][name] = dict(peers=_peers(q, k, v, causal), variants={})
        print(name, json.dumps(result["cases"][name]["peers"]), flush=True)
    for index in order:
        entry = manifest[index]
        case = result["cases"][entry["case"]]
        rows, default = case["variants"], case["peers"]["sdpa default"]
        if time.time() - start > deadline_s:
            rows[entry["label"]] = dict(note="skipped: past the deadline")
            continue
        if warmed.get(index) not in ("ok", "not warmed: out of time"):
            rows[entry["label"]] = dict(note=f"not timed: {warmed.get(index)}")   # a failed or hung compile
            continue
        timed = _time_entry(folder, entry, (q, k, v, o), expected[entry["case"]])
        timed.update(warm=warmed.get(index), config=entry["config"], descriptors=entry["descriptors"],
                     source_as_generated=entry["source_as_generated"])
        if timed.get("us"):
            timed["tflops"] = 4 * B * H * S * S * D / (2 if entry["causal"] else 1) / timed["us"] / 1e6
            timed["of_sdpa_default"] = default / timed["us"] if isinstance(default, float) else None
        rows[entry["label"]] = timed
        print(entry["case"], entry["label"], json.dumps(timed), flush=True)
        result["total_s"] = time.time() - start
        with open(out, "w") as handle:   # after every variant: a run cut short still leaves its rows
            json.dump(result, handle, indent=1)


def _interleaved(manifest: list) -> list:
    """Manifest indices, the cases' variants alternating (each case's most telling first)."""
    per_case = [[i for i, e in enumerate(manifest) if e["case"] == name] for name, _ in CASES]
    longest = max(len(indices) for indices in per_case)
    return [indices[k] for k in range(longest) for indices in per_case if k < len(indices)]


def _warm_all(folder: str, order: list, workers: int, budget_s: float) -> dict:
    """Every variant compiled in a worker process; index -> 'ok' or why not."""
    deadline = time.time() + budget_s

    def one(index):
        left = deadline - time.time()
        if left <= 1:
            return index, "not warmed: out of time"
        try:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "warm", folder, str(index)],
                                  capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            return index, "not warmed: timed out"
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return index, "ok" if done.returncode == 0 else lines[-1][:300]

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(one, order))


def smoke(folder: str) -> None:
    """Every variant at PROBE_SHAPE in Triton's interpreter against torch (CPU): the edits are right."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import torch.nn.functional as F

    generate(folder)
    q, k, v = (torch.randn(B, H, S, D, generator=torch.Generator().manual_seed(seed)).half() for seed in range(3))
    seen = set()
    for entry in json.load(open(os.path.join(folder, "manifest.json"))):
        if (entry["file"], entry["descriptors"]) in seen or os.environ.get("PROBE_ONLY", "") not in entry["file"]:
            continue   # the edits are what is checked, one config each (PROBE_ONLY: files naming it)
        seen.add((entry["file"], entry["descriptors"]))
        expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=entry["causal"])
        module = _load(os.path.join(folder, entry["file"]))
        _select(module, entry)
        o = torch.full_like(q, float("nan"))
        module.run(q, k, v, o)
        error = ((o.double() - expected).norm() / expected.norm()).item()
        print(f"{entry['case']:18} {entry['label']:36} error {error:.1e} {module.VARIANTS_RUN}", flush=True)
        assert error < 1e-2, entry


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
    elif sys.argv[1] == "smoke":
        smoke(sys.argv[2])
    elif sys.argv[1] == "warm":
        warm(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[2], sys.argv[3], *(float(a) for a in sys.argv[4:5]))
