"""What the GPU probes (benchmarks/*_gpu.py, *_probe_*.py) share: the project's folders on sys.path,
a generated module loaded from its file, a kernel's default config, configs named once, do_bench and
CUDA-graph timings, a failure's one-line text, rows written as they are measured, the CPU smoke.

A probe's run side executes on the GPU machine with torch + triton only (no TVM): everything here
imports torch and triton inside the function that uses them, and nothing of the project, except
`gemm_program` and `compiled_into`, which the generate side alone calls (they need TVM).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MEMORY_INSTRUCTION = re.compile(r"\b((?:ld|st)\.(?:global|shared)(?:\.[a-z0-9]+)*|ldmatrix[.a-z0-9]*|stmatrix[.a-z0-9]*"
                                 r"|cp\.async\.bulk\.tensor|bar\.sync)")


def on_path() -> None:
    """The repository and its examples first on sys.path (the generated modules and the examples)."""
    sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]


def load_module(path: str, name: str | None = None):
    """A generated module imported from its file, under its file's name unless `name` is given."""
    spec = importlib.util.spec_from_file_location(name or os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gemm_program(kind: str, m: int, n: int, k: int):
    """Generate side (TVM): linear is X·Wᵀ with a fp16 result, matmul A·B with a fp32 one (as the suite's)."""
    on_path()
    from linear import make_linear
    from matmul import make_matmul

    return make_linear(m, n, k) if kind == "linear" else make_matmul(m, n, k)


def compiled_into(folder: str, name: str, program, **options):
    """Generate side (TVM): the program compiled (unverified: the probe checks the numbers on the GPU)
    and saved as folder/name.py."""
    on_path()
    from triton_codegen import compile

    compiled = compile(program, verify=False, **options)
    compiled.save(os.path.join(folder, f"{name}.py"))
    return compiled


def default_config(kernel) -> dict:
    """A TileKernel's default launch config as a module's CONFIGS entry holds it."""
    config = dict(kernel.block_sizes, num_warps=kernel.num_warps, num_stages=kernel.num_stages)
    if kernel.group_m:
        config["GROUP_M"] = kernel.group_m
    return config


def first_names(found: dict[str, dict]) -> dict[str, dict]:
    """Each distinct config under the first name it was found by (so the default keeps "default")."""
    unique: dict[str, dict] = {}
    for name, config in found.items():
        if config not in unique.values():
            unique[name] = config
    return unique


def bench_us(fn, rep: int = 40, warmup: int = 10) -> float:
    """do_bench's median in microseconds (L2 flushed between repetitions), the launches included."""
    from triton.testing import do_bench

    return 1e3 * do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def graph_us(fn, rep: int = 25, warmup: int = 5) -> float | str:
    """The median of a CUDA graph's replay of `fn` (the GPU time alone, no Python launches), in
    microseconds; why not, where `fn` cannot be captured."""
    import torch

    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return bench_us(graph.replay, rep=rep, warmup=warmup)
    except Exception as err:  # noqa: BLE001 - reported in the row, the rest goes on
        return str(err)[:100]


def emit_timed(log: "RowLog", row: dict, fn, flops: float) -> None:
    """`row` with `fn` timed through Python's launch (`us`) and as a CUDA graph's replay (`graph_us`,
    the GPU alone) and its rate from the replay where it could be captured, emitted to `log`."""
    us, graph = bench_us(fn), graph_us(fn)
    rate = flops / (graph if isinstance(graph, float) else us) / 1e6
    log.emit(dict(row, us=round(us, 2), graph_us=round(graph, 2) if isinstance(graph, float) else graph,
                  tflops=round(rate, 1)))


def launch_registers(ptx: str) -> int | None:
    """A kernel's `.maxnreg` bound (the registers each thread is launched with), None where it has none."""
    found = re.search(r"^\.maxnreg (\d+)", ptx, flags=re.M)
    return int(found.group(1)) if found else None


def wgmma_serialized(ptx: str, arch: str) -> bool:
    """Whether ptxas (the one Triton ships) serializes the kernel's asynchronous wgmmas (its C7514
    note: an instruction that is not a wgmma touches an accumulator inside a wgmma stage), which
    undoes the overlap a Hopper schedule is written for. Compiled again here with -v to read its notes,
    by the ptxas Triton picks for the architecture (3.9 takes its newer one from sm_90 up)."""
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(int(arch)).path
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        done = subprocess.run([ptxas, f"-arch=sm_{arch}a", "-v", source, "-o", os.path.join(folder, "kernel.cubin")],
                              capture_output=True, text=True, check=True)
    return "C7514" in done.stdout + done.stderr


class _StubKernel:
    """A kernel that launches nothing: a module's host work timed alone on the CPU."""

    def __init__(self, name):
        self.__name__ = name   # a kernel's name: launch_replay checks the module still has it

    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        return None


def stub_kernels(module) -> None:
    """Every Triton kernel of a generated module replaced by a stub, CPU tensors let through the
    device check (nothing is interpreted): run() does all its Python work and launches nothing."""
    module._INTERPRETED = True
    for name, value in list(vars(module).items()):
        if type(value).__name__ in ("JITFunction", "InterpretedFunction"):
            setattr(module, name, _StubKernel(name))


def host_us(fn, calls: int) -> float:
    """Microseconds a call of `fn` takes on the host, after 100 warm-up calls."""
    for _ in range(100):
        fn()
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    return round((time.perf_counter() - begin) / calls * 1e6, 2)


def instruction_counts(ptx: str) -> dict[str, int]:
    """A kernel's PTX: global and shared loads and stores by width, ldmatrix/stmatrix, TMA copies, barriers."""
    return dict(sorted(collections.Counter(_MEMORY_INSTRUCTION.findall(ptx)).items()))


def failure(err: BaseException, limit: int = 200) -> str:
    return f"{type(err).__name__}: {str(err)[:limit]}"


class RowLog:
    """Rows printed and the JSON rewritten as each is measured: a run stopped at its time limit
    keeps what it measured. `elapsed_s` on each row where `stamp`; the file holds the list of rows,
    or with a `header` that dict with the list under "rows"."""

    def __init__(self, out: str, stamp: bool = True, header: dict | None = None):
        self.out, self.stamp, self.header, self.rows, self.started = out, stamp, header, [], time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def emit(self, row: dict) -> dict:
        if self.stamp:
            row["elapsed_s"] = round(self.elapsed(), 1)
        self.rows.append(row)
        print(json.dumps(row), flush=True)
        if self.out:
            write_json(self.out, self.rows if self.header is None else dict(self.header, rows=self.rows))
        return row


def write_json(path: str, value) -> None:
    with open(path, "w") as handle:
        json.dump(value, handle, indent=1)


def command(argv: list[str], generate, smoke, run, **others) -> None:
    """A probe's command line: `generate DIR`, `smoke`, another named command with the words after it,
    else `run DIR OUT` (the words after the command, OUT's followers included, go to `run`)."""
    if argv[1] == "generate":
        generate(argv[2])
    elif argv[1] == "smoke":
        smoke()
    elif argv[1] in others:
        others[argv[1]](*argv[2:])
    else:
        run(*argv[2:])


def interpreted_smoke(generate_and_run, limit: float = 1e-2) -> None:
    """A probe's CPU smoke: `generate_and_run(folder)` (a scratch folder) in Triton's interpreter
    returns its rows; each must have run with a relative error under `limit`."""
    os.environ["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as folder:
        rows = generate_and_run(folder)
    bad = [row for row in rows if "failed" in row or row["error"] > limit]
    assert not bad, bad
    print(len(rows), "variants ran")
