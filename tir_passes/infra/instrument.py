"""A TVM pass instrument that dumps, diffs and times every top-level pass of a pipeline run.

It only observes: verification runs in the driver (pipeline.py), where a failure can be raised
as our own error (exceptions raised inside TVM callbacks come back as plain RuntimeErrors).
Passes that other passes call internally (depth > 1) are not recorded as stages.

A stage is compared with the previous one structurally: `changed` when the program changed, and
`decisions` the root-block attrs (a pass's decision record, `T.sblock_attr`) it added or changed.
A pass that only records a decision is unchanged, with its decision: the printer re-wraps the
body in `with T.sblock("root")` for it, which is no change (dump.diffable drops it from diffs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.instrument import pass_instrument

from tir_passes.infra import dump
from tir_passes.infra.pass_util import replace_block, root_block, with_root_block


@dataclass
class StageObservation:
    index: int
    name: str
    script: str
    changed: bool
    seconds: float
    dump_path: str | None = None
    diff: str = ""
    decisions: tuple[tuple[str, str], ...] = ()   # (root attr, its new value) the pass wrote


def root_attrs(mod: tvm.IRModule) -> dict[str, object]:
    """The root blocks' annotations of every s_tir PrimFunc, as "func: attr" -> value."""
    attrs = {}
    for gvar, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if isinstance(func, tirx.PrimFunc) and _has_root(func):
            for key, value in root_block(func).annotations.items():
                attrs[f"{gvar.name_hint}: {key}" if len(mod.functions) > 1 else str(key)] = value
    return attrs


def without_root_attrs(mod: tvm.IRModule) -> tvm.IRModule:
    """The module with every root block's annotations removed: the program without its records."""
    functions = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc) and _has_root(func):
            func = with_root_block(func, replace_block(root_block(func), annotations={}))
        functions[gvar] = func
    return tvm.IRModule(functions, attrs=mod.attrs)


def _has_root(func: tirx.PrimFunc) -> bool:
    return hasattr(func.body, "block")


def compare_stages(before: tvm.IRModule, after: tvm.IRModule) -> tuple[bool, tuple[tuple[str, str], ...]]:
    """(changed, decisions): whether the program changed beyond its root attrs, and the root attrs
    (with their values, as text) that are new or different in `after`."""
    old, new = root_attrs(before), root_attrs(after)
    decisions = tuple((key, decision_text(value)) for key, value in new.items()
                      if key not in old or not tvm_ffi.structural_equal(old[key], value))
    dropped = any(key not in new for key in old)
    changed = dropped or not tvm_ffi.structural_equal(without_root_attrs(before), without_root_attrs(after))
    return changed, decisions


def decision_text(value) -> str:
    """A root attr's value as one line: a list of strings joined by "; "."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return "; ".join(decision_text(item) for item in value)
    return " ".join(str(value).split())


@pass_instrument
class StageRecorder:
    """Records (and optionally writes) the TVMScript after each top-level pass."""

    def __init__(self, input_script: str, dump_dir: str | None = None, first_index: int = 1):
        self.dump_dir = dump_dir
        self.previous_script = input_script
        self.before: tvm.IRModule | None = None
        self.previous_name = "00_input"
        self.next_index = first_index
        self.depth = 0
        self.started = 0.0
        self.stages: list[StageObservation] = []

    def run_before_pass(self, mod: tvm.IRModule, info) -> None:
        self.depth += 1
        if self.depth == 1:
            self.before = mod
            self.started = time.perf_counter()

    def run_after_pass(self, mod: tvm.IRModule, info) -> None:
        self.depth -= 1
        if self.depth != 0:
            return
        seconds = time.perf_counter() - self.started
        script = mod.script()
        changed, decisions = compare_stages(self.before, mod)
        stage = StageObservation(self.next_index, info.name, script, changed, seconds, decisions=decisions)
        stage.diff = dump.unified_diff(self.previous_script, script, self.previous_name,
                                       dump.stage_file_name(stage.index, info.name)[:-3])
        if self.dump_dir:
            stage.dump_path = dump.write_stage(self.dump_dir, stage.index, info.name, script, changed,
                                               tuple(key for key, _ in decisions))
            dump.write_diff(self.dump_dir, stage.index, info.name, stage.diff)
        self.stages.append(stage)
        self.previous_script = script
        self.previous_name = dump.stage_file_name(stage.index, info.name)[:-3]
        self.next_index += 1
