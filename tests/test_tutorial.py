"""docs/tutorial.md runs: every `sh` block with bash and every `python file=NAME` block written to
NAME, in order, in one empty folder, with `tir-triton` and `python` as a user's shell has them
(this checkout's CLI). Blocks fenced `sh gpu` need a GPU and are the only ones skipped. A `text`
block right after an `sh` block is what that command prints: each of its lines (`...` stands for
lines left out) is a line of the output, up to the numbers (timings) and the spacing."""

import os
import re
import stat
import subprocess
import sys

from tir_passes.pass_order import DEFAULT_ORDER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIAL = os.path.join(ROOT, "docs", "tutorial.md")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.S | re.M)


def tutorial_blocks() -> list[tuple[str, str]]:
    """(info string, body) of every fenced block, in order."""
    with open(TUTORIAL) as handle:
        return [(info.strip(), body) for info, body in FENCE.findall(handle.read())]


def _shell_tools(folder) -> str:
    """A bin folder with `python` (this interpreter, its packages) and `tir-triton` (this checkout's CLI)."""
    os.makedirs(folder)
    commands = (("python", f'"{sys.executable}"'), ("tir-triton", f'"{sys.executable}" -m triton_codegen.cli'))
    for name, command in commands:
        path = os.path.join(folder, name)
        with open(path, "w") as handle:
            handle.write(f'#!/bin/sh\nexec {command} "$@"\n')
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return folder


def _shown(line: str) -> str:
    """A line as the reader compares it: numbers and runs of spaces stand for any."""
    return " ".join(re.sub(r"\d+(\.\d+)?", "#", line).split())


def lines_not_printed(shown: str, printed: str) -> list[str]:
    """The lines of a `text` block that the command did not print."""
    out = {_shown(line) for line in printed.splitlines()}
    return [line for line in shown.splitlines() if line.strip() != "..." and _shown(line) not in out]


def test_shown_output_is_compared_up_to_numbers_and_spacing():
    printed = "01    HoistAllocations         no            12.5        0.0  -\n+  x = 1\n"
    assert lines_not_printed("01    HoistAllocations         no             0.2        0.0  -\n...\n", printed) == []
    assert lines_not_printed("01    HoistAllocations         yes            0.2        0.0  -", printed) == [
        "01    HoistAllocations         yes            0.2        0.0  -"]


def test_the_tutorial_has_the_steps_it_promises():
    infos = [info for info, _ in tutorial_blocks()]
    commands = "\n".join(body for info, body in tutorial_blocks() if info.startswith("sh"))
    for step in ("tir-triton passes", "tir-triton diff", "tir-triton compile", "--check", "compile dumps/",
                 "tir-triton report", "python deploy.py", "tir-triton tune", "tir-triton model", "python model.py"):
        assert step in commands, step
    assert infos.count("sh gpu") == 1 and "python file=rmsnorm.py" in infos


def test_every_block_of_the_tutorial_runs(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    tools = _shell_tools(str(tmp_path / "bin"))
    # as a user's shell: no TRITON_INTERPRET (the tests' own setting), so the CLI must choose it
    shell = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env = {**shell, "PATH": tools + os.pathsep + os.environ["PATH"], "PYTHONPATH": ROOT,
           "TIR_TRITON_CACHE": str(tmp_path / "cache")}
    ran, skipped, last = [], [], None
    for info, body in tutorial_blocks():
        words = info.split()
        if words == ["text"] and last is not None:
            assert lines_not_printed(body, last) == [], f"the tutorial shows lines this run did not print:\n{last}"
        last = None
        if not words or words[0] not in ("sh", "python"):
            continue  # output shown to the reader (text)
        if words[0] == "python":
            name = next(word.split("=", 1)[1] for word in words if word.startswith("file="))
            (folder / name).write_text(body)
            continue
        if "gpu" in words:
            skipped.append(body)  # needs a GPU: the tuner times configs on one
            continue
        done = subprocess.run(["bash", "-e", "-c", body], cwd=str(folder), env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{body}\n{done.stdout}\n{done.stderr}"
        ran.append((body, done.stdout))
        last = done.stdout
    outputs = "\n".join(out for _, out in ran)
    assert f"PrimFunc rmsnorm: {len(DEFAULT_ORDER)} passes" in outputs and "matches TVM" in outputs
    assert "deployed kernel matches torch" in outputs and "torch.compile(fullgraph=True) runs the op" in outputs
    assert "the same kernel" in outputs and "* = the default config" in outputs
    assert "@triton.jit" in outputs and (folder / "report.html").exists()
    assert len(skipped) == 1 and "tir-triton tune" in skipped[0]
