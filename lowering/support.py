"""Up-front capability check: a PrimFunc uses only what the lowering has rules for.

compile() runs it after the input check (tir_passes/checks/input_checks.py: structure) and before the
pass pipeline, so before anything is built: the pipeline's numerics check JIT-builds the input
with TVM, which links every external symbol the program calls, and an unknown one kills the
process. Each error names the construct and its TVMScript line, and lists what is supported.

Refused: statements the lowering has no rule for (a data-dependent `while` loop, `LetStmt`,
`assert`, ...), loops bound to GPU threads (a CUDA schedule: tir-triton picks the grid itself),
calls outside the lowering's table (`T.call_extern`, `T.call_pure_extern`, `T.call_packed`,
intrinsics with no Triton mapping, calls of another PrimFunc), dtypes Triton cannot hold here
(vectors, int4, float8, handles), min/max of bool values, `T.handle` parameters that no `T.match_buffer` binds, and
parameter shapes the launcher cannot check (param_shapes.py).
Assumes: nothing about the body's structure (an empty body is the input check's to refuse).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tir_passes.analyses.assumptions import is_assumption
from tir_passes.errors import UnsupportedConstructError
from tir_passes.checks.input_checks import EXTERNAL_CALLS, external_symbol
from tir_passes.infra.pass_util import source_line

from lowering.rules.exprs import SUPPORTED_DTYPES, call_name, supported_calls
from lowering.from_tir import BODY_STATEMENTS, KERNEL_STATEMENTS, statements_text
from lowering.rules.param_shapes import check_param_shapes

# statements the lowering has a rule for (from_tir.py's tables), where each may stand; the nodes
# that carry them (SBlock, under its realize) and T.alloc_buffer (HoistAllocations') besides
_CARRIERS = (s_tir.SBlock, tirx.AllocBuffer)
STATEMENTS_TEXT = statements_text({**KERNEL_STATEMENTS, **BODY_STATEMENTS})

def check_supported(func: tirx.PrimFunc, name: str) -> None:
    """Raise UnsupportedConstructError for the first construct the lowering cannot express."""
    problem = _Capabilities(name).first_problem(func.body)
    if problem:
        raise UnsupportedConstructError(problem)
    for param in func.params:
        _check_param(param, name)
    check_param_shapes(func, name)


def _supported_dtypes() -> str:
    return ", ".join(sorted(SUPPORTED_DTYPES))


def _supported_calls() -> str:
    return ", ".join(supported_calls())


def _check_param(param, name: str) -> None:
    where = f"PrimFunc {name}, parameter {param.name}"
    if tirx.is_buffer_var(param):
        dtype = str(param.dtype)
    elif isinstance(param.ty, tvm.ir.PrimType):
        dtype = str(param.ty.dtype)
    else:
        raise UnsupportedConstructError(f"{where}: a T.handle that no T.match_buffer binds; declare it as a "
                                        "T.Buffer((shape), dtype) or bind it with T.match_buffer(handle, shape, dtype)")
    if _normalized(dtype) not in SUPPORTED_DTYPES:
        raise UnsupportedConstructError(f"{where}: dtype {dtype} is not supported (supported: {_supported_dtypes()})")


def _normalized(dtype: str) -> str:
    return "bool" if dtype == "uint1" else dtype


class _Capabilities:
    """One walk over the body that stops at the first problem (an exception raised inside the
    walk's callbacks would come back as a plain RuntimeError); `where` is the line of the innermost
    node that has one (TE-built functions have none: then the PrimFunc's name)."""

    def __init__(self, name: str):
        self.where = f"PrimFunc {name}"
        self.problem: str | None = None
        self.block_depth = 0   # > 0 inside a (non-root) block's body

    def first_problem(self, body) -> str | None:
        tvm_ffi.structural_visit(body, [(tirx.Stmt, self._statement), (tvm.ir.Call, self._call),
                                        (tvm.ir.Expr, self._expression)])
        return self.problem

    def refuse(self, what: str) -> None:
        self.problem = self.problem or f"{self.where}: {what}"

    def _statement(self, stmt, visitor) -> None:
        if self.problem:
            return
        outer = self.where
        self.where = source_line(stmt) or outer
        table = BODY_STATEMENTS if self.block_depth else KERNEL_STATEMENTS
        if isinstance(stmt, tirx.While):
            self.refuse("a data-dependent while loop cannot become a Triton kernel (loop trip counts must be known "
                        f"at launch); supported statements: {STATEMENTS_TEXT}")
        elif isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.THREAD_BINDING:
            self.refuse(f"loop {stmt.loop_var.name} is bound to {stmt.thread_binding.thread_tag}, a GPU thread: "
                        "tir-triton maps loops to Triton programs itself; write a plain loop")
        elif isinstance(stmt, tirx.Evaluate):
            self._evaluate(stmt, visitor)
        elif isinstance(stmt, s_tir.SBlockRealize) and self.block_depth and not self._is_root(stmt):
            self.refuse(f"block '{stmt.block.name_hint}' is nested in another block's body: nested blocks are not "
                        "supported (write it after the block, under its own loops)")
        elif isinstance(stmt, s_tir.SBlock):
            self.block_depth += 0 if stmt.name_hint == "root" else 1
            visitor.default_visit(stmt)
            self.block_depth -= 0 if stmt.name_hint == "root" else 1
        elif isinstance(stmt, _CARRIERS) or type(stmt) in table:
            visitor.default_visit(stmt)
        else:
            text = str(stmt).strip().splitlines()[0][:80]
            place = "in a block's body" if self.block_depth else "around blocks (outside any block's body)"
            self.refuse(f"statement {type(stmt).__name__} `{text}` has no Triton mapping {place}; supported there: "
                        f"{statements_text(table)}")
        self.where = outer

    @staticmethod
    def _is_root(realize) -> bool:
        return realize.block.name_hint == "root"

    def _evaluate(self, stmt, visitor) -> None:
        if is_assumption(stmt) or isinstance(stmt.value, (tirx.IntImm, tirx.FloatImm)):
            return  # a fact for the proofs, or a no-op (an empty body is the input check's)
        visitor.default_visit(stmt)  # a call of something outside the program is named by _call
        self.refuse(f"`{str(stmt).strip()[:80]}` evaluates a value for no effect; it has no Triton mapping")

    def _call(self, call, visitor) -> None:
        if self.problem:
            return
        outer = self.where
        self.where = source_line(call) or outer
        name = call_name(call)
        if isinstance(call.op, tvm.ir.GlobalVar):
            self.refuse(f"a call of the PrimFunc {call.op.name_hint}: a Triton module computes one PrimFunc; "
                        "inline the callee, or compile each PrimFunc on its own (compile(mod, func_name=...))")
        elif name in EXTERNAL_CALLS:
            self.refuse(f"{EXTERNAL_CALLS[name]} calls {external_symbol(call)}, a function from outside the program, "
                        f"which a standalone Triton kernel cannot call (supported calls: {_supported_calls()})")
        elif name not in supported_calls():
            self.refuse(f"the call `{call}` ({name}) has no Triton mapping (supported calls: {_supported_calls()})")
        else:
            self._expression(call, visitor)
        self.where = outer

    def _expression(self, expr, visitor) -> None:
        if self.problem:
            return
        if tirx.is_buffer_var(expr):
            self._dtype(str(expr.dtype), f"buffer {expr.name}")
        elif isinstance(expr.ty, tvm.ir.PrimType):
            self._dtype(str(expr.ty.dtype), f"`{str(expr)[:60]}`")
            if isinstance(expr, (tirx.Max, tirx.Min)) and _normalized(str(expr.ty.dtype)) == "bool":
                self.refuse(f"`{str(expr)[:60]}` takes the {type(expr).__name__.lower()} of bool values, which neither "
                            "the lowering (no identity) nor TVM's build (min/max of numbers) defines; reduce the "
                            "values "
                            "cast to int8 (`T.Cast(\"int8\", x)`) and compare the result with 0")
        visitor.default_visit(expr)

    def _dtype(self, dtype: str, what: str) -> None:
        if _normalized(dtype) not in SUPPORTED_DTYPES:
            self.refuse(f"{what} has dtype {dtype}, which tir-triton does not compile to Triton "
                        f"(supported: {_supported_dtypes()})")
