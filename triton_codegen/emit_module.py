"""TileProgram -> one standalone Python module: header, kernels, the entry point `run(...)`, and
below them what run() needs: data, configs, runtime support, launchers, `tune(...)` and
`as_torch_op(qualname)` (a reader meets the kernels first; the runtime is the same in every module).

The module imports only the standard library, torch, triton and triton.language. Argument checks,
benchmarking and PyTorch registration are hand-written (runtime_support.py, whose docstring says
what a launch accepts, torch_op_support.py, and launch_replay.py, run()'s replay of a repeated
call's launches) and copied in; the generated part is data (PARAMS,
OUTPUTS, CONFIGS), the combine functions of selection reductions, the kernels and one short launch
function per kernel (which takes the kernel wrapper: direct, or torch.library.wrap_triton for the
op on a GPU). `run` and `tune` take the PrimFunc's parameters by position or by name; a launch
function skips a kernel whose grid is empty (nothing to compute) and refuses one beyond CUDA's
grid limit. A kernel with tensor-descriptor accesses (descriptors.py) is written twice, pointers
and `_tma`; its launch function lets runtime_support.launch_variant pick one (DESCRIPTORS lists
the descriptors each takes).
"""

from __future__ import annotations

import inspect
import pprint

from lowering.rewrites.tile_access import with_tile_accesses
from lowering.tile_ir import Binary, Const, Expr, Scalar, TileKernel, TileProgram

from . import launch_replay, runtime_support, torch_op_support
from .backward_link import BackwardLink, backward_literal
from .configs import config_space
from .descriptors import DescriptorPlan, plan_descriptors
from .emit_combine import emit_select_combine
from .emit_kernel import emit_kernel
from .kernel_helpers import CONSTANTS, HELPERS
from .hardware_model import summarize
from .persistent import persistent_support_text
from .source import Source
from .writeback import configs_source

VERSION = "0.1.0"
_BEGIN, _END = "# --- tir-triton runtime support: begin ---", "# --- tir-triton runtime support: end ---"
_TORCH_BEGIN, _TORCH_END = "# --- tir-triton torch op support: begin ---", "# --- tir-triton torch op support: end ---"
_REPLAY_BEGIN, _REPLAY_END = "# --- tir-triton launch replay: begin ---", "# --- tir-triton launch replay: end ---"


def runtime_support_text() -> str:
    text = inspect.getsource(runtime_support)
    return text[text.index(_BEGIN):text.index(_END) + len(_END)]


def torch_op_support_text() -> str:
    text = inspect.getsource(torch_op_support)
    return text[text.index(_TORCH_BEGIN):text.index(_TORCH_END) + len(_TORCH_END)]


def launch_replay_text() -> str:
    text = inspect.getsource(launch_replay)
    return text[text.index(_REPLAY_BEGIN):text.index(_REPLAY_END) + len(_REPLAY_END)]


def python_scalar(expr: Expr, blocks: set[str], scalars: dict[str, str] | None = None) -> str:
    """A scalar expression as launcher Python: block sizes from `config`, sizes from `s` (by their
    TIR names: `scalars` maps a kernel's parameter to the TIR name it stands for)."""
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Scalar):
        return f'config["{expr.name}"]' if expr.name in blocks else f's["{(scalars or {}).get(expr.name, expr.name)}"]'
    if isinstance(expr, Binary):
        a, b = python_scalar(expr.a, blocks, scalars), python_scalar(expr.b, blocks, scalars)
        if expr.op == "cdiv":
            return f"triton.cdiv({a}, {b})"
        if expr.op in ("min", "max"):
            return f"{expr.op}({a}, {b})"
        if expr.op in ("+", "-", "*", "//", "%", "floordiv", "floormod"):
            op = {"floordiv": "//", "floormod": "%"}.get(expr.op, expr.op)
            return f"({a} {op} {b})"
    raise NotImplementedError(f"launcher expression {expr}")


def _params_literal(program: TileProgram) -> str:
    narrow = {b for k in program.kernels for b in (x.name for x in k.buffers) if b not in k.int64_buffers}
    rows = [(p.name, p.kind, p.dtype, tuple(p.shape), p.written, p.name in narrow) for p in program.params]
    return "PARAMS = " + pprint.pformat(tuple(rows), width=100) + "\n" + _size_dtypes_literal(program)


def _size_dtypes_literal(program: TileProgram) -> str:
    """The dtype each shape variable has in the kernels' signatures: a size bound from a tensor's
    dimension is range-checked against it at launch, as a scalar argument is."""
    dtypes = {}
    for kernel in program.kernels:
        for scalar in kernel.scalars:
            if scalar.name in program.shape_vars:
                dtypes.setdefault(scalar.name, scalar.dtype)
    return "SIZE_DTYPES = " + repr(dict(sorted(dtypes.items())))


def op_outputs(program: TileProgram) -> tuple[str, ...]:
    """Parameters the PyTorch op allocates and returns: written, not read, every element written
    (lowering/rewrites/param_reads.py); the others are its arguments."""
    return tuple(p.name for p in program.params if p.kind == "buffer" and p.written and not p.read)


def _outputs_literal(program: TileProgram) -> str:
    return (
        "# written, not read, every element written (lowering/rewrites/param_reads.py): the PyTorch op allocates them\n"
        f"OUTPUTS = {op_outputs(program)!r}"
    )


def _as_torch_op_function(program: TileProgram, src: Source, backward: BackwardLink | None) -> None:
    outputs = op_outputs(program)
    inputs = [p.name for p in program.params if p.name not in outputs]
    mutated = [p.name for p in program.params if p.name not in outputs and p.written]
    effect = f", writing into {', '.join(mutated)}" if mutated else ""
    with src.block("def as_torch_op(qualname):"):
        src.line(f'"""Register `{program.name}` as the PyTorch op `qualname` ("namespace::name") and return it:')
        src.line(f"op({', '.join(inputs)}) -> {', '.join(outputs) or 'None'}{effect}.")
        src.line("On a GPU it is a torch.library.triton_op (torch.compile traces into the kernels); in Triton's")
        if backward is None:
            src.line('interpreter a torch.library.custom_op."""')
            src.line("return register_torch_op(qualname, PARAMS, OUTPUTS, _prepare, LAUNCHERS, CONFIGS, CHOSEN)")
            return
        grads = ", ".join(x for _, x in backward.grads)
        src.line("interpreter a torch.library.custom_op. It trains: the backward module (BACKWARD) is registered")
        src.line('as `qualname + "_backward"` and attached with torch.library.register_autograd')
        if backward.training is None:
            src.line(f'(gradients of {grads})."""')
            src.line("op = register_torch_op(qualname, PARAMS, OUTPUTS, _prepare, LAUNCHERS, CONFIGS, CHOSEN)")
            src.line("return register_backward(op, qualname, PARAMS, OUTPUTS, BACKWARD, __file__)")
            return
        src.line(f"(gradients of {grads}). The op runs the training forward ({backward.training}), which also")
        src.line(f'writes {", ".join(backward.saved)} for the backward; the function returned gives the outputs."""')
        src.line("return register_training(qualname, OUTPUTS, BACKWARD, __file__)")


def _launch_function(kernel: TileKernel, plan: DescriptorPlan | None, src: Source) -> None:
    blocks = set(kernel.block_sizes)
    scalars = {scalar.param: scalar.name for scalar in kernel.scalars}
    grid = " * ".join(f"({python_scalar(axis.count, blocks, scalars)})" for axis in kernel.grid) or "1"
    with src.block(f"def _launch_{kernel.name}(t, s, config, wrap=launch_directly):"):
        src.line(f"programs = {grid}")
        with src.block("if programs <= 0:"):
            src.line("return  # an empty iteration space (a zero-size dimension): nothing to compute")
        src.line(f'check_grid("{kernel.name}", programs)')
        pins = f', PINS["{kernel.name}"]' if kernel.deterministic else ""
        src.line(f'check_config("{kernel.name}", config, TILE_SUMMARY["{kernel.name}"]{pins})')
        if kernel.persistent:
            per_sm = f'config.get("PROGRAMS_PER_SM", {kernel.programs_per_sm})'
            src.line(f"programs = persistent_programs(programs, {per_sm}, t)  # the tiles' loop walks the rest")
        args = tensor_arguments((buf.name, buf.ndim) for buf in kernel.buffers)
        args += [f's["{scalar.name}"]' for scalar in kernel.scalars]
        options = [f'{block}=config["{block}"]' for block in kernel.block_sizes]
        if kernel.group_m:
            options.append(f'GROUP_M=config.get("GROUP_M", {kernel.group_m})')
        options += ['num_warps=config["num_warps"]', 'num_stages=config["num_stages"]']
        if kernel.deterministic:  # each product rounds as the program says (docs/determinism.md)
            options.append("enable_fp_fusion=False")
        if plan is None:
            src.call(f"return wrap({kernel.name})[(programs,)](", args + options)
            return
        src.call("args = (", args)
        src.call("options = dict(", options)
        src.line(
            f'return launch_variant("{kernel.name}", {kernel.name}, {plan.variant}, DESCRIPTORS["{kernel.name}"], '
            f't, config, (programs,), args, options, wrap, divided="{plan.divided}")  # {plan.why}'
        )


def tensor_arguments(buffers) -> list[str]:
    """A launch's arguments for (name, ndim) buffers of the tensors `t`: each tensor, then its strides."""
    args = []
    for name, ndim in buffers:
        args.append(f't["{name}"]')
        args += [f't["{name}"].stride({axis})' for axis in range(ndim)]
    return args


def _descriptors_literal(plans: dict[str, DescriptorPlan]) -> str:
    """Per kernel with a `_tma` variant: {descriptor argument: (buffer, block size per buffer axis)}."""
    table = {name: {d.param: (d.buffer, d.blocks) for d in plan.descriptors} for name, plan in plans.items()}
    return (
        "# the `_tma` variants' tensor descriptors: argument -> (buffer, block size per axis; None: 1)\n"
        "DESCRIPTORS = " + pprint.pformat(table, width=100, sort_dicts=False)
    )


def _tile_summary_literal(program: TileProgram) -> str:
    """What each kernel moves and computes, as formulas of its block sizes: the tuner's hardware
    model reads it (triton_codegen/hardware_model.py)."""
    return "TILE_SUMMARY = " + pprint.pformat(summarize(program), width=100, sort_dicts=False)


def _prepare_function(program: TileProgram, src: Source) -> None:
    with src.block("def _prepare(args, kwargs):"):
        src.line("t, s = check_arguments(PARAMS, args, kwargs, SIZE_DTYPES)")
        if program.scratch:
            src.line("device = next(v.device for v in t.values() if isinstance(v, torch.Tensor))")
        for scratch in program.scratch:
            shape = ", ".join(python_scalar(d, set()) for d in scratch.shape)
            src.line(f't["{scratch.name}"] = torch.empty(({shape},), dtype=torch.{scratch.dtype}, device=device)')
        src.line("return t, s")


def _header(program: TileProgram) -> str:
    params = ", ".join(p.name for p in program.params)
    return (
        f'"""Triton kernels for the PrimFunc `{program.name}`, generated by tir-triton {VERSION}.\n\n'
        f"Source PrimFunc structural hash: {program.source_hash}\n"
        f"Passes applied: {', '.join(program.passes) or '(none)'}\n"
        f"Entry point: run({params}) takes torch tensors (and numbers) by position or by name\n"
        f"(destination passing: outputs are written in place). tune(...) picks configs on a GPU.\n"
        f'as_torch_op("namespace::name") registers it as a PyTorch op that returns its outputs.\n\n'
        f"The kernels and run() come first; below them is what run() needs, the same in every module.\n"
        + (_deterministic_note() if program.deterministic else "")
        + '"""\n'
    )


def _deterministic_note() -> str:
    return (
        "\nDeterministic (compile(deterministic=True)): every output element's bits are a fixed function of the\n"
        "inputs it reads, whatever the batch and the config; every config keeps the kernel's PINS and FLOORS\n"
        "(tir-triton's docs/determinism.md says what the promise covers and what it cannot).\n"
    )


def _pins_literal(program: TileProgram) -> str:
    """A deterministic module's pinned settings per kernel: {kernel: {setting: (value, why)}}."""
    table = {k.name: {name: (size, why) for name, size, why in k.pins} for k in program.kernels}
    floors = {k.name: {name: (minimum, why) for name, minimum, why in k.floors} for k in program.kernels}
    return "# settings no config may change (deterministic): the order of every reduction\nPINS = " + pprint.pformat(
        table, width=100, sort_dicts=False
    ) + "\n# settings no config may lower below their minimum (the MMA instruction family)\nFLOORS = " + \
        pprint.pformat(floors, width=100, sort_dicts=False)


def emit_module(program: TileProgram, backward: BackwardLink | None = None) -> str:
    """The module, in reading order: the kernels and run() first (what a reader came for), then
    under one marker line what run() needs (data, configs, the hand-written runtime, launchers,
    tune, as_torch_op). Names are looked up when called, so run() may come before them; the
    launchers come after the runtime, whose launch_directly is their default argument."""
    program = with_tile_accesses(program)
    plans = {k.name: plan for k in program.kernels if (plan := plan_descriptors(k)) is not None}
    src = Source()
    src.lines(_header(program))
    src.line("import math")
    src.line("import numbers")
    src.line("import os")
    src.line("import threading")
    src.line()
    src.line("import torch")
    src.line("import triton")
    src.line("import triton.language as tl")
    _kernels(program, plans, src)
    src.line()
    src.line()
    _run_function(program, src)
    src.line()
    src.line()
    src.line(_SUPPORT_MARKER)
    src.lines(_params_literal(program))
    src.lines(_outputs_literal(program))
    configs = {k.name: config_space(k) for k in program.kernels}
    src.lines(configs_source(configs, {k.name: 0 for k in program.kernels}))
    src.lines(_tile_summary_literal(program))
    if program.deterministic:
        src.lines(_pins_literal(program))
    if plans:
        src.lines(_descriptors_literal(plans))
    src.line()
    src.line()
    src.lines(runtime_support_text())
    if any(kernel.persistent for kernel in program.kernels):
        src.lines(persistent_support_text())
    src.line()
    src.line()
    src.lines(torch_op_support_text())
    src.line()
    src.line()
    src.lines(launch_replay_text())
    for kernel in program.kernels:
        src.line()
        src.line()
        _launch_function(kernel, plans.get(kernel.name), src)
    src.line()
    src.line()
    src.line("LAUNCHERS = (" + "".join(f'("{k.name}", _launch_{k.name}), ' for k in program.kernels) + ")")
    src.line()
    src.line()
    _prepare_function(program, src)
    src.line()
    src.line()
    _tune_function(src)
    src.line()
    src.line()
    if backward is not None:
        src.lines(backward_literal(backward))
        src.line()
        src.line()
    _as_torch_op_function(program, src, backward)
    return src.text()


_SUPPORT_MARKER = "# --- what run() needs: parameters, configs, argument checks, launchers, tune(), as_torch_op() ---"


def _kernels(program: TileProgram, plans: dict[str, DescriptorPlan], src: Source) -> None:
    """The @triton.jit functions: selection combines, the helpers the kernels call, the kernels."""
    for combine in program.combines:
        src.line()
        src.line()
        emit_select_combine(combine, src)
    kernels, helpers = Source(), set()
    for kernel in program.kernels:
        kernels.line()
        kernels.line()
        helpers |= emit_kernel(kernel, kernels)
        if kernel.name in plans:
            kernels.line()
            kernels.line()
            helpers |= emit_kernel(kernel, kernels, plans[kernel.name])
    for name in sorted(helpers - set(CONSTANTS)):
        src.line()
        src.line()
        src.lines(HELPERS[name])
    src.lines(kernels.text())
    constants = sorted(helpers & set(CONSTANTS))
    if constants:
        src.line()
        src.line()
    for name in constants:
        src.lines(CONSTANTS[name])


def _run_function(program: TileProgram, src: Source) -> None:
    signature = f"run({', '.join(p.name for p in program.params)})"
    with src.block("def run(*args, **kwargs):"):
        src.line(
            f'"""{signature}: compute `{program.name}`; checks every argument, then launches '
            f'{len(program.kernels)} kernel(s)."""'
        )
        src.line("# checks the arguments, then launches; a call keyed like an earlier one replays its launches")
        src.line("run_launches(args, kwargs, _prepare, LAUNCHERS, CONFIGS, CHOSEN)")


def _tune_function(src: Source) -> None:
    with src.block("def tune(*args, **kwargs):"):
        src.line('"""Tune the kernels\' configs on these arguments (GPU) with tir-triton\'s tuner, the one')
        src.line("`tir-triton tune` runs: never slower than the default (a finalist must beat it beyond the noise),")
        src.line("cached per GPU and shapes. The choice holds for this process; `tir-triton tune FILE` writes it")
        src.line("into the file. Needs the tir-triton package (not TVM). Outputs are overwritten: call run() again.")
        src.line('"""')
        with src.block("try:"):
            src.line("from triton_codegen.tuning import tune_loaded")
        with src.block("except ImportError as err:"):
            src.line('raise LaunchError(f"tune() uses tir-triton\'s tuner, which is not importable here ({err}): "')
            src.line(
                '                  "install tir-triton (TVM is not needed to tune), or keep the default configs") from None'  # noqa: E501
            )
        src.line("import types")
        src.line()
        src.line("_prepare(args, kwargs)  # every argument checked first")
        src.line("ordered = list(args) + [kwargs[param[0]] for param in PARAMS[len(args):]]")
        src.line("name = os.path.splitext(os.path.basename(__file__))[0]")
        src.line("this = types.SimpleNamespace(**globals())  # CONFIGS and CHOSEN are this module's own dicts")
        src.line("_result, report = tune_loaded(this, ordered, name)")
        src.line("return report")
