"""The import graph of the packages as a test: no cycles, and no arrow against the layers.

Every `import` counts, also those inside functions (a deferred import is still a dependence).
Layers, lowest first; a module may import its own layer and the ones below:

| layer | modules |
| --- | --- |
| 0 | `tir_passes.errors` |
| 1 | `tir_passes.infra` |
| 2 | `tir_passes.contracts` |
| 3 | `tir_passes.analyses` |
| 4 | `tir_passes.passes`, `tir_passes.checks` |
| 5 | `tir_passes.pipeline`, `tir_passes` |
| 6 | `lowering` (reads contracts and analyses, never a pass or a check) |
| 7 | `triton_codegen` |

The runtime side of `triton_codegen` (what a saved module, its tuner and the hardware model need on
a GPU machine without TVM) is checked by importing it with TVM blocked.
"""

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("tir_passes", "lowering", "triton_codegen")

LAYERS = [
    ("tir_passes.errors", 0), ("tir_passes.infra", 1), ("tir_passes.contracts", 2), ("tir_passes.analyses", 3),
    ("tir_passes.passes", 4), ("tir_passes.checks", 4), ("tir_passes.pipeline", 5), ("tir_passes", 5),
    ("lowering", 6), ("triton_codegen", 7),
]

# What runs where TVM is not installed: the tuner, the hardware model, the loader, the torch-op support.
TVM_FREE = [
    "triton_codegen.environment", "triton_codegen.loader", "triton_codegen.runtime_support",
    "triton_codegen.torch_op_support", "triton_codegen.launch_replay", "triton_codegen.hardware_model",
    "triton_codegen.tile_summary", "triton_codegen.model_report",
    "triton_codegen.tuner", "triton_codegen.tuning", "triton_codegen.tuning_cache", "triton_codegen.search_space",
    "triton_codegen.gpu_timing", "triton_codegen.writeback", "tir_passes.contracts.gpu_specs",
    "tir_passes.contracts.gemm_price",
]


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _sources() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    found[_module_name(path)] = path
    return found


def _imports(module: str, path: str, known: set[str]) -> set[str]:
    """The modules of ours that `module` imports, anywhere in its file."""
    is_package = path.endswith("__init__.py")
    base = module if is_package else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                stem = f"{anchor}.{node.module}" if node.module else anchor
            else:
                stem = node.module
            names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def _graph() -> dict[str, set[str]]:
    sources = _sources()
    known = set(sources)
    return {module: _imports(module, path, known) for module, path in sorted(sources.items())}


def _layer_of(module: str) -> int:
    best = None
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return best[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def test_there_are_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_module_imports_a_higher_layer():
    against = [f"{module} (layer {_layer_of(module)}) imports {target} (layer {_layer_of(target)})"
               for module, targets in _graph().items() for target in sorted(targets)
               if _layer_of(target) > _layer_of(module)]
    assert not against, "imports against the layers:\n" + "\n".join(against)


# the one place for environment switches, the standalone runtime a saved module carries (and the kernel
# helpers' text written into it), and the passes' one switch (the layers keep them from importing environment.py)
ENVIRONMENT_READERS = {"triton_codegen/environment.py", "triton_codegen/runtime_support.py",
                       "triton_codegen/torch_op_support.py", "triton_codegen/kernel_helpers.py",
                       "tir_passes/checks/sandbox.py"}


def test_environment_switches_are_read_in_one_place():
    readers = set()
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                path = os.path.join(folder, name)
                if name.endswith(".py") and "os.environ" in open(path).read():
                    readers.add(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    assert readers <= ENVIRONMENT_READERS, f"read os.environ outside triton_codegen/environment.py: {readers - ENVIRONMENT_READERS}"


_BLOCK_TVM = "import sys\nsys.modules['tvm'] = None\nsys.modules['tvm_ffi'] = None\n"


def test_the_runtime_and_tuner_import_without_tvm():
    """On the GPU machine there is no TVM: block it and import everything deployment needs."""
    script = _BLOCK_TVM + "".join(f"import {module}\n" for module in TVM_FREE) + "import triton_codegen.cli\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_tir_triton_tune_of_a_saved_module_runs_without_tvm(tmp_path):
    """`tir-triton tune` gets as far as asking for the GPU (this machine has none) with TVM blocked."""
    from elementwise import make_scale_shift_relu  # examples/ is on the path (conftest.py)

    from triton_codegen import compile

    path = compile(make_scale_shift_relu(37, 5), verify=False).save(str(tmp_path) + os.sep)
    script = _BLOCK_TVM + ("from triton_codegen.cli import main\n"
                           f"code = main(['tune', {path!r}])\n"
                           "assert 'tvm' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}\n"
                           "print('exit', code)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TIR_TRITON_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0 and "exit 2" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    assert "tune needs a CUDA GPU" in done.stderr


def test_tir_triton_model_of_a_saved_module_runs_without_tvm(tmp_path):
    """`tir-triton model` of a saved module reads its TILE_SUMMARY (no TileProgram, no TVM), compiles
    the default config ahead of time and prints the model's row, as it does for the program itself."""
    from elementwise import make_scale_shift_relu

    from triton_codegen import compile
    from triton_codegen.model_report import format_rows, model_rows

    kernel = compile(make_scale_shift_relu(37, 5), verify=False)
    path = kernel.save(str(tmp_path) + os.sep)
    script = _BLOCK_TVM + ("from triton_codegen.cli import main\n"
                           f"code = main(['model', {path!r}, '--top', '0'])\n"
                           "assert 'tvm' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}\n"
                           "print('exit', code)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "exit 0" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    with_tvm = format_rows(model_rows(kernel, "H200", {}, 0), "H200", {})
    assert done.stdout.replace("exit 0\n", "") == with_tvm
