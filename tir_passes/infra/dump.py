"""Numbered TVMScript dumps of every stage (`00_input.py`, `01_<Pass>.py`, ...) and their diffs.

A dump is a program: the stage's `script()` behind a header line, with the printer's commented
imports made real, so `python NN_Pass.py` runs and `tir-triton compile NN_Pass.py` compiles it.
The header line (`# tir-triton stage NN: Pass`) is the dump's record of where it stands:
`stage_of` reads it back and the CLI runs only the passes after that one, so the kernel is the
one the original compiles to. `read_stage_script` gives back exactly the printer's text (what
`tvm.script.from_source` parses: it refuses import statements). Nothing in a dump depends on
time, hashes or addresses, so two runs write identical files.
"""

from __future__ import annotations

import difflib
import os
import re

from tir_passes.errors import FrontendError

_STAGE_FILE = re.compile(r"^(\d\d)_(\w+)\.py$")
_HEADER = re.compile(r"^# tir-triton stage (\d\d): (\w+)")
# the printer's own import lines, commented out ("# from tvm.script import tirx as T")
_PRINTED_IMPORT = re.compile(r"^# ((?:from [\w.]+ )?import [\w., ]+(?: as \w+)?)$")
_REAL_IMPORT = re.compile(r"^((?:from [\w.]+ )?import [\w., ]+(?: as \w+)?)$")
_POSTPONED_ANNOTATIONS = "from __future__ import annotations"
_DECIDED = re.compile(r" \(unchanged; decision: ([\w., ]+)\);")


def stage_file_name(index: int, name: str) -> str:
    return f"{index:02d}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}.py"


def stage_header(index: int, name: str, changed: bool, decided: tuple[str, ...] = ()) -> str:
    """`decided`: the root-block attrs a pass that changed nothing else wrote (its decision record)."""
    if changed:
        note = ""
    elif decided:
        note = f" (unchanged; decision: {', '.join(decided)})"
    else:
        note = " (no-op: identical to the previous stage)"
    resume = "every pass" if index == 0 else f"the passes after {name}"
    return f"# tir-triton stage {index:02d}: {name}{note}; `tir-triton compile` of this file runs {resume}\n"


def as_program(script: str) -> str:
    """The printer's text with its commented imports (its leading lines) made real: a file Python runs.
    Why the `__future__` import first: Python evaluates a parameter's annotation when it defines the
    function, and the printer writes a symbolic size in the first signature that uses it as a string
    (`X: T.Buffer(("rows", 64))`) before the body binds it (`rows = T.int32()`); TVMScript parses
    the annotations from the source itself, so postponed ones (PEP 563) lose nothing."""
    lines = script.split("\n")
    body_starts = next((n for n, line in enumerate(lines) if line and not _PRINTED_IMPORT.match(line)), len(lines))
    imports = [_PRINTED_IMPORT.sub(r"\1", line) for line in lines[:body_starts]]
    return "\n".join([_POSTPONED_ANNOTATIONS] + imports + lines[body_starts:])


def as_printed(program: str) -> str:
    """as_program's inverse: the imports commented out again, as the printer writes them."""
    lines = program.split("\n")
    lines = lines[1:] if lines[0] == _POSTPONED_ANNOTATIONS else lines
    body_starts = next((n for n, line in enumerate(lines) if line and not _REAL_IMPORT.match(line)), len(lines))
    return "\n".join([f"# {line}" if line else line for line in lines[:body_starts]] + lines[body_starts:])


def stage_of(file_path: str) -> tuple[int, str] | None:
    """(index, pass name) a dump's header names, or None for a file that is no dump."""
    try:
        with open(file_path) as handle:
            match = _HEADER.match(handle.readline())
    except OSError:
        return None
    return (int(match.group(1)), match.group(2)) if match else None


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


def write_stage(path: str, index: int, name: str, script: str, changed: bool, decided: tuple[str, ...] = ()) -> str:
    file_path = os.path.join(path, stage_file_name(index, name))
    with open(file_path, "w") as handle:
        handle.write(stage_header(index, name, changed, decided) + as_program(script))
    return file_path


def diffable(script: str) -> str:
    """The printer's text without its root-block wrapper. The printer leaves an s_tir function's
    root block implicit (`# with T.sblock("root"):`) until the block carries something, a pass's
    decision record (`T.sblock_attr`) say; then it writes `with T.sblock("root"):` with empty
    `T.reads()` / `T.writes()` and indents the whole body one level. Both forms become the body at
    the function's level, with the block's own lines (its attrs) first, so that a diff shows what a
    pass changed, not the printer's re-wrapping."""
    lines, out, index = script.split("\n"), [], 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped == '# with T.sblock("root"):':
            index += 1
            continue
        if stripped == 'with T.sblock("root"):':
            indent = _indent(line)
            index += 1
            while index < len(lines) and lines[index].strip() in ("T.reads()", "T.writes()"):
                index += 1
            while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > indent):
                out.append(lines[index][4:] if lines[index].strip() else lines[index])
                index += 1
            continue
        out.append(line)
        index += 1
    return "\n".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def unified_diff(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    """A unified diff of two stages' scripts, compared as `diffable` text."""
    before, after = diffable(before), diffable(after)
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name,
                                 lineterm="", n=context)
    return "\n".join(lines) + "\n" if before != after else ""


def decided_in(file_path: str) -> tuple[str, ...]:
    """The decision records a dump's header names: what its pass wrote while changing nothing else."""
    with open(file_path) as handle:
        found = _DECIDED.search(handle.readline())
    return tuple(found.group(1).split(", ")) if found else ()


def pair_text(before: tuple[int, str, str], after: tuple[int, str, str]) -> str:
    """What `tir-triton diff` prints for two stages (list_stages entries): their diff, headed by
    "unchanged; decision: ..." when the later one is the next stage and only recorded a decision
    (as `tir-triton passes` says it), or one line when nothing differs."""
    name = os.path.basename(after[2])
    diff = unified_diff(read_stage_script(before[2]), read_stage_script(after[2]), os.path.basename(before[2]), name)
    decided = decided_in(after[2]) if after[0] == before[0] + 1 else ()
    if decided:
        return f"# {name}: unchanged; decision: {', '.join(decided)}\n{diff}"
    return diff if diff else f"# {name}: unchanged"


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
    """The TVMScript of a dump as the printer wrote it: no header line, its imports commented."""
    with open(file_path) as handle:
        text = handle.read()
    return as_printed(text.split("\n", 1)[1]) if _HEADER.match(text) else text


def find_stage(stages: list[tuple[int, str, str]], key: str) -> tuple[int, str, str]:
    """A stage by number (`3`, `03`) or pass name (`RemoveUnitLoops`)."""
    for stage in stages:
        if key.isdigit() and stage[0] == int(key) or stage[1] == key:
            return stage
    names = ", ".join(f"{i:02d}_{n}" for i, n, _ in stages)
    raise FrontendError(f"no stage '{key}' in the dump folder (stages: {names})")
