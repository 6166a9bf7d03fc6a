"""Hand-written Gluon GEMMs on Hopper (benchmarks/gluon_gemm_kernels.py) against cuBLAS and the suite's module.

    python benchmarks/gluon_gemm_gpu.py aot [90 [0,2]]               # CPU: the variants (all, or these) compiled for sm_90
    python3 benchmarks/gluon_gemm_gpu.py run OUT.json [SUITE_DIR]    # GPU (torch + triton only), about a minute

Issue 17's 3000×5000×1000 miss asks whether what cuBLAS does (a persistent grid whose next tile's loads
run under this one's epilogue; warp-specialized consumers taking turns) pays in a kernel the Gluon
backend could emit, before building it. Each contraction is timed at each variant with fp32 and fp16
output beside cuBLAS writing either (`torch.matmul`, `torch.mm(..., out_dtype=torch.float32)`); with
SUITE_DIR (benchmarks/suite.py generate) the suite's module for matmul_fp16_3000x5000x1000 too.
`do_bench` medians (L2 flushed) through Python's launch and of a CUDA graph's replay ("graph_us": the
GPU alone); every output checked against float64 first.
"""

import os
import sys

from probe_common import RowLog, emit_timed, failure, launch_registers, load_module, on_path, wgmma_serialized

CASES = ((3000, 5000, 1000, False), (4096, 4096, 4096, False), (8192, 11008, 4096, True))
VARIANTS = (
    {"kernel": "persistent", "BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP_M": 8, "num_warps": 8},
    {"kernel": "persistent", "BM": 128, "BN": 256, "BK": 64, "STAGES": 4, "GROUP_M": 8, "num_warps": 8},
    {"kernel": "pingpong", "BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "GROUP_M": 8, "registers": (232, 40)},
    {"kernel": "pingpong", "BM": 128, "BN": 128, "BK": 64, "STAGES": 2, "GROUP_M": 8, "registers": (232, 40)},
    {"kernel": "pingpong", "BM": 128, "BN": 128, "BK": 32, "STAGES": 6, "GROUP_M": 8, "registers": (232, 40)},
    {"kernel": "pingpong", "BM": 128, "BN": 64, "BK": 64, "STAGES": 4, "GROUP_M": 8, "registers": (232, 40)},
)
SUITE_CASE = "matmul_fp16_3000x5000x1000"
EPILOGUE_SLICES = 4             # gemm_persistent stores its accumulator in this many column slices


def fits(variant: dict, out_bytes: int) -> bool:
    """Shared memory within a Hopper program's (gpu_specs): operand stages, and the persistent
    kernel's two epilogue slices."""
    from tir_passes.contracts.gpu_specs import gpu_spec

    limit = gpu_spec("H100").shared_memory_per_block
    stage = (variant["BM"] + variant["BN"]) * variant["BK"] * 2
    if variant["kernel"] == "pingpong":
        return 2 * variant["STAGES"] * stage <= limit
    return variant["STAGES"] * stage + 2 * variant["BM"] * variant["BN"] // EPILOGUE_SLICES * out_bytes <= limit


def label(variant: dict) -> str:
    shape = f"{variant['BM']}x{variant['BN']}x{variant['BK']} {variant['STAGES']} stages GROUP_M {variant['GROUP_M']}"
    return f"{variant['kernel']} {shape}"


def _layouts(variant: dict, a_dtype, c_dtype, b_nk: bool):
    """Block shapes and NVMMA shared layouts of the A, B and C descriptors (C: one epilogue slice)."""
    from triton.experimental.gluon import language as gl

    bm, bn, bk = variant["BM"], variant["BN"], variant["BK"]
    b_block = [bn, bk] if b_nk else [bk, bn]
    c_block = [bm, bn // EPILOGUE_SLICES]
    return ([bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], a_dtype), b_block,
            gl.NVMMASharedLayout.get_default_for(b_block, a_dtype), c_block,
            gl.NVMMASharedLayout.get_default_for(c_block, c_dtype))


def launch(variant: dict, a, b, c, b_nk: bool) -> None:
    """C = A·B (B N×K where `b_nk`) with host-side TMA descriptors, one program an SM."""
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    import gluon_gemm_kernels as kernels

    dtypes = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}
    a_block, a_layout, b_block, b_layout, c_block, c_layout = _layouts(variant, dtypes[a.dtype], dtypes[c.dtype], b_nk)
    a_desc = TensorDescriptor.from_tensor(a, a_block, a_layout)
    b_desc = TensorDescriptor.from_tensor(b, b_block, b_layout)
    m, k = a.shape
    n = c.shape[1]
    grid = kernels.programs(kernels.tiles_of(m, n, variant["BM"], variant["BN"]),
                            torch.cuda.get_device_properties(a.device).multi_processor_count)
    shape = (variant["BM"], variant["BN"], variant["BK"], variant["STAGES"], variant["GROUP_M"], b_nk)
    if variant["kernel"] == "persistent":
        c_desc = TensorDescriptor.from_tensor(c, c_block, c_layout)
        kernels.gemm_persistent[grid](a_desc, b_desc, c_desc, m, n, k, *shape, num_warps=variant["num_warps"])
    else:
        kernels.gemm_pingpong[grid](a_desc, b_desc, c, c.stride(0), m, n, k, *shape, *variant["registers"],
                                    num_warps=4, maxnreg=kernels.pingpong_maxnreg(*variant["registers"]))


def aot(arch: str = "90", which: str = "") -> list[dict]:
    """The variants (all, or those at the comma-separated indices `which`) compiled for sm_`arch` on
    this machine's Triton, fp16 operands, fp32 C with B stored K×N and fp16 C with B stored N×K:
    shared bytes, the PTX's wgmma and setmaxnreg counts, its launch registers, whether ptxas serializes
    its wgmmas."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    import gluon_gemm_kernels as kernels

    rows = []
    chosen = [VARIANTS[int(i)] for i in which.split(",")] if which else VARIANTS
    for variant in chosen:
        for out, b_nk in (("fp32", False), ("fp16", True)):
            if not fits(variant, 4 if out == "fp32" else 2):
                continue
            c_dtype = gl.float32 if out == "fp32" else gl.float16
            options = {}
            a_block, a_layout, b_block, b_layout, c_block, c_layout = _layouts(variant, gl.float16, c_dtype, b_nk)
            signature = {"a_desc": f"tensordesc<fp16{a_block},{a_layout!r}>",
                         "b_desc": f"tensordesc<fp16{b_block},{b_layout!r}>"}
            constants = {"BM": variant["BM"], "BN": variant["BN"], "BK": variant["BK"], "STAGES": variant["STAGES"],
                         "GROUP_M": variant["GROUP_M"], "B_NK": b_nk}
            if variant["kernel"] == "persistent":
                kernel, warps = kernels.gemm_persistent, variant["num_warps"]
                signature["c_desc"] = f"tensordesc<{out}{c_block},{c_layout!r}>"
                constants["num_warps"] = warps
            else:
                kernel, warps = kernels.gemm_pingpong, 4
                options["maxnreg"] = kernels.pingpong_maxnreg(*variant["registers"])
                signature.update(c_ptr=f"*{out}", stride_cm="i32")
                constants.update(CONSUMER_REGISTERS=variant["registers"][0], PRODUCER_REGISTERS=variant["registers"][1])
            signature.update(M="i32", N="i32", K="i32")
            options["num_warps"] = warps
            compiled = triton.compile(GluonASTSource(kernel, signature, constants), target=GPUTarget("cuda", int(arch), 32),
                                      options=options)
            ptx = compiled.asm["ptx"]
            rows.append({"variant": label(variant), "out": out, "b_nk": b_nk, "shared": compiled.metadata.shared,
                         "wgmma": ptx.count("wgmma.mma_async"), "setmaxnreg": ptx.count("setmaxnreg"),
                         "maxnreg": launch_registers(ptx), "wgmma_serialized": wgmma_serialized(ptx, arch),
                         "triton": triton.__version__})
            print(rows[-1], flush=True)
    return rows


def _relative_error(out, reference) -> float:
    """‖out − reference‖ / ‖reference‖, in float64."""
    return float((out.double() - reference).norm() / reference.norm())


def _time_peers(log: RowLog, case: str, a, b, flops: float) -> None:
    """cuBLAS writing fp16 and writing fp32."""
    import torch

    emit_timed(log, {"case": case, "who": "cuBLAS, fp16 C"}, lambda: torch.matmul(a, b), flops)
    emit_timed(log, {"case": case, "who": "cuBLAS, fp32 C"}, lambda: torch.mm(a, b, out_dtype=torch.float32), flops)


def _time_variants(log: RowLog, case: str, a, b, b_nk: bool, reference, flops: float) -> None:
    """Every variant that fits, with fp32 and fp16 C, checked against `reference` before it is timed."""
    import torch

    for c_dtype in (torch.float32, torch.float16):
        c = torch.empty(reference.shape, device="cuda", dtype=c_dtype)
        for variant in VARIANTS:
            row = {"case": case, "who": f"gluon, {str(c_dtype)[6:]} C", "variant": label(variant)}
            if not fits(variant, c.element_size()):
                continue
            try:
                c.fill_(float("nan"))
                launch(variant, a, b, c, b_nk)
                torch.cuda.synchronize()
                row["error"] = _relative_error(c, reference)
                emit_timed(log, row, lambda v=variant: launch(v, a, b, c, b_nk), flops)
            except Exception as err:  # noqa: BLE001 - reported in the row, the rest goes on
                log.emit(dict(row, failed=failure(err, 300)))


def _time_suite_module(log: RowLog, suite_dir: str) -> None:
    """The suite's generated module for 3000×5000×1000 through its run(), where SUITE_DIR has it."""
    import torch

    path = os.path.join(suite_dir, f"{SUITE_CASE}.py")
    if not os.path.exists(path):
        return
    module = load_module(path)
    a = torch.randn(3000, 1000, device="cuda", dtype=torch.float16)
    b = torch.randn(1000, 5000, device="cuda", dtype=torch.float16)
    c = torch.empty(3000, 5000, device="cuda", dtype=torch.float32)
    module.run(a, b, c)
    row = {"case": "3000x5000x1000", "who": f"ours ({SUITE_CASE}.py run()), float32 C",
           "error": _relative_error(c, a.double() @ b.double())}
    emit_timed(log, row, lambda: module.run(a, b, c), 2.0 * 3000 * 5000 * 1000)


def run(out: str, suite_dir: str | None = None) -> None:
    """Every case: the peers, then the variants; the suite's module last. Rows written to `out` as measured."""
    import torch
    import triton

    log = RowLog(out, header={"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                              "torch": torch.__version__})
    torch.manual_seed(0)
    for m, n, k, b_nk in CASES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, k, device="cuda", dtype=torch.float16) if b_nk else torch.randn(k, n, device="cuda",
                                                                                           dtype=torch.float16)
        b_mk = b.T if b_nk else b
        case, flops = f"{m}x{n}x{k}", 2.0 * m * n * k
        _time_peers(log, case, a, b_mk, flops)
        _time_variants(log, case, a, b, b_nk, a.double() @ b_mk.double(), flops)
    if suite_dir:
        _time_suite_module(log, suite_dir)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    on_path()
    if sys.argv[1] == "aot":
        aot(*sys.argv[2:])
    else:
        run(*sys.argv[2:])
