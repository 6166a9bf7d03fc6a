"""The classic mistakes of a new user (old tutorials, older TVM): each error says what to write.

TVM's own messages send the user the wrong way ("consider setting check_well_formed to False")
or name only what is missing; tir_passes/frontend.py rewrites them (docs/bad-input.md).
"""

import textwrap

import pytest
from tvm import te

from tir_passes import FrontendError, UnsupportedConstructError
from tir_passes.infra.frontend import as_module, load_target

COPY = """
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi]
"""
SIGNATURE = 'def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):'


def _error(tmp_path, text: str, kind=FrontendError, name: str = "") -> str:
    path = tmp_path / "user.py"
    path.write_text(textwrap.dedent(text).lstrip())
    with pytest.raises(kind) as caught:
        load_target(str(path) + (f":{name}" if name else ""))
    message = str(caught.value)
    for internal in ("Traceback", "check_well_formed in the top-level", "site-packages", "ffi.Object"):
        assert internal not in message, message
    return message


def _line_of(tmp_path, marker: str) -> str:
    lines = (tmp_path / "user.py").read_text().splitlines()
    return f"user.py:{next(n for n, text in enumerate(lines, start=1) if marker in text)}"


def test_missing_s_tir_names_the_decorator_and_what_to_write(tmp_path):
    message = _error(tmp_path, "from tvm.script import tirx as T\n\n\n@T.prim_func\n" + SIGNATURE + COPY)
    assert f"{_line_of(tmp_path, '@T.prim_func')}: @T.prim_func without s_tir=True" in message
    assert "write @T.prim_func(s_tir=True)" in message


def test_a_tvmscript_error_names_the_file_as_the_user_gave_it(tmp_path, monkeypatch):
    (tmp_path / "user.py").write_text("from tvm.script import tirx as T\n\n\n@T.prim_func\n" + SIGNATURE + COPY)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FrontendError) as caught:
        load_target("user.py")
    assert str(caught.value) == ("TVMScript error at user.py:4: @T.prim_func without s_tir=True: a function with "
                                 "T.sblock blocks is S-TIR; write @T.prim_func(s_tir=True)")


def test_missing_s_tir_inside_an_ir_module_points_at_the_method(tmp_path):
    body = textwrap.indent(SIGNATURE + textwrap.indent(textwrap.dedent(COPY), "    "), "    ")
    message = _error(tmp_path, "from tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n\n"
                               "@I.ir_module\nclass Mod:\n    @T.prim_func\n" + body)
    assert f"{_line_of(tmp_path, '@T.prim_func')}: @T.prim_func without s_tir=True" in message


def test_old_tir_import_says_tirx(tmp_path):
    message = _error(tmp_path, "from tvm.script import tir as T\n\n\n@T.prim_func\n" + SIGNATURE + COPY)
    assert "user.py:1: cannot import name 'tir' from 'tvm.script'" in message
    assert "write `from tvm.script import tirx as T`" in message


def test_tvm_tir_module_says_tirx_and_s_tir(tmp_path):
    message = _error(tmp_path, "import tvm\n\nzero = tvm.tir.const(0)\n")
    assert "user.py:3: module 'tvm' has no attribute 'tir'" in message
    assert "`from tvm import tirx`" in message and "`from tvm import s_tir`" in message


def test_t_block_says_t_sblock_at_its_line(tmp_path):
    text = "from tvm.script import tirx as T\n\n\n@T.prim_func(s_tir=True)\n" + SIGNATURE + COPY
    message = _error(tmp_path, text.replace("T.sblock", "T.block"))
    assert f"{_line_of(tmp_path, 'T.block(')}: module 'tvm.tirx.script' has no attribute 'block'" in message
    assert 'write `with T.sblock("name"):`' in message


def test_schedule_get_block_says_get_sblock(tmp_path):
    message = _error(tmp_path, """
        import tvm
        from tvm import te

        A = te.placeholder((16,), name="A")
        B = te.compute((16,), lambda i: A[i] * 2, name="B")
        sch = tvm.s_tir.Schedule(te.create_prim_func([A, B]))
        sch.get_block("B")
        """)
    assert f"{_line_of(tmp_path, 'get_block')}: 'Schedule' object has no attribute 'get_block'" in message
    assert "sch.get_sblock(name)" in message


def test_plain_tir_without_blocks_asks_for_s_tir(tmp_path):
    text = "from tvm.script import tirx as T\n\n\n@T.prim_func\n" + SIGNATURE + "\n    for i in range(16):\n" \
           "        B[i] = A[i]\n"
    message = _error(tmp_path, text, UnsupportedConstructError)
    assert "user.py: PrimFunc 'f' is not S-TIR: write it as @T.prim_func(s_tir=True)" in message


def test_file_of_te_tensors_says_create_prim_func_with_its_names(tmp_path):
    message = _error(tmp_path, """
        from tvm import te

        X = te.placeholder((16,), name="X")
        Y = te.compute((16,), lambda i: X[i] * 2, name="Y")
        """)
    assert "it defines TE tensors (X, Y)" in message
    assert "`func = te.create_prim_func([X, Y])`" in message


def test_file_with_an_uncalled_factory_says_call_it(tmp_path):
    message = _error(tmp_path, """
        from tvm.script import tirx as T


        def make_copy(n):
            @T.prim_func(s_tir=True)
            def copy(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
                for i in range(n):
                    with T.sblock("B"):
                        vi = T.axis.spatial(n, i)
                        B[vi] = A[vi]
            return copy
        """)
    assert "its Python functions (make_copy) are not PrimFuncs" in message
    assert "`func = make_copy(...)`" in message


def test_te_tensors_passed_to_the_api_say_create_prim_func():
    X = te.placeholder((16,), name="X")
    Y = te.compute((16,), lambda i: X[i] * 2, name="Y")
    for given in (Y, [X, Y]):
        with pytest.raises(FrontendError, match=r"got TE tensors .*pass te\.create_prim_func\(\[X, Y\]\)"):
            as_module(given)


def test_every_entry_point_that_takes_a_primfunc_says_what_to_pass_instead_of_te():
    """compile(), run_pipeline() and differentiate() alike: TE tensors get the create_prim_func
    call to write, not an AttributeError from deep inside; a PrimFunc is what they take."""
    from tir_passes import differentiate, run_pipeline
    from triton_codegen import compile

    X = te.placeholder((16,), name="X")
    Y = te.compute((16,), lambda i: X[i] * 2, name="Y")
    calls = {"compile": lambda value: compile(value, verify=False), "run_pipeline": run_pipeline,
             "differentiate": lambda value: differentiate(value, wrt=["X"])}
    for call in calls.values():
        with pytest.raises(FrontendError, match=r"got TE tensors \(Y\), not a PrimFunc: pass te\.create_prim_func"):
            call(Y)
    func = te.create_prim_func([X, Y]).with_attr("global_symbol", "double")
    assert [stage.name for stage in run_pipeline(func, []).stages] == []
    assert str(differentiate(func, wrt=["X"]).attrs["global_symbol"]) == "double_backward"


def test_python_function_passed_to_the_api_says_decorate_or_call():
    def make_thing():
        return None

    with pytest.raises(FrontendError, match=r"got the Python function make_thing.*@T\.prim_func\(s_tir=True\)"):
        as_module(make_thing)


# `FILE.py:NAME` naming what is not a PrimFunc, beside a PrimFunc (the name is found) or alone
FACTORY_AND_TENSORS = """
    from tvm import te
    from tvm.script import tirx as T


    def make_copy():
        X = te.placeholder((16,), name="X")
        return te.compute((16,), lambda i: X[i] * 2, name="Y")


    Y = make_copy()
    """


@pytest.mark.parametrize("with_primfunc", [False, True], ids=["alone", "beside a PrimFunc"])
def test_a_named_te_function_or_tensor_says_what_to_write(tmp_path, with_primfunc):
    primfunc = "\n\n@T.prim_func(s_tir=True)\n" + SIGNATURE + textwrap.dedent(COPY).replace("\n", "\n    ")
    text = textwrap.dedent(FACTORY_AND_TENSORS) + (primfunc if with_primfunc else "")
    message = _error(tmp_path, text, name="make_copy")
    assert "user.py:make_copy is a Python function, not a PrimFunc" in message
    assert "add `func = make_copy(...)` at module level" in message
    message = _error(tmp_path, text, name="Y")
    assert "user.py:Y is TE tensors (Y), not a PrimFunc: add `func = te.create_prim_func([X, Y])`" in message
