"""A hand-written warp-specialized Gluon attention (benchmarks/gluon_attention_kernels.py) against
SDPA's default, its backends by name and the suite's module.

    python benchmarks/gluon_attention_gpu.py aot [90 [0,2]]            # CPU: the variants compiled for sm_90
    python3 benchmarks/gluon_attention_gpu.py run OUT.json [SUITE_DIR]  # GPU (torch + triton only), about a minute

Issue 17's attention miss (0.82× cuDNN, 0.76× causal) asks whether FA3's schedule (a producer warp
feeding two consumer warpgroups, the softmax under the next dots) pays in Gluon before the backend is
taught to emit it. b4 h32 s4096 d128 fp16, non-causal and causal, as the suite's cases; every output
checked against SDPA's math backend in float32 before it is timed; `do_bench` medians (L2 flushed)
and a CUDA graph's replay. Written 2026-12-07 and compiled for sm_90 on Triton 3.6 and 3.9 (no
spills: 168 registers at launch, setmaxnreg giving each consumer 240); not yet run on a GPU.
"""

import math
import os
import sys

from probe_common import RowLog, emit_timed, failure, launch_registers, load_module, on_path, wgmma_serialized

SHAPE = (4, 32, 4096, 128)
VARIANTS = (
    {"OVERLAP": False, "PINGPONG": False, "BM": 128, "BN": 128, "STAGES": 2, "registers": (240, 24)},
    {"OVERLAP": True, "PINGPONG": False, "BM": 128, "BN": 128, "STAGES": 2, "registers": (240, 24)},
    {"OVERLAP": True, "PINGPONG": True, "BM": 128, "BN": 128, "STAGES": 2, "registers": (240, 24)},
    {"OVERLAP": True, "PINGPONG": True, "BM": 128, "BN": 64, "STAGES": 3, "registers": (240, 24)},
    {"OVERLAP": True, "PINGPONG": True, "BM": 128, "BN": 128, "STAGES": 3, "registers": (240, 24)},
    {"OVERLAP": True, "PINGPONG": False, "BM": 128, "BN": 128, "STAGES": 3, "registers": (240, 24)},
)
SUITE_CASES = {False: "attention_fp16_b4h32s4096d128", True: "attention_causal_fp16_b4h32s4096d128"}


def label(variant: dict) -> str:
    order = "overlapped" if variant["OVERLAP"] else "in order"
    turns = ", ping-pong" if variant["PINGPONG"] else ""
    return f"{order}{turns} {variant['BM']}x{variant['BN']} {variant['STAGES']} stages"


def fits(variant: dict, head: int) -> bool:
    """Q's block and STAGES of K and V tiles within a Hopper program's shared memory (gpu_specs)."""
    from tir_passes.contracts.gpu_specs import gpu_spec

    tiles = variant["BM"] * head + 2 * variant["STAGES"] * variant["BN"] * head
    return 2 * tiles + 1024 <= gpu_spec("H100").shared_memory_per_block


def _layouts(variant: dict, head: int, dtype):
    """Block shapes and NVMMA shared layouts of the Q (a consumer's half) and K/V descriptors."""
    from triton.experimental.gluon import language as gl

    q_block, kv_block = [variant["BM"] // 2, head], [variant["BN"], head]
    return (q_block, gl.NVMMASharedLayout.get_default_for(q_block, dtype), kv_block,
            gl.NVMMASharedLayout.get_default_for(kv_block, dtype))


def _constants(variant: dict, head: int, causal: bool) -> dict:
    return {"BM": variant["BM"], "BN": variant["BN"], "HEAD": head, "STAGES": variant["STAGES"], "CAUSAL": causal,
            "OVERLAP": variant["OVERLAP"], "PINGPONG": variant["PINGPONG"], "CONSUMER_REGISTERS": variant["registers"][0],
            "PRODUCER_REGISTERS": variant["registers"][1]}


def launch(variant: dict, q, k, v, o, causal: bool) -> None:
    """O = attention(Q, K, V) with host-side TMA descriptors over the [B·H·S, D] views."""
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    import gluon_attention_kernels as kernels

    batch, heads, seq, head = q.shape
    assert seq % variant["BM"] == 0 and seq % variant["BN"] == 0, "the probe's descriptors span all heads"
    dtypes = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
    q_block, q_layout, kv_block, kv_layout = _layouts(variant, head, dtypes[q.dtype])
    flat = batch * heads * seq
    q_desc = TensorDescriptor.from_tensor(q.view(flat, head), q_block, q_layout)
    k_desc = TensorDescriptor.from_tensor(k.view(flat, head), kv_block, kv_layout)
    v_desc = TensorDescriptor.from_tensor(v.view(flat, head), kv_block, kv_layout)
    qk_scale = kernels.LOG2_E / math.sqrt(head)
    kernels.attention_forward[kernels.grid(seq, batch * heads, variant["BM"])](
        q_desc, k_desc, v_desc, o, seq, qk_scale, **_constants(variant, head, causal), num_warps=4,
        maxnreg=kernels.maxnreg(*variant["registers"]))


def aot(arch: str = "90", which: str = "") -> list[dict]:
    """The variants (all, or those at the comma-separated indices `which`) compiled for sm_`arch` on
    this machine's Triton, fp16, non-causal and causal: shared bytes, the PTX's wgmma and setmaxnreg
    counts, its launch registers, whether ptxas serializes its wgmmas."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    import gluon_attention_kernels as kernels

    head = SHAPE[3]
    rows = []
    chosen = [VARIANTS[int(i)] for i in which.split(",")] if which else VARIANTS
    for variant in chosen:
        if not fits(variant, head):
            continue
        q_block, q_layout, kv_block, kv_layout = _layouts(variant, head, gl.float16)
        for causal in (False, True):
            signature = {"q_desc": f"tensordesc<fp16{q_block},{q_layout!r}>",
                         "k_desc": f"tensordesc<fp16{kv_block},{kv_layout!r}>",
                         "v_desc": f"tensordesc<fp16{kv_block},{kv_layout!r}>", "o_ptr": "*fp16", "seq": "i32",
                         "qk_scale": "fp32"}
            options = {"num_warps": 4, "maxnreg": kernels.maxnreg(*variant["registers"])}
            compiled = triton.compile(GluonASTSource(kernels.attention_forward, signature,
                                                     _constants(variant, head, causal)),
                                      target=GPUTarget("cuda", int(arch), 32), options=options)
            ptx = compiled.asm["ptx"]
            rows.append({"variant": label(variant), "causal": causal, "shared": compiled.metadata.shared,
                         "wgmma": ptx.count("wgmma.mma_async"), "setmaxnreg": ptx.count("setmaxnreg"),
                         "maxnreg": launch_registers(ptx), "wgmma_serialized": wgmma_serialized(ptx, arch),
                         "triton": triton.__version__})
            print(rows[-1], flush=True)
    return rows


def _time_peers(log: RowLog, case: str, q, k, v, causal: bool, flops: float) -> None:
    """SDPA by default and through each backend by name."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    emit_timed(log, {"case": case, "who": "SDPA default"},
               lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), flops)
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
        def call(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            emit_timed(log, {"case": case, "who": f"SDPA {backend.name}"}, call, flops)
        except Exception as err:  # noqa: BLE001 - reported in the row, the rest goes on
            log.emit({"case": case, "who": f"SDPA {backend.name}", "failed": failure(err)})


def _reference(q, k, v, causal: bool):
    """SDPA's math backend in float32."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)


def _relative_error(out, reference) -> float:
    return float((out.float() - reference).norm() / reference.norm())


def _time_variants(log: RowLog, case: str, q, k, v, causal: bool, reference, flops: float) -> None:
    """Every variant that fits, checked against `reference` (relative error under 1e-2) before it is timed."""
    import torch

    o = torch.empty_like(q)
    for variant in VARIANTS:
        row = {"case": case, "who": "gluon", "variant": label(variant)}
        if not fits(variant, q.shape[3]):
            continue
        try:
            o.fill_(float("nan"))
            launch(variant, q, k, v, o, causal)
            torch.cuda.synchronize()
            row["error"] = _relative_error(o, reference)
            if not row["error"] < 1e-2:
                log.emit(dict(row, failed="wrong result, not timed"))
                continue
            emit_timed(log, row, lambda variant=variant: launch(variant, q, k, v, o, causal), flops)
        except Exception as err:  # noqa: BLE001 - reported in the row, the rest goes on
            log.emit(dict(row, failed=failure(err, 300)))


def _time_suite_module(log: RowLog, case: str, suite_dir: str, q, k, v, causal: bool, reference, flops: float):
    """The suite's generated module for the case through its run(), where SUITE_DIR has it."""
    import torch

    path = os.path.join(suite_dir, f"{SUITE_CASES[causal]}.py")
    if not os.path.exists(path):
        return
    module = load_module(path)
    o = torch.empty_like(q)
    module.run(q, k, v, o)
    row = {"case": case, "who": f"ours ({SUITE_CASES[causal]}.py run())", "error": _relative_error(o, reference)}
    emit_timed(log, row, lambda: module.run(q, k, v, o), flops)


def run(out: str, suite_dir: str | None = None) -> None:
    """Non-causal then causal: the peers, the suite's module, the variants (last: a variant that hangs
    leaves the rest measured). Rows written as measured."""
    import torch
    import triton

    log = RowLog(out, header={"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                              "torch": torch.__version__})
    torch.manual_seed(0)
    batch, heads, seq, head = SHAPE
    q, k, v = (torch.randn(SHAPE, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        case = f"b{batch}h{heads}s{seq}d{head}" + (" causal" if causal else "")
        flops = 4.0 * batch * heads * seq * seq * head / (2 if causal else 1)
        reference = _reference(q, k, v, causal)
        _time_peers(log, case, q, k, v, causal, flops)
        if suite_dir:
            _time_suite_module(log, case, suite_dir, q, k, v, causal, reference, flops)
        _time_variants(log, case, q, k, v, causal, reference, flops)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    on_path()
    if sys.argv[1] == "aot":
        aot(*sys.argv[2:])
    else:
        run(*sys.argv[2:])
