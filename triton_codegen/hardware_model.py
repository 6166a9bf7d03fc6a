"""A hardware model of generated kernels: occupancy and a roofline time, per kernel and config.

It reads three things:
- the kernel's tile summary (`summarize(program)`, tile_summary.py, emitted into every module as TILE_SUMMARY, so
  a GPU machine without TVM has it): the grid, the tile axes, every load and store site with the
  loops around it, every tl.dot, the buffers touched, as formulas of block sizes and shape sizes;
- the GPU spec table (tir_passes/contracts/gpu_specs.py);
- the registers, spills and shared memory Triton reports for the compiled kernel (ahead of time
  on the CPU, `aot_resources`, or from a launch on the GPU), else `estimate_resources`.

The formula (docs/tuning.md explains each term); P is the number of programs, trip counts are
averaged over the programs where a loop bound depends on the program's position (program_trips.py):

    k        = programs resident per SM: the least of the warp, register, shared-memory and
               program limits (0: the config cannot run)
    per SM   = ceil(P / SMs) programs for the busiest SM;  wave efficiency w = P / (per SM × SMs)
    DRAM     = Σ over buffers min(footprint, tile traffic), reads and writes apart
    tiles    = Σ over load and store sites: unmasked elements × trips × P × element bytes
    hiding h = min(1, bytes in flight / (copy bandwidth × MEMORY_LATENCY)), bytes in flight =
               min(P, k × SMs) × what one program loads per step (× (stages − 1) in a pipelined tl.dot loop)
    t_dot    = per SM × (issued dot flops of a program / (tensor peak / SMs) + TILE_SECONDS) + DRAM stores / copy
               − (per SM − 1) × PERSISTENT_SAVING where a persistent kernel runs PROGRAMS_PER_SM > 0
               (issued: a dot's rows rounded up to the 64 of a Hopper warpgroup MMA)
    t_stream = per SM × (a program's load bytes / min(min(k, per SM) × bytes in flight / latency, L2 bandwidth / SMs)
               + TILE_SECONDS), latency between MEMORY_LATENCY (tiles re-read from L2) and
               STREAM_LATENCY (bytes read once from DRAM), by the share of each
               (t_dot and t_stream: kernels with a tl.dot, the GEMM price of tir_passes/contracts/gemm_price.py)
    vector   = per SM × max(a program's instructions / FMA rate, special / MUFU rate + conversions / their rate)
               (the CUDA-core work of vector_work.py, per SM)
    largest  = max(DRAM / (copy bandwidth × h), tiles / (L2 bandwidth × h), t_dot, t_stream)
    time     = LAUNCH + max(largest, vector) + min(largest, vector) / streams
               (streams: the programs resident on the SM; one program's phases run one after another)

Not modelled: L2 hits between kernels, bank conflicts, what GROUP_M changes (L2 reuse of operand
tiles), a row loop's dependent block reductions (layernorm's backward: the time its loads wait behind
them; what its prefetch adds is only the bytes in flight), Triton's path for tf32 dots beyond their
conversions.

Imports nothing that needs TVM (only lowering.tile_ir for `summarize`), so the tuner runs on a
GPU machine with torch and triton alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tir_passes.contracts.gemm_price import (STREAM_LATENCY_SECONDS, TILE_SECONDS, WGMMA_ROWS, compute_seconds,
                                             persistent_saving, program_stream_seconds)
from tir_passes.contracts.gpu_specs import GpuSpec
from triton_codegen.tile_summary import OPS, dtype_bytes, summarize  # noqa: F401 - summarize: the model's input
from triton_codegen.program_trips import UnknownValue, evaluate  # noqa: F401 - UnknownValue: re-exported
from triton_codegen.program_trips import trip_counter as _trip_counter
from triton_codegen.vector_work import unit_rates

LAUNCH_SECONDS = 5e-6          # a kernel's launch, ramp-up and drain as CUDA events see it (H200: the
                               # bandwidth-bound rows of docs/benchmarks.md run 5-7 µs over their bytes)
MEMORY_LATENCY_SECONDS = 600e-9  # DRAM latency under load: Little's law sizes the bytes in flight
REGISTER_LIMIT = 255           # per thread; more spills to local memory
REGISTER_GRANULE = 256         # registers are allocated per warp in multiples of this
SHARED_RESERVE = 1024          # bytes the driver reserves per resident program (sm_80 and later)


# --- resources and occupancy -------------------------------------------------------------------
@dataclass(frozen=True)
class Resources:
    registers: int        # per thread (an estimate may exceed REGISTER_LIMIT)
    spilled_bytes: int    # local memory per thread (register spills)
    shared_bytes: int     # per program
    measured: bool        # reported by Triton (True) or estimated here (False)


@dataclass(frozen=True)
class Occupancy:
    programs_per_sm: int
    limiter: str          # what bounds it: warps, registers, shared memory, programs
    warps_fraction: float  # resident warps / the SM's maximum


def estimate_resources(kernel: dict, config: dict) -> Resources:
    """Registers and shared memory from the tiles alone, for configs not compiled yet: 32
    registers of addressing plus one per element of the largest tile a thread holds (the tl.dot
    accumulators of one K loop together, else the widest load or store), and shared memory for
    `num_stages` copies of the operand tiles of the tl.dots of one K loop (what Triton allocates for
    sm_90 when pointers are aligned, as torch's are), a tile several dots read (the summary's
    `operands`: SwiGLU's X) once. Estimates rank configs and prune those past the register limit;
    what Triton reports after compiling decides."""
    threads = config["num_warps"] * 32
    accumulators: dict[str, int] = {}   # dots over one K axis share its loop: their accumulators live together
    staged: dict[str, int] = {}
    counted: set = set()
    for index, dot in enumerate(kernel["dots"]):
        bm, bn, bk = (config[_block(kernel, dot[axis])] for axis in ("m", "n", "k"))
        accumulators[dot["k"]] = accumulators.get(dot["k"], 0) + bm * bn
        sites = dot.get("operands") or [None, None]   # a module from before `operands`: each dot its own tiles
        for side, (site, rows) in enumerate(zip(sites, (bm, bn))):
            key = (dot["k"], site) if site is not None else (dot["k"], "dot", index, side)
            if key not in counted:
                counted.add(key)
                tile_bytes = dtype_bytes(dot["dtype"]) * rows * bk
                staged[dot["k"]] = staged.get(dot["k"], 0) + config["num_stages"] * tile_bytes
    tiles = [_tile_elements(kernel, config, a["axes"]) for a in kernel["accesses"]]
    held = max(tiles + list(accumulators.values()) + [1])
    shared = max(staged.values(), default=0)
    return Resources(32 + math.ceil(held / threads), 0, shared, False)


def occupancy(spec: GpuSpec, resources: Resources, num_warps: int) -> Occupancy:
    registers = min(resources.registers, REGISTER_LIMIT)  # an estimate past the limit would spill
    registers_per_warp = math.ceil(registers * 32 / REGISTER_GRANULE) * REGISTER_GRANULE
    limits = {
        "warps": spec.max_warps_per_sm // num_warps,
        "registers": (spec.registers_per_sm // max(registers_per_warp, 1)) // num_warps,
        "shared memory": (spec.model_shared_memory_per_sm // (resources.shared_bytes + SHARED_RESERVE)
                          if resources.shared_bytes <= spec.shared_memory_per_block else 0),
        "programs": spec.max_programs_per_sm,
    }
    limiter = min(limits, key=lambda name: limits[name])  # ties: the first named
    programs = limits[limiter]
    return Occupancy(programs, limiter, programs * num_warps / spec.max_warps_per_sm)


def runnable(spec: GpuSpec, resources: Resources, num_warps: int) -> str | None:
    """Why a config cannot run well, or None: too much shared memory, spills, no resident program."""
    if resources.shared_bytes > spec.shared_memory_per_block:
        return f"shared memory {resources.shared_bytes} B > {spec.shared_memory_per_block} B"
    if resources.spilled_bytes:
        return f"spills {resources.spilled_bytes} B of registers per thread"
    if not resources.measured and resources.registers > REGISTER_LIMIT:
        return f"about {resources.registers} registers per thread (estimated): would spill"
    if occupancy(spec, resources, num_warps).programs_per_sm == 0:
        return "no program fits on a multiprocessor"
    return None


# --- the roofline time -------------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    seconds: float
    bound: str            # dram, l2, tensor cores, streaming (the largest term)
    programs: int
    dram_bytes: float
    tile_bytes: float
    dot_flops: float
    hiding: float
    wave_efficiency: float
    occupancy: Occupancy
    resources: Resources
    vector_seconds: float = 0.0   # the busiest SM's CUDA-core work (vector_work.py)
    streams: int = 1              # programs resident on the SM that hide it

    @property
    def ms(self) -> float:
        return self.seconds * 1e3


def predict(kernel: dict, config: dict, spec: GpuSpec, sizes: dict[str, int],
            resources: Resources | None = None) -> Prediction:
    """The model's time of one kernel at one config (see the module docstring)."""
    names = {**sizes, **config}
    trips = _trip_counter(kernel, names)
    resources = resources or estimate_resources(kernel, config)
    occ = occupancy(spec, resources, config["num_warps"])
    programs = max(1, math.prod(evaluate(count, names) for count in kernel["grid"]))
    slots = max(1, occ.programs_per_sm) * spec.multiprocessors
    per_sm = math.ceil(programs / spec.multiprocessors)  # an SM's programs share its tensor cores
    wave_efficiency = programs / (per_sm * spec.multiprocessors)
    traffic = _traffic(kernel, config, names, trips)
    tile_bytes = programs * sum(traffic.values())
    dram = _dram_bytes(kernel, names, traffic, programs)
    copy = spec.model_copy_bandwidth_gbs * 1e9
    step = _step_bytes(kernel, config, names)
    hiding = min(1.0, min(programs, slots) * step / (copy * MEMORY_LATENCY_SECONDS)) if step else 1.0
    terms = {"dram": dram / (copy * hiding), "l2": tile_bytes / (_l2_bandwidth(spec) * hiding)}
    flops = _dot_flops(kernel, config, trips) * programs
    peak = _dot_peak(kernel, spec)
    if flops and peak:   # the GEMM price's terms (tir_passes/contracts/gemm_price.py), from the summary
        stored = sum(bytes_ for (_, kind), bytes_ in _dram_by_site(kernel, names, traffic, programs).items()
                     if kind == "store")
        issued = _dot_flops(kernel, config, trips, _mma_rows(spec))   # a warpgroup's MMA computes 64 rows at least
        terms["tensor cores"] = compute_seconds(spec, issued, per_sm, stored, peak * 1e12)
        if programs_per_sm(kernel, config):
            terms["tensor cores"] -= persistent_saving(per_sm)
        loads = sum(bytes_ for (_, kind), bytes_ in traffic.items() if kind == "load")
        terms["streaming"] = program_stream_seconds(spec, per_sm, loads, step, min(occ.programs_per_sm, per_sm),
                                                    _stream_latency(kernel, names, traffic, programs))
        terms["streaming"] += per_sm * TILE_SECONDS   # each tile's pipeline fill and drain, whatever its bound
        if programs_per_sm(kernel, config):   # a persistent program saves on each tile's fixed cost in both
            terms["streaming"] -= persistent_saving(per_sm)
    bound = max(terms, key=lambda name: terms[name])
    vector = per_sm * program_vector_seconds(kernel, config, spec, trips)
    streams = max(1, min(occ.programs_per_sm, per_sm))
    seconds = overlapped(terms[bound], vector, streams)
    if vector > terms[bound]:
        bound = "cuda cores"
    return Prediction(LAUNCH_SECONDS + seconds, bound, programs, dram, tile_bytes, flops, hiding,
                      wave_efficiency, occ, resources, vector, streams)


def overlapped(largest: float, vector: float, streams: int) -> float:
    """The CUDA-core work beside the largest other term: one program's warps meet at every barrier
    (a block-wide reduction, a tile staged in shared memory), so its loads, dots and softmax run one
    after another (the softmax waits for the dot it reads, the next dot for the softmax); only the
    other `streams` programs resident on the SM hide it."""
    return max(largest, vector) + min(largest, vector) / streams


def program_vector_seconds(kernel: dict, config: dict, spec: GpuSpec, trips=None) -> float:
    """One program's CUDA-core time on its SM (vector_work.py): each work site's instructions over
    whole tiles (masked lanes execute too), and the fp32 operands of a tf32 dot, converted each K
    step. Every instruction takes an issue slot (the FMA pipe's rate); the special functions and
    conversions share the quarter-rate unit besides: the slower of the two is the time."""
    trips = trips or _trip_counter(kernel, config)
    counts = {unit: 0.0 for unit in ("alu", "special", "convert")}
    for site in kernel.get("work", ()):
        counts[site["unit"]] += _tile_elements(kernel, config, site["axes"]) * site["ops"] * trips(site["trips"])
    for dot in kernel["dots"]:
        if dot["dtype"] == "float32" and dot["precision"] == "tf32":
            bm, bn, bk = (config[_block(kernel, dot[axis])] for axis in ("m", "n", "k"))
            counts["convert"] += (bm + bn) * bk * trips(dot["trips"])
    rates = {unit: rate / spec.multiprocessors for unit, rate in unit_rates(spec).items()}
    if not all(rates.values()):
        return 0.0
    issue = sum(counts.values()) / rates["alu"]
    return max(issue, counts["special"] / rates["special"] + counts["convert"] / rates["convert"])


def _mma_rows(spec: GpuSpec) -> int:
    """The fewest rows a tensor-core instruction computes: a Hopper warpgroup MMA's 64 (a 16- or
    32-row tile pays for 64); mma.sync's 16 before sm_90."""
    return WGMMA_ROWS if spec.compute_capability >= 90 else 16


def _stream_latency(kernel: dict, names: dict, traffic: dict, programs: int) -> float:
    """What a program's loads wait: L2's latency for tiles other programs read too, DRAM's for the
    share of the loaded bytes that come from DRAM once (tir_passes/contracts/gemm_price.py)."""
    loaded = sum(bytes_ for (_, kind), bytes_ in traffic.items() if kind == "load") * programs
    from_dram = sum(bytes_ for (_, kind), bytes_ in _dram_by_site(kernel, names, traffic, programs).items()
                    if kind == "load")
    once = min(1.0, from_dram / loaded) if loaded else 0.0
    return MEMORY_LATENCY_SECONDS * (1 - once) + STREAM_LATENCY_SECONDS * once


def programs_per_sm(kernel: dict, config: dict) -> int:
    """A persistent kernel's programs per SM at this config (0: a program a tile, as every other kernel)."""
    if "persistent" not in kernel:
        return 0
    return config.get("PROGRAMS_PER_SM", kernel["persistent"]["programs_per_sm"])


def predict_program(summary: dict[str, dict], assignment: dict[str, dict], spec: GpuSpec, sizes: dict[str, int],
                    resources: dict[str, Resources] | None = None) -> float:
    """Seconds of a whole run(): its kernels one after the other."""
    resources = resources or {}
    return sum(predict(summary[name], config, spec, sizes, resources.get(name)).seconds
               for name, config in assignment.items())


def _l2_bandwidth(spec: GpuSpec) -> float:
    """Bytes per second; a GPU without an estimate gets 2.5 times its copy bandwidth."""
    return (spec.l2_bandwidth_gbs or 2.5 * spec.model_copy_bandwidth_gbs) * 1e9


def _block(kernel: dict, axis: str) -> str:
    return next(d["block"] for d in kernel["dims"] if d["axis"] == axis)


def _axis_elements(dim: dict, config: dict, names: dict[str, int]) -> float:
    """Unmasked positions of a tile along an axis, averaged over its tiles."""
    block = config[dim["block"]]
    try:
        extent = evaluate(dim["extent"], names)
    except UnknownValue:
        return block
    return extent / math.ceil(extent / block) if extent > 0 else 0.0


def _tile_elements(kernel: dict, config: dict, axes) -> int:
    blocks = {d["axis"]: config[d["block"]] for d in kernel["dims"]}
    return math.prod(blocks.get(axis, 1) for axis in axes)


def _traffic(kernel: dict, config: dict, names: dict[str, int], trips=None) -> dict[tuple[str, str], float]:
    """Bytes one program moves per (buffer, load|store), averaged over the programs."""
    trips = trips or _trip_counter(kernel, names)
    dims = {d["axis"]: d for d in kernel["dims"]}
    traffic: dict[tuple[str, str], float] = {}
    for access in kernel["accesses"]:
        elements = math.prod(_axis_elements(dims[axis], config, names) for axis in access["axes"] if axis in dims)
        key = (access["buffer"], access["kind"])
        traffic[key] = traffic.get(key, 0.0) + elements * access["bytes"] * trips(access["trips"])
    return traffic


def _footprint(buffer: dict, names: dict[str, int]) -> float:
    try:
        return buffer["bytes"] * math.prod(evaluate(entry, names) for entry in buffer["shape"])
    except UnknownValue:
        return math.inf


def _dram_bytes(kernel: dict, names: dict[str, int], traffic: dict, programs: int) -> float:
    """Each buffer read (and written) at most once from DRAM: re-reads of a tile hit the caches."""
    return sum(_dram_by_site(kernel, names, traffic, programs).values())


def _dram_by_site(kernel: dict, names: dict[str, int], traffic: dict, programs: int) -> dict:
    return {key: min(_footprint(kernel["buffers"][key[0]], names), per_program * programs)
            for key, per_program in traffic.items()}


def _step_bytes(kernel: dict, config: dict, names: dict[str, int]) -> float:
    """Bytes one program has in flight: one pass over its load sites, with (stages − 1) iterations
    prefetched when its loads sit in a loop that feeds a tl.dot (Triton pipelines those), and a row
    walk's loads issued d iterations ahead (Tiling's prefetch: the summary's "ahead") d more times."""
    dims = {d["axis"]: d for d in kernel["dims"]}
    total = 0.0
    for access in kernel["accesses"]:
        if access["kind"] != "load":
            continue
        elements = math.prod(_axis_elements(dims[axis], config, names) for axis in access["axes"] if axis in dims)
        pipelined = kernel["dots"] and access["trips"]
        copies = max(1, config["num_stages"] - 1) if pipelined else 1 + access.get("ahead", 0)
        total += elements * access["bytes"] * copies
    return total


def _dot_flops(kernel: dict, config: dict, trips, min_rows: int = 1) -> float:
    """Per program, averaged over the programs: full tiles, masked tails included (the tensor cores
    compute them anyway), each dot's rows rounded up to `min_rows`."""
    total = 0.0
    for dot in kernel["dots"]:
        bm, bn, bk = (config[_block(kernel, dot[axis])] for axis in ("m", "n", "k"))
        total += 2.0 * max(bm, min_rows) * bn * bk * trips(dot["trips"])
    return total


def _dot_peak(kernel: dict, spec: GpuSpec) -> float | None:
    peaks = [spec.dot_tflops(d["dtype"], d["precision"]) for d in kernel["dots"]]
    known = [p for p in peaks if p]
    return min(known) if known else None
