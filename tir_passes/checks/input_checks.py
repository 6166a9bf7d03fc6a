"""Checks of the user's program before any pass runs, so that no pass is blamed for it.

run_pipeline calls check_input before the first pass (and before the numerics check builds the
input); compile() calls it before the capability check (lowering/support.py). Without these, an
empty body failed inside HoistAllocations, and a zero extent or an out-of-bounds access in the
input was reported as "verification 'bounds' failed after pass HoistAllocations".

The behaviour for each kind of input (docs/bad-input.md has the table):
- A function must compute something: an empty body, a body without T.sblock blocks, and a body
  that stores to no buffer parameter are refused (UnsupportedConstructError).
- Zero sizes are a no-op, consistently: a loop of extent 0 never runs, a buffer with a zero
  dimension has no elements; the kernel launches no program for them (as TVM's build does).
  A reduction over a constant zero-length axis is refused: TVM's build leaves its output as it
  was (its T.init runs inside the reduction loop) where torch gives the identity, and picking one
  silently would be wrong for the other. (A symbolic length that is 0 at run time stores the
  T.init value, as torch does.)
- Negative constant loop extents and buffer dimensions are refused at their line.
- `T.match_buffer` inside a block (a view of part of a buffer) is refused at the block; a
  function's own `T.match_buffer(handle, shape)` is fine.
- A call of another PrimFunc is refused, naming the callee; a module with several PrimFuncs is
  refused naming them (frontend.as_module lets a caller pick one).
- With `checks`: "well_formed": TVM's well-formedness checker on the input (FrontendError);
  "bounds": every access of the input proven in bounds (UnsupportedConstructError: the user's
  program reads or writes outside a buffer, or the analyzer cannot prove it does not);
  "numerics": the input calls no function from outside the program (`T.call_extern`,
  `T.call_packed`, ...): building it for the reference would link an unknown symbol, which kills
  the process.

input_round_trip says whether TVM's printer round trips the input (the round-trip check then
compares later stages relative to it; verify.check_round_trip_relative).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.checks import bounds, verify
from tir_passes.errors import FrontendError, UnsupportedConstructError
from tir_passes.infra.pass_util import source_line

# builtins that call a function outside the program (its symbol is their first argument): op name
# (the last part) -> how TVMScript spells it
EXTERNAL_CALLS = {"call_extern": "T.call_extern", "call_pure_extern": "T.call_pure_extern",
                  "call_llvm_intrin": "T.call_llvm_intrin", "call_llvm_pure_intrin": "T.call_llvm_pure_intrin",
                  "tvm_call_packed": "T.call_packed", "tvm_call_cpacked": "T.call_cpacked",
                  "tvm_call_packed_lowered": "T.call_packed_lowered",
                  "tvm_call_cpacked_lowered": "T.call_cpacked_lowered",
                  "tvm_call_trace_packed": "T.tvm_call_trace_packed"}


def check_input(mod: tvm.IRModule, checks=()) -> None:
    """Raise a named error (pointing at the user's line or parameter) for an input no pass should see."""
    func = _only_function(mod)
    name = _function_name(func)
    problem = structure_problem(func, name)
    if problem:
        raise UnsupportedConstructError(problem)
    if "well_formed" in checks:
        problems = verify.check_well_formed(mod)
        if problems:
            raise FrontendError(f"PrimFunc {name} is not well formed (TVM's checker, on the input before any pass): "
                                + "\n".join(problems[:10]))
    if "bounds" in checks:
        problems = bounds.check_bounds(mod)
        if problems:
            raise UnsupportedConstructError(
                f"PrimFunc {name}: accesses of the input that are not proven in bounds (before any pass; tir-triton "
                "compiles only accesses it proves, or guards at run time when the index is read from memory):\n"
                + "\n".join(problems[:10]))
    if "numerics" in checks:
        problem = external_call_problem(func, name)
        if problem:
            raise UnsupportedConstructError(problem)


def input_round_trip(mod: tvm.IRModule) -> str | None:
    """None when the input's TVMScript parses back to the same module; else what differs."""
    problems = verify.check_round_trip(mod)
    return problems[0] if problems else None


def _only_function(mod: tvm.IRModule) -> tirx.PrimFunc:
    names = sorted(g.name_hint for g in mod.functions)
    if len(names) != 1 or "main" not in names:
        raise FrontendError(f"the module holds the functions {', '.join(names)}; the pipeline compiles one PrimFunc, "
                            "as 'main' (compile(mod, func_name=...) picks one)")
    return mod["main"]


def _function_name(func: tirx.PrimFunc) -> str:
    symbol = func.attrs.get("global_symbol") if func.attrs is not None else None
    return str(symbol) if symbol is not None else "main"


def structure_problem(func: tirx.PrimFunc, name: str) -> str | None:
    """The first structural problem of the input, as a message, or None."""
    callee = _call_of_a_primfunc(func)
    if callee is not None:
        return (f"{source_line(callee) or f'PrimFunc {name}'}: PrimFunc {name} calls the PrimFunc "
                f"{callee.op.name_hint}; a Triton module computes one PrimFunc: inline the callee, or compile each "
                "PrimFunc on its own")
    stores: list = []
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, stores.append))
    params = [p for p in func.params if tirx.is_buffer_var(p)]
    if not any(any(store.buffer.same_as(p) for p in params) for store in stores):
        return (f"PrimFunc {name} computes nothing: its body stores to no buffer parameter (an empty body, or "
                "only intermediates); tir-triton refuses it rather than emit a module that does nothing")
    if not isinstance(func.body, s_tir.SBlockRealize):
        return (f"{source_line(stores[0]) or f'PrimFunc {name}'}: the body has no T.sblock blocks; tir-triton "
                "compiles S-TIR, where each computation is a `with T.sblock(...)` block (or build it with "
                "te.create_prim_func)")
    return _negative_dimension(func, name) or _NestProblems(name).first(func.body)


def _call_of_a_primfunc(func: tirx.PrimFunc):
    calls: list = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, calls.append), order="pre")
    return next((call for call in calls if isinstance(call.op, tvm.ir.GlobalVar)), None)


def _negative_dimension(func: tirx.PrimFunc, name: str) -> str | None:
    buffers = [p for p in func.params if tirx.is_buffer_var(p)] + list(func.body.block.alloc_buffers)
    for buf in buffers:
        for axis, dim in enumerate(buf.shape):
            if isinstance(dim, tirx.IntImm) and dim.value < 0:
                return f"PrimFunc {name}, buffer {buf.name}: dimension {axis} is {dim.value}, a negative size"
    return None


class _NestProblems:
    """One walk over loops and blocks, stopping at the first problem (exceptions raised in
    the walk's callbacks would come back as plain RuntimeErrors). `loops` are the enclosing loops."""

    def __init__(self, name: str):
        self.name = name
        self.loops: list[tirx.For] = []
        self.problem: str | None = None

    def first(self, body) -> str | None:
        tvm_ffi.structural_visit(body, [(tirx.For, self._for), (s_tir.SBlockRealize, self._realize)])
        return self.problem

    def _where(self, node) -> str:
        return source_line(node) or f"PrimFunc {self.name}"

    def _for(self, loop, visitor) -> None:
        if self.problem:
            return
        if isinstance(loop.extent, tirx.IntImm) and loop.extent.value < 0:
            self.problem = (f"{self._where(loop)}: loop {loop.loop_var.name} has extent {loop.extent.value}; a "
                            "negative extent is refused (an extent of 0 is a loop that never runs)")
            return
        self.loops.append(loop)
        visitor.default_visit(loop)
        self.loops.pop()

    def _realize(self, realize, visitor) -> None:
        if self.problem:
            return
        block = realize.block
        if block.match_buffers:
            view = block.match_buffers[0]
            self.problem = (f"{self._where(realize)}: block '{block.name_hint}' binds {view.buffer.name} with "
                            "T.match_buffer to part of a buffer; tir-triton does not compile sub-buffer views: "
                            "index the buffer itself")
            return
        if block.init is not None and self._reduces_over_nothing(realize):
            self.problem = (f"{self._where(realize)}: block '{block.name_hint}' reduces over an axis of length 0; "
                            "TVM's build leaves its output as it was (T.init runs inside the reduction loop) where "
                            "torch gives the reduction's identity, so tir-triton refuses it rather than pick one")
            return
        visitor.default_visit(realize)

    def _reduces_over_nothing(self, realize) -> bool:
        """A reduction axis of constant length 0 (its domain, or an empty loop its binding walks),
        while the block would otherwise run (no empty spatial axis, no other empty loop around it)."""
        empty_loops = [loop for loop in self.loops if _is_zero(loop.extent)]
        reduction_loops, reduces_over_nothing, runs = [], False, True
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            walked = [loop for loop in empty_loops if _uses(value, loop.loop_var)]
            empty = bool(walked) or _is_zero(iv.dom.extent)
            if iv.iter_type == tirx.IterVar.CommReduce:
                reduction_loops += walked
                reduces_over_nothing = reduces_over_nothing or empty
            elif empty:
                runs = False
        runs = runs and all(any(loop.same_as(r) for r in reduction_loops) for loop in empty_loops)
        return reduces_over_nothing and runs


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == 0


def _uses(expr, var) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, (tirx.Var, found.append))
    return any(v.same_as(var) for v in found)


def external_call_problem(func: tirx.PrimFunc, name: str) -> str | None:
    """A call of a function from outside the program, which TVM's build of the input would link."""
    calls: list = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, calls.append), order="pre")
    for call in calls:
        op = call.op.name.split(".")[-1] if isinstance(call.op, tvm.ir.Op) else None
        if op in EXTERNAL_CALLS:
            return (f"{source_line(call) or f'PrimFunc {name}'}: {EXTERNAL_CALLS[op]} calls {external_symbol(call)}, "
                    "a function from outside the program: the numerics check cannot build a reference for it (and a "
                    "Triton kernel cannot call it)")
    return None


def external_symbol(call) -> str:
    first = call.args[0] if call.args else None
    return f"'{first.value}'" if isinstance(first, tvm.ir.StringImm) else "a function"
