"""Numbered TVMScript dumps of every stage (`00_input.py`, `01_<Pass>.py`, ...) and their diffs.

A dump is the stage's `script()` behind a comment header; `tvm.script.from_source` parses it
back. Nothing in a dump depends on time, hashes or addresses, so two runs write identical files.
"""

from __future__ import annotations

import difflib
import os
import re

from tir_passes.errors import FrontendError

_STAGE_FILE = re.compile(r"^(\d\d)_(\w+)\.py$")


def stage_file_name(index: int, name: str) -> str:
    return f"{index:02d}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}.py"


def stage_header(index: int, name: str, changed: bool) -> str:
    note = "" if changed else " (no-op: identical to the previous stage)"
    return f"# tir-triton stage {index:02d}: {name}{note}\n"


def prepare_dump_dir(path: str) -> str:
    """Create the folder (or reuse it, removing old stage files) with a clear error if unwritable."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, ".tir_triton_write_test")
        with open(probe, "w") as handle:
            handle.write("")
        os.remove(probe)
    except OSError as err:
        raise FrontendError(f"dump folder {path!r} cannot be written: {err.strerror or err}") from None
    for entry in sorted(os.listdir(path)):
        if _STAGE_FILE.match(entry) or (entry.endswith(".diff") and entry[:2].isdigit()):
            os.remove(os.path.join(path, entry))
    return path


def write_stage(path: str, index: int, name: str, script: str, changed: bool) -> str:
    file_path = os.path.join(path, stage_file_name(index, name))
    with open(file_path, "w") as handle:
        handle.write(stage_header(index, name, changed) + script)
    return file_path


def unified_diff(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name,
                                 lineterm="", n=context)
    return "\n".join(lines) + "\n" if before != after else ""


def write_diff(path: str, index: int, name: str, diff: str) -> str:
    file_path = os.path.join(path, stage_file_name(index, name)[:-3] + ".diff")
    with open(file_path, "w") as handle:
        handle.write(diff)
    return file_path


def write_text(path: str, name: str, text: str) -> str:
    file_path = os.path.join(path, name)
    with open(file_path, "w") as handle:
        handle.write(text)
    return file_path


def list_stages(path: str) -> list[tuple[int, str, str]]:
    """(index, pass name, file path) of every stage dump in a folder, in order."""
    if not os.path.isdir(path):
        raise FrontendError(f"{path}: no such dump folder")
    stages = []
    for entry in sorted(os.listdir(path)):
        match = _STAGE_FILE.match(entry)
        if match:
            stages.append((int(match.group(1)), match.group(2), os.path.join(path, entry)))
    if not stages:
        raise FrontendError(f"{path}: no stage dumps (NN_<Pass>.py) in this folder")
    return stages


def read_stage_script(file_path: str) -> str:
    """The TVMScript of a dump, without our header line."""
    with open(file_path) as handle:
        text = handle.read()
    return text.split("\n", 1)[1] if text.startswith("# tir-triton stage") else text


def find_stage(stages: list[tuple[int, str, str]], key: str) -> tuple[int, str, str]:
    """A stage by number (`3`, `03`) or pass name (`RemoveUnitLoops`)."""
    for stage in stages:
        if key.isdigit() and stage[0] == int(key) or stage[1] == key:
            return stage
    names = ", ".join(f"{i:02d}_{n}" for i, n, _ in stages)
    raise FrontendError(f"no stage '{key}' in the dump folder (stages: {names})")
