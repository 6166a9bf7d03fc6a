"""docs/supported.md, generated from the lowering's rule tables, so that the page cannot drift:
`python -m lowering.supported_doc` rewrites it and tests/lowering/test_supported_doc.py checks it.

What it reads: the expression rules (rules/exprs.RULES), the binary operators (TIR_BINARY_OPS) and
the meanings of the tile ops (ops.UNARY_OPS, ops.BINARY_OPS), the call table (supported_calls,
ops.UNARY_INTRINSICS / BINARY_INTRINSICS, VALUE_CALLS), the statement tables (from_tir.
KERNEL_STATEMENTS around blocks, BODY_STATEMENTS inside them), the dtypes (SUPPORTED_DTYPES) and
TVM's own list of operators and
IR node classes, so a construct TVM has and the lowering does not shows as refused. The error a
user gets for a refused construct is taken from the checks themselves, on the small programs below.
"""

from __future__ import annotations

import inspect
import os
import re

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tir_passes.checks.input_checks import EXTERNAL_CALLS, check_input
from tir_passes.errors import TirTritonError
from tir_passes.infra.frontend import as_module

from lowering.from_tir import BODY_STATEMENTS, KERNEL_STATEMENTS
from lowering.ops import BINARY_INTRINSICS, BINARY_OPS, UNARY_INTRINSICS, UNARY_OPS
from lowering.rules.exprs import RULES, SUPPORTED_DTYPES, TIR_BINARY_OPS, VALUE_CALLS, supported_calls
from lowering.support import check_supported

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "supported.md")

# how TVMScript spells the expression nodes (for the reader; the rules are keyed by node class)
SPELLING = {
    "Add": "`a + b`", "Sub": "`a - b`", "Mul": "`a * b`", "Div": "`a / b` (floats), `T.truncdiv`",
    "Mod": "`T.truncmod`, float `%`", "FloorDiv": "`a // b`, `T.floordiv`", "FloorMod": "`a % b`, `T.floormod`",
    "Min": "`T.min(a, b)`", "Max": "`T.max(a, b)`", "EQ": "`a == b`", "NE": "`a != b`", "LT": "`a < b`",
    "LE": "`a <= b`", "GT": "`a > b`", "GE": "`a >= b`", "And": "`T.And(a, b)`, `a and b`",
    "Or": "`T.Or(a, b)`, `a or b`", "Not": "`T.Not(a)`, `not a`", "BitwiseAnd": "`a & b`", "BitwiseOr": "`a | b`",
    "BitwiseXor": "`a ^ b`", "BitwiseNot": "`~a`", "LShift": "`a << b`", "RShift": "`a >> b`",
    "Select": "`T.Select(c, a, b)`", "Cast": "`T.Cast(dtype, x)`", "IntImm": "integer literals",
    "FloatImm": "float literals", "Var": "loop and block variables, scalar parameters, `T.int32()` sizes",
    "TensorLoad": "`A[i, j]` (a buffer read)", "Call": "`T.exp(x)` and the other calls below",
    "Ramp": "`T.Ramp` (vector lanes)", "Broadcast": "`T.Broadcast` (vector lanes)", "Shuffle": "`T.Shuffle`",
    "Let": "`T.Let` (an expression-level let)", "Reduce": "`T.comm_reducer` (TE's reductions)",
}
_NOT_EXPRESSIONS = ("Buffer", "Expr", "PrimFunc")
_NODE_NOTES = {
    "Div": "float division; on integers truncating (`ops.BINARY_OPS['//']`)",
    "Mod": "remainder with the dividend's sign (floats: C fmod)",
    "Select": "both sides evaluated, as in TIR", "Cast": "any supported dtype to any other",
    "Call": "see Calls", "TensorLoad": "any index expression of the block's variables; a gather through "
                                       "an index buffer is guarded (an out-of-range index reads 0)",
    "Var": "", "IntImm": "", "FloatImm": "", "Not": UNARY_OPS["not"], "BitwiseNot": UNARY_OPS["bitnot"],
    "FloorDiv": BINARY_OPS["floordiv"], "FloorMod": BINARY_OPS["floormod"],
}
STATEMENT_NOTES = {
    "SeqStmt": "statements in sequence", "For": "`for i in range(n)`, `T.grid`, `T.serial`, `T.parallel`, "
    "`T.unroll`, `T.vectorized` (the kind is a hint: tir-triton chooses the grid); not `T.thread_binding`",
    "SBlockRealize": "`with T.sblock(name):` with `T.axis.remap` / `T.axis.spatial` / `T.axis.reduce`, `T.init()`, "
    "`T.reads` / `T.writes`, `T.sblock_attr`", "SBlock": "(the block itself)",
    "BufferStore": "`A[i, j] = value`", "IfThenElse": "`if c:` / `else:` inside a block",
    "AllocBuffer": "`T.alloc_buffer` (moved to the root block by HoistAllocations); `T.sblock_alloc_buffer` "
    "is the root block's own", "Bind": "`x = value` inside a block (a let binding)",
    "Evaluate": "only `T.assume(cond)` (a fact for the bounds proofs) and constants; any other evaluated call is "
    "refused",
}


# --- the programs whose errors the page quotes --------------------------------------------------
@T.prim_func(s_tir=True)
def _while_loop(A: T.Buffer((16,), "int32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            while A[vi] > 0:
                A[vi] = A[vi] - 1


@T.prim_func(s_tir=True)
def _thread_binding(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for bx in T.thread_binding(16, thread="blockIdx.x"):
        with T.sblock("B"):
            vi = T.axis.spatial(16, bx)
            B[vi] = A[vi]


@T.prim_func(s_tir=True)
def _extern_call(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.call_extern("float32", "my_fn", A[vi])


@T.prim_func(s_tir=True)
def _unmapped_intrinsic(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.acos(A[vi])


@T.prim_func(s_tir=True)
def _fp8(A: T.Buffer((16,), "float8_e4m3fn"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.Cast("float32", A[vi])


@T.prim_func(s_tir=True)
def _block_match_buffer(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        with T.sblock("row"):
            vi = T.axis.spatial(16, i)
            row = T.match_buffer(A[vi, 0:16], (16,), "float32")
            for j in range(16):
                B[vi, j] = row[j]


REFUSED = (
    ("a data-dependent `while` loop", _while_loop),
    ("`T.thread_binding` (a CUDA schedule)", _thread_binding),
    ("`T.call_extern`, `T.call_pure_extern`, `T.call_packed`, ...", _extern_call),
    ("an intrinsic without a Triton mapping (`T.acos`)", _unmapped_intrinsic),
    ("a dtype outside the table (`float8_e4m3fn`)", _fp8),
    ("`T.match_buffer` inside a block (a view of part of a buffer)", _block_match_buffer),
)


def error_of(func) -> str:
    """The error the input and capability checks raise for `func`, with its file:line made generic."""
    try:
        mod = as_module(func)
        check_input(mod)
        check_supported(mod["main"], str(mod["main"].attrs["global_symbol"]))
    except TirTritonError as err:
        text = re.sub(r"\b\w+\.py:\d+", "file.py:line", str(err))
        return re.sub(r"PrimFunc _\w+", "PrimFunc f", text)
    raise AssertionError(f"{func}: expected the checks to refuse it")


# --- the tables -------------------------------------------------------------------------------
def _row(*cells: str) -> str:
    """A markdown table row; a `|` inside a cell (`a | b`, |a|) is escaped."""
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _expression_classes() -> list[type]:
    found = {c for name, c in vars(tirx).items() if inspect.isclass(c) and issubclass(c, tvm.ir.Expr)
             and name not in _NOT_EXPRESSIONS}
    found |= set(RULES)
    return sorted(found, key=lambda c: c.__name__)


def _expression_rows() -> list[str]:
    rows = []
    for node in _expression_classes():
        name = node.__name__
        op = TIR_BINARY_OPS.get(node)
        meaning = BINARY_OPS.get(op, "") if op else _NODE_NOTES.get(name, "")
        status = "yes" if node in RULES else "**no**: \"no Triton mapping for the TIR expression " + name + "\""
        rows.append(_row(name, SPELLING.get(name, ""), status, meaning))
    return rows


def _statement_rows() -> list[str]:
    classes = {c for module in (tirx, s_tir) for name, c in vars(module).items()
               if inspect.isclass(c) and issubclass(c, tirx.Stmt) and c is not tirx.Stmt}
    rows = []
    for node in sorted(classes, key=lambda c: c.__name__):
        name = node.__name__
        where = [place for place, table in (("around blocks", KERNEL_STATEMENTS), ("inside blocks", BODY_STATEMENTS))
                 if node in table]
        if where or node in _CARRIED:
            rows.append(_row(name, "yes" + (f" ({', '.join(where)})" if where else ""), STATEMENT_NOTES.get(name, "")))
        else:
            note = ("a data-dependent loop (see below)" if node is tirx.While else
                    f"\"statement {name} ... has no Triton mapping; supported statements: ...\"")
            rows.append(_row(name, "**no**", note))
    return rows


# carried by a block realize (the block itself) or moved to the root block (T.alloc_buffer): no rule of their own
_CARRIED = (s_tir.SBlock, tirx.AllocBuffer)


def _op_names() -> list[str]:
    return [str(name) for name in tvm_ffi.get_global_func("ir.ListOpNames")()]


def _call_rows() -> list[str]:
    rows = []
    for name in supported_calls():
        if name in UNARY_INTRINSICS:
            op = UNARY_INTRINSICS[name]
            rows.append(_row(f"`T.{name}(x)`", f"`{op}`", UNARY_OPS[op]))
        elif name in BINARY_INTRINSICS:
            op = BINARY_INTRINSICS[name]
            rows.append(_row(f"`T.{name}(a, b)`", f"`{op}`", BINARY_OPS[op]))
        else:
            rows.append(_row(f"`T.{name}(...)`", "-", VALUE_CALLS[name]))
    return rows


def _refused_calls() -> tuple[list[str], dict[str, int]]:
    """The scalar TIR operators (`tirx.NAME`, `prim.NAME`) no rule lowers, and how many operators each
    target namespace (`tirx.ptx.*`, ...) has (all refused: they are one target's instructions)."""
    supported = set(supported_calls())
    plain, namespaces = set(), {}
    for full in _op_names():
        parts = full.split(".")
        if parts[0] not in ("tirx", "prim"):
            continue
        if len(parts) == 2:
            if parts[1] not in supported and parts[1] not in EXTERNAL_CALLS and parts[1] != "assume":
                plain.add(parts[1])
        else:
            key = ".".join(parts[:2])
            namespaces[key] = namespaces.get(key, 0) + 1
    return sorted(plain), dict(sorted(namespaces.items()))


def render() -> str:
    refused_calls, namespaces = _refused_calls()
    errors = [_row(what, error_of(func)) for what, func in REFUSED]
    lines = [
        "# What the compiler takes: TVMScript constructs, expressions, calls and dtypes",
        "",
        "Generated by `python -m lowering.supported_doc` from the lowering's rule tables and TVM's own",
        "list of IR nodes and operators (`tests/lowering/test_supported_doc.py` fails when this page and",
        "the tables differ). Anything marked **no** is refused before any pass runs, with an error naming",
        "the construct and its TVMScript line; the errors quoted below are the checks' own output.",
        "",
        "## Statements and block constructs",
        "",
        "| TIR statement | supported | how it is written, or what is refused |",
        "| --- | --- | --- |",
        *_statement_rows(),
        "",
        "Parameters: `T.Buffer((shape), dtype)`, scalars (`T.int32`, `T.float32`, ...), and `T.handle` bound",
        "with `T.match_buffer(handle, shape, dtype)`; shapes may be symbolic (`rows = T.int32()`). Write",
        "`@T.prim_func(s_tir=True)`: a function without it is refused (docs/bad-input.md has the classic",
        "mistakes and what each error says).",
        "",
        "A reduction may start from `T.init()`, from a nest of its own that fills its buffer before it (`C = 0`",
        "or `C = bias[j]`, then `C = C + A·B`), or from what its buffer holds (`C = C + A·B` into a parameter,",
        "no init: C's incoming values are added); a loop may be split by hand (`for ko, ki in T.grid(K // 8, 8)`,",
        "read as `vko * 8 + vki`). Each compiles to the kernel of the `T.init()` form with one loop",
        "(docs/canonical-forms.md).",
        "",
        "## Expressions",
        "",
        "| TIR node | TVMScript | supported | meaning |",
        "| --- | --- | --- | --- |",
        *_expression_rows(),
        "",
        "## Calls",
        "",
        "| call | tile op | meaning |",
        "| --- | --- | --- |",
        *_call_rows(),
        "",
        "Float intrinsics take float operands (an integer operand is refused at its line).",
        "",
        "Refused, with \"the call `...` (NAME) has no Triton mapping (supported calls: ...)\": "
        + ", ".join(f"`{name}`" for name in refused_calls) + ".",
        "",
        "Refused, as one target's instructions: "
        + ", ".join(f"`{key}.*` ({count})" for key, count in namespaces.items()) + ".",
        "",
        "Calls of code outside the program, " + ", ".join(f"`{spelling}`" for spelling in EXTERNAL_CALLS.values())
        + ", are refused (a standalone kernel cannot call them); so is a call of another PrimFunc.",
        "",
        "## Dtypes",
        "",
        ", ".join(f"`{dtype}`" for dtype in sorted(SUPPORTED_DTYPES)) + " (bfloat16 is computed in float32, as TVM",
        "does). Vectors (`float32x4`), `int4`, float8 and handles are refused.",
        "",
        "## The errors for refused constructs",
        "",
        "| construct | error |",
        "| --- | --- |",
        *errors,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    with open(PATH, "w") as handle:
        handle.write(render())
    print(f"wrote {PATH}")
