"""GluonProgram -> one standalone Python module of @gluon.jit kernels with the Triton modules'
runtime: the same argument checks (runtime_support.py's text, copied in as the Triton backend
does), PARAMS, LaunchError and `run(...)`; the kernels and run() first, what run() needs below
them (as the Triton modules are laid out).

Differences between Triton 3.6 (the GPU image) and 3.9 (CI) are absorbed here: the positional
PaddedSharedLayout constructor (its third field is block_bases on 3.6, cga_layout on 3.9), and no
call to gl.barrier/gl.thread_barrier (renamed between them): Gluon's own barrier analysis orders
the shared stores and loads. Gluon kernels do not run in Triton's interpreter: `run` refuses
there with a LaunchError.
"""

from __future__ import annotations

import pprint

from tir_passes.infra.names import pointer_name, stride_name
from lowering.tile_ir import Binary, Cast, Const, Reg, Scalar, Unary, Where
from tir_passes.errors import UnsupportedConstructError
from tir_passes.infra.dtypes import language_names
from triton_codegen.emit_kernel import format_float
from triton_codegen.emit_module import VERSION, runtime_support_text, tensor_arguments
from triton_codegen.source import Source

from .ir import (Box, Compute, Contract, GlobalLoad, GluonKernelIR, GluonProgram, InitAccumulator, Loop, SharedLoad,
                 StoreAccumulator)
from .layouts import layout_source, shared_layout_source

_GL_DTYPES = language_names("gl")
_INFIX = ("+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "<<", ">>")
# The Gluon backend's op table: one rendering per op of lowering/ops.py it can write
# (tests/triton_codegen/test_backends.py checks it against the lowering's ops).
BINARY_RULES = {
    **{op: f"({{a}} {op} {{b}})" for op in _INFIX},
    "and": "({a} & {b})",
    "or": "({a} | {b})",
    "min": "gl.minimum({a}, {b})",
    "max": "gl.maximum({a}, {b})",
    # TIR rounds toward minus infinity; Gluon's // and % truncate, as Triton's do
    "floordiv": "({a} // {b} - ((({a} % {b}) != 0) & ((({a} % {b}) < 0) != (({b}) < 0))).to({dtype}))",
    "floormod": "gl.where((({a} % {b}) != 0) & ((({a} % {b}) < 0) != (({b}) < 0)), ({a} % {b}) + {b}, {a} % {b})",
}
UNARY_RULES = {
    **{op: f"gl.{op}({{x}})" for op in ("exp", "log", "sqrt", "rsqrt", "abs", "floor", "ceil", "sin", "cos", "exp2",
                                        "log2", "erf")},
    "not": "({x} == 0)",
}


def expr_source(expr) -> str:
    if isinstance(expr, Const):
        if isinstance(expr.value, bool):
            return str(expr.value)
        return format_float(expr.value) if isinstance(expr.value, float) else str(expr.value)
    if isinstance(expr, (Scalar, Reg)):
        return expr.name
    if isinstance(expr, Binary) and expr.op in BINARY_RULES:
        a, b = expr_source(expr.a), expr_source(expr.b)
        return BINARY_RULES[expr.op].format(a=a, b=b, dtype=_GL_DTYPES.get(expr.dtype, "gl.int32"))
    if isinstance(expr, Cast):
        return f"({expr_source(expr.x)}).to({_GL_DTYPES[expr.dtype]})"
    if isinstance(expr, Where):
        return f"gl.where({expr_source(expr.cond)}, {expr_source(expr.a)}, {expr_source(expr.b)})"
    if isinstance(expr, Unary) and expr.op in UNARY_RULES:
        return UNARY_RULES[expr.op].format(x=expr_source(expr.x))
    raise UnsupportedConstructError(f"the Gluon backend has no rendering of `{expr}` (an operation the Triton backend "
                                    "supports; compile with backend='triton')")


class _KernelPrinter:
    def __init__(self, kernel: GluonKernelIR, program: GluonProgram, src: Source):
        self.kernel = kernel
        self.program = program
        self.out = src
        self.src = Source()          # the body; layouts are declared above it, once each
        self.layouts: dict = {}
        self.shapes = {p.name: p.shape for p in program.params}

    def layout(self, layout) -> str:
        if layout not in self.layouts:
            self.layouts[layout] = f"L{len(self.layouts)}"
        return self.layouts[layout]

    def emit(self) -> None:
        kernel = self.kernel
        args = []
        for buffer in kernel.buffers:
            args.append(pointer_name(buffer))
            args += [stride_name(buffer, axis) for axis in range(len(self.shapes[buffer]))]
        for statement in kernel.body:
            self.statement(statement)
        with self.out.block(f"def {kernel.name}({', '.join(args)}):"):
            for layout, name in self.layouts.items():
                self.out.line(f"{name}: gl.constexpr = {layout_source(layout)}")
            for axis, (var, _extent) in enumerate(kernel.grid):
                self.out.line(f"{var} = gl.program_id({axis})")
            for tile in kernel.shared:
                self.out.line(f"# {tile.decision.why}")
                self.out.line(f"{tile.name} = gl.allocate_shared_memory({_GL_DTYPES[tile.dtype]}, {list(tile.shape)}, "
                              f"{shared_layout_source(tile.decision)})")
            self.out.lines(self.src.text())

    def statement(self, statement) -> None:
        if isinstance(statement, Loop):
            with self.src.block(f"for {statement.var} in range({statement.extent}):"):
                for inner in statement.body:
                    self.statement(inner)
        elif isinstance(statement, Compute):
            self.compute(statement)
        elif isinstance(statement, InitAccumulator):
            box = dict(self.kernel.accumulators)[statement.name]
            self.src.line(f"# {_block(box.block, box.line)}: the accumulator {statement.name} stays in registers")
            self.src.line(f"acc_{statement.name} = gl.full({list(box.extents)}, {expr_source(statement.value)}, "
                          f"{_GL_DTYPES['float32']}, {self.layout(box.layout)})")
        elif isinstance(statement, Contract):
            self.contract(statement)
        elif isinstance(statement, StoreAccumulator):
            self.store_accumulator(statement)
        else:
            raise TypeError(statement)

    def indices(self, box: Box) -> None:
        """`i_<var>`: each box dim's index tensor over the whole box (offset + position)."""
        layout = self.layout(box.layout)
        shape = list(box.extents)
        for d, (dim, extent, offset) in enumerate(zip(box.dims, box.extents, box.offsets)):
            if len(shape) == 1:
                position = f"gl.arange(0, {extent}, layout={layout})"
            else:
                other = 1 - d
                expand = "[:, None]" if d == 0 else "[None, :]"
                position = f"gl.arange(0, {extent}, layout=gl.SliceLayout({other}, {layout})){expand}"
            full = f" + gl.zeros({shape}, gl.int32, {layout})" if len(shape) > 1 else ""
            self.src.line(f"i_{dim} = {expr_source(offset)} + {position}{full}")

    def pointer(self, buffer: str, indices) -> str:
        terms = [f"({expr_source(index)}) * {stride_name(buffer, axis)}" for axis, index in enumerate(indices)]
        return f"{pointer_name(buffer)} + " + " + ".join(terms)

    def mask(self, buffer: str, indices, masked) -> str:
        conds = []
        for axis in masked:
            index = expr_source(indices[axis])
            conds.append(f"({index} >= 0) & ({index} < {self.shapes[buffer][axis]})")
        return " & ".join(conds)

    def compute(self, statement: Compute) -> None:
        box = statement.box
        self.src.line(f"# {_block(box.block, box.line)}")
        layout = self.layout(box.layout)
        self.indices(box)
        for load in statement.loads:
            if isinstance(load, GlobalLoad):
                mask = self.mask(load.buffer, load.indices, load.masked)
                extra = f", mask={mask}, other=0" if mask else ""
                self.src.line(f"{load.name} = gl.load({self.pointer(load.buffer, load.indices)}{extra})")
            elif isinstance(load, SharedLoad):
                self.src.line(f"{load.name} = {_viewed(load.buffer, load.permutation)}.load({layout})")
        value = expr_source(statement.value)
        if statement.shared:
            if len(box.dims) > 1 or not isinstance(statement.value, Reg):
                value = f"{value} + gl.zeros({list(box.extents)}, {_GL_DTYPES[self._dtype(statement)]}, {layout})"
            self.src.line(f"{_viewed(statement.buffer, statement.permutation)}.store({value})")
            return
        mask = self.mask(statement.buffer, statement.indices, statement.masked)
        extra = f", mask={mask}" if mask else ""
        self.src.line(f"gl.store({self.pointer(statement.buffer, statement.indices)}, {value}{extra})")

    def _dtype(self, statement: Compute) -> str:
        return next(tile.dtype for tile in self.kernel.shared if tile.name == statement.buffer)

    def contract(self, statement: Contract) -> None:
        box = dict(self.kernel.accumulators)[statement.accumulator]
        acc = f"acc_{statement.accumulator}"
        self.src.line(f"# {_block('contraction', statement.line)} into {statement.accumulator}: {statement.instruction}")  # noqa: E501
        if statement.instruction == "wgmma":
            self.src.line("fence_async_shared()")
            self.src.line(f"{acc} = warpgroup_mma({statement.a}, {statement.b}, {acc})")
            return
        parent = self.layout(box.layout)
        self.src.line(f"a = {statement.a}.load(gl.DotOperandLayout(0, {parent}, 0)).to(gl.float32)")
        self.src.line(f"b = {statement.b}.load(gl.DotOperandLayout(1, {parent}, 0)).to(gl.float32)")
        self.src.line(f"{acc} = gl.dot_fma(a, b, {acc})")

    def store_accumulator(self, statement: StoreAccumulator) -> None:
        box = dict(self.kernel.accumulators)[statement.accumulator]
        self.src.line(f"# the accumulator {statement.accumulator} to memory")
        self.indices(box)
        mask = self.mask(statement.buffer, statement.indices, statement.masked)
        extra = f", mask={mask}" if mask else ""
        dtype = next(p.dtype for p in self.program.params if p.name == statement.buffer)
        self.src.line(
            f"gl.store({self.pointer(statement.buffer, statement.indices)}, "
            f"acc_{statement.accumulator}.to({_GL_DTYPES[dtype]}){extra})"
        )


def _block(name: str, line: str | None) -> str:
    return f"block {name} ({line})" if line else f"block {name}"


def _viewed(buffer: str, permutation: tuple[int, ...]) -> str:
    """The shared tile as the box sees it: permuted when the box runs along other axes."""
    if list(permutation) == sorted(permutation):
        return buffer
    return f"{buffer}.permute({list(permutation)})"


def _launch_function(kernel: GluonKernelIR, program: GluonProgram, src: Source) -> None:
    shapes = {p.name: p.shape for p in program.params}
    grid = [extent for _, extent in kernel.grid] + [1] * (3 - len(kernel.grid))
    with src.block(f"def _launch_{kernel.name}(t):"):
        args = tensor_arguments((buffer, len(shapes[buffer])) for buffer in kernel.buffers)
        src.call(f"return {kernel.name}[({', '.join(map(str, grid))})](", args + [f"num_warps={kernel.num_warps}"])


def _header(program: GluonProgram) -> str:
    params = ", ".join(p.name for p in program.params)
    return (
        f'"""Gluon kernels for the PrimFunc `{program.name}`, generated by tir-triton {VERSION} (backend gluon).\n\n'
        f"Source PrimFunc structural hash: {program.source_hash}\n"
        f"Passes applied: {', '.join(program.passes) or '(none)'}\n"
        f"Entry point: run({params}) takes CUDA torch tensors by position or by name (destination\n"
        "passing: outputs are written in place). Shared layouts are BankConflictFreeTiling's decisions;\n"
        "register layouts follow the schedule's thread bindings. Needs a GPU (Gluon has no interpreter).\n\n"
        "The kernels and run() come first; below them is what run() needs, the same in every module.\n"
        '"""\n'
    )


def _params_literal(program: GluonProgram) -> str:
    rows = [(p.name, p.kind, p.dtype, tuple(p.shape), p.written, True) for p in program.params]
    return "PARAMS = " + pprint.pformat(tuple(rows), width=100)


def _shared_layouts_literal(program: GluonProgram) -> str:
    """Each kernel's shared tiles with their decided layout: the bank-conflict tools read it."""
    table = {k.name: {t.name: t.decision.to_annotation() for t in k.shared} for k in program.kernels}
    return "SHARED_LAYOUTS = " + pprint.pformat(table, width=100, sort_dicts=True)


def emit_module(program: GluonProgram) -> str:
    src = Source()
    src.lines(_header(program))
    src.line("import math")
    src.line("import numbers")
    src.line("import os")
    src.line()
    src.line("import torch")
    src.line("from triton.experimental import gluon")
    src.line("from triton.experimental.gluon import language as gl")
    if any(isinstance(s, Contract) and s.instruction == "wgmma" for k in program.kernels for s in _statements(k.body)):
        src.line("from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma")
    for kernel in program.kernels:
        src.line()
        src.line()
        src.line("@gluon.jit")
        _KernelPrinter(kernel, program, src).emit()
    src.line()
    src.line()
    _run_function(program, src)
    src.line()
    src.line()
    src.line(_SUPPORT_MARKER)
    src.lines(_params_literal(program))
    src.lines(_shared_layouts_literal(program))
    src.line()
    src.line()
    src.lines(runtime_support_text())
    for kernel in program.kernels:
        src.line()
        src.line()
        _launch_function(kernel, program, src)
    src.line()
    src.line()
    src.line("LAUNCHERS = (" + "".join(f'("{k.name}", _launch_{k.name}), ' for k in program.kernels) + ")")
    return src.text()


# names are looked up when run() is called, so it may come before what it uses (as in the Triton modules)
_SUPPORT_MARKER = "# --- what run() needs: parameters, shared layouts, argument checks, launchers ---"


def _run_function(program: GluonProgram, src: Source) -> None:
    signature = f"run({', '.join(p.name for p in program.params)})"
    with src.block("def run(*args, **kwargs):"):
        src.line(
            f'"""{signature}: compute `{program.name}`; checks every argument, then launches '
            f'{len(program.kernels)} Gluon kernel(s) (GPU only)."""'
        )
        with src.block("if _INTERPRETED:"):
            src.line(
                "raise LaunchError(\"Gluon kernels do not run in Triton's interpreter (TRITON_INTERPRET=1): "
                'run them on a GPU")'
            )
        src.line("t, _ = check_arguments(PARAMS, args, kwargs)")
        with src.block("for _, launch in LAUNCHERS:"):
            src.line("launch(t)")


def _statements(body):
    for statement in body:
        if isinstance(statement, Loop):
            yield from _statements(statement.body)
        else:
            yield statement
