"""A TVM pass instrument that dumps, diffs and times every top-level pass of a pipeline run.

It only observes: verification runs in the driver (pipeline.py), where a failure can be raised
as our own error (exceptions raised inside TVM callbacks come back as plain RuntimeErrors).
Passes that other passes call internally (depth > 1) are not recorded as stages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import tvm
from tvm.ir.instrument import pass_instrument

from tir_passes.infra import dump


@dataclass
class StageObservation:
    index: int
    name: str
    script: str
    changed: bool
    seconds: float
    dump_path: str | None = None
    diff: str = ""


@pass_instrument
class StageRecorder:
    """Records (and optionally writes) the TVMScript after each top-level pass."""

    def __init__(self, input_script: str, dump_dir: str | None = None, first_index: int = 1):
        self.dump_dir = dump_dir
        self.previous_script = input_script
        self.previous_name = "00_input"
        self.next_index = first_index
        self.depth = 0
        self.started = 0.0
        self.stages: list[StageObservation] = []

    def run_before_pass(self, mod: tvm.IRModule, info) -> None:
        self.depth += 1
        if self.depth == 1:
            self.started = time.perf_counter()

    def run_after_pass(self, mod: tvm.IRModule, info) -> None:
        self.depth -= 1
        if self.depth != 0:
            return
        seconds = time.perf_counter() - self.started
        script = mod.script()
        changed = script != self.previous_script
        stage = StageObservation(self.next_index, info.name, script, changed, seconds)
        stage.diff = dump.unified_diff(self.previous_script, script, self.previous_name,
                                       dump.stage_file_name(stage.index, info.name)[:-3])
        if self.dump_dir:
            stage.dump_path = dump.write_stage(self.dump_dir, stage.index, info.name, script, changed)
            dump.write_diff(self.dump_dir, stage.index, info.name, stage.diff)
        self.stages.append(stage)
        self.previous_script = script
        self.previous_name = dump.stage_file_name(stage.index, info.name)[:-3]
        self.next_index += 1
