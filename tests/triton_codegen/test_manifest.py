"""One manifest per folder, listing every module in it (triton_codegen/writeback.py)."""

import json
import os
import threading

from triton_codegen import compile
from triton_codegen.cli import main
from triton_codegen.writeback import add_to_manifest, read_manifest, write_back

from elementwise import scale_shift_relu
from softmax import softmax

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


def test_a_second_function_compiled_into_the_folder_is_added(tmp_path):
    out = str(tmp_path / "out")
    assert main(["compile", os.path.join(EXAMPLES, "softmax.py"), "-o", out, "--no-verify"]) == 0
    assert main(["compile", os.path.join(EXAMPLES, "elementwise.py"), "-o", out,
                 "--no-verify"]) == 0
    with open(os.path.join(out, "manifest.json")) as handle:
        text = handle.read()
    modules = json.loads(text)["modules"]
    assert list(modules) == ["scale_shift_relu.py", "softmax.py"]  # sorted, whatever the order of compiling
    assert modules["softmax.py"]["name"] == "softmax" and modules["scale_shift_relu.py"]["kernels"]
    # compiling one again replaces its entry, byte for byte the same file
    assert main(["compile", os.path.join(EXAMPLES, "softmax.py"), "-o", out, "--no-verify"]) == 0
    with open(os.path.join(out, "manifest.json")) as handle:
        assert handle.read() == text
    assert sorted(os.listdir(out)) == ["manifest.json", "scale_shift_relu.py", "softmax.py"]


def test_the_old_single_module_form_is_read_as_one_module(tmp_path):
    path = str(tmp_path / "manifest.json")
    with open(path, "w") as handle:
        json.dump({"name": "old", "kernels": []}, handle)
    assert read_manifest(path) == {"old.py": {"name": "old", "kernels": []}}
    add_to_manifest(path, "new.py", {"name": "new"})
    assert sorted(read_manifest(path)) == ["new.py", "old.py"]


def test_concurrent_writers_lose_no_entry(tmp_path):
    path = str(tmp_path / "manifest.json")
    threads = [threading.Thread(target=add_to_manifest, args=(path, f"m{i:02d}.py", {"name": f"m{i:02d}"}))
               for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert list(read_manifest(path)) == [f"m{i:02d}.py" for i in range(16)]


def test_write_back_updates_only_its_modules_entry(tmp_path):
    folder = str(tmp_path / "deploy") + os.sep
    first, second = compile(softmax, verify=False), compile(scale_shift_relu, verify=False)
    for kernel in (first, second):
        kernel.write_manifest(os.path.join(folder, "manifest.json"), os.path.basename(kernel.save(folder)))
    name = first.program.kernels[0].name
    config = dict(first.manifest()["kernels"][0]["configs"][0], num_warps=8)
    write_back(os.path.join(folder, "softmax.py"), {name: config}, {"gpu": "H200"})
    modules = read_manifest(os.path.join(folder, "manifest.json"))
    assert modules["softmax.py"]["tuning"] == {"gpu": "H200"}
    entry = modules["softmax.py"]["kernels"][0]
    assert entry["configs"][entry["chosen"]] == config
    assert "tuning" not in modules["scale_shift_relu.py"]
