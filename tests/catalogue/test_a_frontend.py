"""Catalogue section A: TVMScript and IR front end (docs/bad-input.md has the table).

Each test is one class of /work/shared/docs/bad-input-catalogue.md, asserting the named error
(type and a fragment naming the construct, parameter or line) or a correct result.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from catalogue_programs import undefined_variable_func
from tir_passes import FrontendError, UnsupportedConstructError
from tir_passes.infra.frontend import load_target
from triton_codegen import check_against_tvm, compile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_file(tmp_path, body: str, marker: str) -> tuple[str, str]:
    """(the FrontendError's message, `user.py:N` of the line holding `marker`)."""
    text = "from tvm.script import tirx as T\n\n\n@T.prim_func(s_tir=True)\n" + textwrap.dedent(body).lstrip()
    path = tmp_path / "user.py"
    path.write_text(text)
    with pytest.raises(FrontendError) as caught:
        load_target(str(path))
    line = next(number for number, content in enumerate(text.splitlines(), start=1) if marker in content)
    return str(caught.value), f"user.py:{line}"


def _no_internals(message: str) -> None:
    for internal in ("Traceback", "File \"", "Check failed", "ffi.Object", "tvm::"):
        assert internal not in message, message


def test_01_python_syntax_error_names_file_and_line(tmp_path):
    message, line = _load_file(tmp_path, """
        def f(A: T.Buffer((16,), "float32")):
            for i in range(16)
                A[i] = T.float32(1)
        """, "range(16)")
    assert f"{line}: Python syntax error" in message
    _no_internals(message)


def test_02_undefined_buffer_names_the_line(tmp_path):
    message, line = _load_file(tmp_path, """
        def f(A: T.Buffer((16,), "float32")):
            for i in range(16):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i)
                    C[vi] = A[vi]
        """, "C[vi]")
    assert f"{line}: Undefined variable: C" in message
    _no_internals(message)


def test_03_match_buffer_without_a_handle_is_named_at_its_line(tmp_path):
    """Was a raw FFI signature dump (`script.ir_builder.tirx.MatchBuffer(0: ffi.Object, ...`)."""
    message, line = _load_file(tmp_path, """
        def f(a: T.handle, B: T.Buffer((16,), "float32")):
            A = T.match_buffer((16,), "float32")
            for i in range(16):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i)
                    B[vi] = A[vi]
        """, "T.match_buffer")
    assert f"{line}: T.match_buffer: argument #1 has the wrong type" in message
    assert "T.match_buffer(handle, shape, dtype)" in message
    _no_internals(message)


def test_04_literal_out_of_range(tmp_path):
    message, line = _load_file(tmp_path, """
        def f(B: T.Buffer((16,), "int32")):
            for i in range(16):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i)
                    B[vi] = T.int32(2**31)
        """, "2**31")
    assert f"{line}: Literal value 2147483648 exceeds range of int32" in message
    _no_internals(message)


def test_05_variable_used_outside_its_scope_is_the_inputs_fault():
    """Was an InternalError from TVM's build of the reference ("variables (j,) are used")."""
    with pytest.raises(FrontendError, match=r"PrimFunc undefined_variable is not well formed \(TVM's checker, on "
                                            r"the input before any pass\).*undefined variable j"):
        compile(undefined_variable_func())


CRASHERS = '''
import tvm
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tir_passes import CHECKS, run_pipeline
from tir_passes.errors import TirTritonError
from tir_passes.infra.frontend import as_module
from triton_codegen import compile


@T.prim_func(s_tir=True)
def extern(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.call_extern("float32", "my_fn", A[vi])


@T.prim_func(s_tir=True)
def pure_extern(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.call_pure_extern("float32", "my_pure_fn", A[vi])


@T.prim_func(s_tir=True)
def packed(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            T.evaluate(T.call_packed("my_packed", A[vi]))
            B[vi] = A[vi]


def ill_typed_while():
    """A while loop whose condition is a float load (TIR wants a bool)."""
    A = tirx.decl_buffer((16,), "float32", "A", layout=None)
    store = tirx.BufferStore(A, tirx.const(0.0, "float32"), [tirx.const(0, "int32")])
    loop = tirx.While(tirx.BufferLoad(A, [tirx.const(0, "int32")]), store)
    root = s_tir.SBlock(iter_vars=[], reads=[], writes=[], name_hint="root", body=loop)
    func = tirx.PrimFunc([A], s_tir.SBlockRealize([], True, root))
    return func.with_attr({"global_symbol": "ill_typed", "s_tir": True})


try:
    tirx.Cast("bool", tvm.ir.StringImm("x"))
    print("string cast: built")
except TypeError as err:
    print("string cast: refused by the FFI")
for func in (extern, pure_extern, packed, ill_typed_while()):
    try:
        compile(func)  # verify=True: the numerics check would JIT-link the symbol
        print(func.attrs["global_symbol"], "compiled")
    except TirTritonError as err:
        print(func.attrs["global_symbol"], type(err).__name__, str(err))
try:
    run_pipeline(as_module(extern), checks=CHECKS)  # the pipeline alone (the CLI's `passes --verify`)
    print("pipeline ran")
except TirTritonError as err:
    print("pipeline", type(err).__name__, str(err))
'''


@pytest.fixture(scope="module")
def crashers(tmp_path_factory):
    """Inputs that killed the process (SIGSEGV) or could: compiled in a subprocess, so a crash shows."""
    path = tmp_path_factory.mktemp("crashers") / "crashers.py"
    path.write_text(CRASHERS)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, f"the process died (rc {done.returncode}):\n{done.stderr[-2000:]}"
    return {line.split(" ", 1)[0]: line for line in done.stdout.splitlines()}


def test_06_ill_typed_ir_is_refused_before_any_lowering(crashers):
    assert crashers["string"] == "string cast: refused by the FFI"
    assert crashers["ill_typed"].startswith("ill_typed UnsupportedConstructError PrimFunc ill_typed: a data-dependent "
                                            "while loop")


def test_07_empty_body_and_no_outputs_are_refused_alike():
    @T.prim_func(s_tir=True)
    def empty(A: T.Buffer((16,), "float32")):
        pass

    @T.prim_func(s_tir=True)
    def no_outputs(A: T.Buffer((16,), "float32")):
        tmp = T.sblock_alloc_buffer((16,), "float32")
        for i in range(16):
            with T.sblock("tmp"):
                vi = T.axis.spatial(16, i)
                tmp[vi] = A[vi]

    for func in (empty, no_outputs):  # empty was an AttributeError inside HoistAllocations
        with pytest.raises(UnsupportedConstructError, match="computes nothing: its body stores to no buffer parameter"):
            compile(func)


def test_08_while_loop_is_refused_before_any_pass(monkeypatch):
    @T.prim_func(s_tir=True)
    def countdown(A: T.Buffer((16,), "int32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                while A[vi] > 0:
                    A[vi] = A[vi] - 1

    def no_pipeline(*args, **kwargs):
        pytest.fail("a pass ran")

    monkeypatch.setattr(sys.modules["triton_codegen.driver"], "run_pipeline", no_pipeline)
    with pytest.raises(UnsupportedConstructError, match=r"test_a_frontend.py:\d+: a data-dependent while loop cannot "
                                                        r"become a Triton kernel.*supported statements: for loops"):
        compile(countdown)


@pytest.mark.parametrize("name, fragment", [
    ("extern", "T.call_extern calls 'my_fn', a function from outside the program"),
    ("pure_extern", "T.call_pure_extern calls 'my_pure_fn', a function from outside the program"),
    ("packed", "T.call_packed calls 'my_packed', a function from outside the program"),
])
def test_09_calls_outside_the_program_are_refused_by_name(crashers, name, fragment):
    """call_extern under verify=True was a SIGSEGV: the reference build JIT-linked my_fn."""
    line = crashers[name]
    assert line.startswith(f"{name} UnsupportedConstructError crashers.py:")
    assert fragment in line and "(supported calls: ceil, " in line


def test_09_the_pipeline_alone_refuses_them_before_building_the_reference(crashers):
    assert crashers["pipeline"].startswith("pipeline UnsupportedConstructError crashers.py:")
    assert "T.call_extern calls 'my_fn', a function from outside the program: the numerics check cannot build a " \
           "reference for it" in crashers["pipeline"]


def test_09_intrinsic_without_a_triton_mapping_lists_the_supported_calls():
    @T.prim_func(s_tir=True)
    def bits(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "int32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.reinterpret("int32", A[vi])

    with pytest.raises(UnsupportedConstructError, match=r"test_a_frontend.py:\d+: the call `T.reinterpret.*` "
                                                        r"\(reinterpret\) has no Triton mapping \(supported calls: "):
        compile(bits)


def test_10_unsupported_dtypes_list_the_supported_ones():
    @T.prim_func(s_tir=True)
    def nibbles(A: T.Buffer((16,), "int4"), B: T.Buffer((16,), "int4")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]

    @T.prim_func(s_tir=True)
    def raw_handle(A: T.Buffer((16,), "float32"), h: T.handle):
        for i in range(16):
            with T.sblock("A"):
                vi = T.axis.spatial(16, i)
                A[vi] = T.float32(1)

    with pytest.raises(UnsupportedConstructError, match=r"buffer A has dtype int4, .*\(supported: bfloat16, bool, "):
        compile(nibbles)
    with pytest.raises(UnsupportedConstructError, match="parameter h: a T.handle that no T.match_buffer binds"):
        compile(raw_handle)  # was an AttributeError ('PointerType' object has no attribute 'dtype')


def test_10_bfloat16_runs_in_the_interpreter():
    """bf16 is supported under TRITON_INTERPRET=1: computed in float32 as TVM's build does."""
    @T.prim_func(s_tir=True)
    def halve(A: T.Buffer((37,), "bfloat16"), B: T.Buffer((37,), "bfloat16")):
        for i in range(37):
            with T.sblock("B"):
                vi = T.axis.spatial(37, i)
                B[vi] = A[vi] * T.bfloat16(0.5)

    report = check_against_tvm(compile(halve, verify=False), halve)
    assert report.ok, str(report)


def test_11_index_out_of_range_is_refused_and_a_gathered_one_is_guarded():
    @T.prim_func(s_tir=True)
    def squares(A: T.Buffer((64,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi * vi]  # reads A[225]

    @T.prim_func(s_tir=True)
    def gather(table: T.Buffer((5,), "float32"), ids: T.Buffer((3,), "int32"), out: T.Buffer((3,), "float32")):
        for i in range(3):
            with T.sblock("out"):
                vi = T.axis.spatial(3, i)
                out[vi] = table[ids[vi]]

    with pytest.raises(UnsupportedConstructError, match=r"(?s)accesses of the input that are not proven in bounds "
                                                        r"\(before any pass.*test_a_frontend.py:\d+: block 'B': "
                                                        r"A\[vi \* vi\]: index vi \* vi of dimension 0"):
        compile(squares)
    out = torch.full((3,), 7.0)
    compile(gather)(torch.arange(5.0), torch.tensor([4, 9, -1], dtype=torch.int32), out)
    assert out.tolist() == [4.0, 0.0, 0.0]  # out-of-range ids read zero, never outside the table


def test_12_reduction_without_init_accumulates_into_the_output():
    @T.prim_func(s_tir=True)
    def accumulate(A: T.Buffer((37, 45), "float32"), B: T.Buffer((37,), "float32")):
        for i, k in T.grid(37, 45):
            with T.sblock("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                B[vi] = B[vi] + A[vi, vk]

    report = check_against_tvm(compile(accumulate), accumulate)  # the data sets fill B with random values first
    assert report.ok, str(report)


def test_13_user_thread_bindings_are_refused_at_their_line():
    @T.prim_func(s_tir=True)
    def bound(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for bx in T.thread_binding(8, "blockIdx.x"):
            for tx in T.thread_binding(8, "threadIdx.x"):
                with T.sblock("B"):
                    vi = T.axis.spatial(64, bx * 8 + tx)
                    B[vi] = A[vi]

    with pytest.raises(UnsupportedConstructError, match=r"test_a_frontend.py:\d+: loop bx is bound to blockIdx.x, a "
                                                        r"GPU thread: tir-triton maps loops to Triton programs itself"):
        compile(bound)


@I.ir_module
class TwoFunctions:
    @T.prim_func(s_tir=True)
    def helper(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] + T.float32(1)

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        T.evaluate(TwoFunctions.helper(A, B))


def test_14_several_primfuncs_are_named_and_each_compiles_alone():
    with pytest.raises(FrontendError, match=r"holds several PrimFuncs \(helper, main\); pass func_name="):
        compile(TwoFunctions)
    with pytest.raises(UnsupportedConstructError, match=r"test_a_frontend.py:\d+: PrimFunc main calls the PrimFunc "
                                                        r"helper"):
        compile(TwoFunctions, func_name="main")
    a, b = torch.rand(16), torch.empty(16)
    compile(TwoFunctions, func_name="helper", verify=False)(a, b)
    torch.testing.assert_close(b, a + 1)


def test_14_primfunc_calling_another_is_refused_before_the_reference_is_built():
    """run_pipeline alone (the CLI's `passes --verify`) refuses it too, before anything is built."""
    from tir_passes import CHECKS, run_pipeline

    mod = tvm.IRModule({"main": TwoFunctions["main"].with_attr("global_symbol", "main")})
    with pytest.raises(UnsupportedConstructError, match="calls the PrimFunc helper"):
        run_pipeline(mod, checks=CHECKS)
