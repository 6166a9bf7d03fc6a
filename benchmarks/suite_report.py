"""The benchmark suite's table: goals evaluated from a run's JSON, the markdown section, and its
place in docs/benchmarks.md (between the markers below). Plain Python: it runs anywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "benchmarks.md")
RESULTS = os.path.join(ROOT, "benchmarks", "results")
BEGIN = "<!-- benchmark suite: begin (python benchmarks/suite.py table OUT/suite.json writes this section) -->"
END = "<!-- benchmark suite: end -->"


# --- goals ----------------------------------------------------------------------------------
def ours_us(case: dict) -> float | None:
    return (case.get("ours") or {}).get("us")


def peer_us(case: dict, peer: str) -> float | None:
    return ((case.get("peers") or {}).get(peer) or {}).get("us")


BEST = "the best peer"   # a goal's peer: whichever peer was fastest (and correct) in this run


def best_peer(case: dict) -> tuple[str, float] | None:
    """(name, µs) of the fastest peer whose output was right, or None."""
    timed = [(entry["us"], name) for name, entry in (case.get("peers") or {}).items()
             if entry.get("us") is not None and entry.get("ok", True)]
    if not timed:
        return None
    us, name = min(timed)
    return name, us


def case_copy_gbps(case: dict, copy_gbps: float | None) -> tuple[float | None, bool]:
    """(the copy rate a case's rate is divided by, whether it is the case's own): a copy of the
    case's own floor bytes timed in the same run where there is one (suite._case_copy), else the
    device copy (512 MiB moved; a run before the per-case copies)."""
    own = (case.get("copy") or {}).get("gbps")
    return (own, True) if own else (copy_gbps, False)


def copy_fraction(case: dict, copy_gbps: float | None) -> float | None:
    us, (gbps, _) = ours_us(case), case_copy_gbps(case, copy_gbps)
    if not (us and gbps and case.get("bytes")):
        return None
    return case["bytes"] / (us * 1e3) / gbps


def evaluate_goals(case: dict, copy_gbps: float | None, run_cases: dict[str, dict] | None = None) \
        -> list[tuple[str, str, bool | None]]:
    """(goal, what this run measured, met: True/False, None when it could not be measured);
    `run_cases` (name -> case of the same run) for a goal against another case (`baseline`)."""
    goal, us = case.get("goal") or {}, ours_us(case)
    verdicts = []
    if goal.get("baseline"):
        other, slower = goal["baseline"]
        theirs = ours_us((run_cases or {}).get(other) or {})
        cost = us / theirs - 1 if (theirs and us) else None
        verdicts.append((f"≤ {slower:.0%} slower than {other}", "n/a" if cost is None else f"{cost:+.1%}",
                         None if cost is None else cost <= slower))
    if goal.get("copy_fraction") is not None:
        fraction = copy_fraction(case, copy_gbps)
        own = case_copy_gbps(case, copy_gbps)[1]
        measured = "n/a" if fraction is None else f"{fraction:.1%} of {'a copy of its bytes' if own else 'copy'}"
        verdicts.append((f"≥ {goal['copy_fraction']:.0%} of copy", measured,
                         None if fraction is None else fraction >= goal["copy_fraction"]))
    for peer, minimum in goal.get("versus") or ():
        if peer == BEST:
            best = best_peer(case)
            peer, theirs = (f"{BEST} ({best[0]})", best[1]) if best else (BEST, None)
        else:
            theirs = peer_us(case, peer)
        ratio = theirs / us if (theirs and us) else None
        wanted = f"≥ {minimum:.0%} of {peer}" if minimum < 1 else f"≥ {minimum:.2f}× {peer}"
        measured = "n/a" if ratio is None else (f"{ratio:.1%} of {peer}" if minimum < 1 else f"{ratio:.2f}× {peer}")
        verdicts.append((wanted, measured, None if ratio is None else ratio >= minimum))
    if goal.get("max_us") is not None:
        verdicts.append((f"≤ {goal['max_us']:g} µs", "n/a" if us is None else f"{us:.1f} µs",
                         None if us is None else us <= goal["max_us"]))
    if goal.get("kernels") is not None:
        kernels = case.get("kernels")
        verdicts.append((f"{goal['kernels']} kernel", f"{kernels} kernel(s)",
                         None if kernels is None else kernels == goal["kernels"]))
    return verdicts


# --- the markdown section -------------------------------------------------------------------
MODEL_WITHIN = 0.25   # issue 17: the hardware model within 25% of the measured time, every suite kernel


def model_ratio(case: dict) -> float | None:
    """Measured over predicted (the module's run() at its default configs, docs/tuning.md's model)."""
    predicted, measured = (case.get("model") or {}).get("us"), ours_us(case)
    return measured / predicted if predicted and measured else None


def model_met(case: dict) -> bool | None:
    ratio = model_ratio(case)
    return None if ratio is None else abs(ratio - 1) <= MODEL_WITHIN


def _model(case: dict) -> str:
    model = case.get("model") or {}
    if model.get("error"):
        return f"not modelled: {_short(model['error'], 60)}"
    if model.get("us") is None:
        return "—"
    bounds = sorted({k["bound"] for k in model.get("kernels", {}).values()})
    ratio = model_ratio(case)
    measured = f", measured {ratio:.2f}×" if ratio is not None else ""
    return f"{model['us']:.1f} µs ({', '.join(bounds)}){measured}"


def _rate(case: dict, us: float | None) -> str:
    if not us:
        return ""
    if case.get("flops"):
        return f"{case['flops'] / (us * 1e6):.0f} TFLOP/s"
    return f"{case['bytes'] / (us * 1e3) / 1e3:.2f} TB/s"


def _time(entry: dict | None) -> str:
    if not entry:
        return "—"
    if entry.get("error"):
        return f"failed: {_short(entry['error'])}"
    if entry.get("skipped"):
        return f"skipped ({entry['skipped']})"
    if entry.get("us") is None:
        return "—"
    wrong = "" if entry.get("ok", True) else " **wrong**"
    return f"{entry['us']:.1f} µs{wrong}"


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _variants(case: dict) -> str:
    ran = case.get("variants") or {}
    if not ran:
        return "pointers"
    kinds = sorted({value.split(":")[0] for value in ran.values()})
    return ", ".join(kinds)


def _correct(case: dict) -> str:
    ours = case.get("ours") or {}
    errors = ours.get("rel_error") or {}
    if not errors:
        return "—"
    worst = max(errors.values())
    return f"{'yes' if ours.get('ok') else '**no**'} ({worst:.1e})"


def _peers(case: dict) -> str:
    us = ours_us(case)
    parts = []
    for name, entry in (case.get("peers") or {}).items():
        text = _time(entry)
        if us and entry.get("us"):
            text += f" ({entry['us'] / us:.2f}×)"
        parts.append(f"{name} {text}")
    return "; ".join(parts) or "—"


def _goals(case: dict, copy_gbps: float | None, run_cases: dict[str, dict] | None = None) -> str:
    marks = {True: "met", False: "**missed**", None: "not measured"}
    return "; ".join(f"{wanted}: {measured}, {marks[met]}"
                     for wanted, measured, met in evaluate_goals(case, copy_gbps, run_cases))


def _row(case: dict, copy_gbps: float | None, run_cases: dict[str, dict] | None = None) -> str:
    if case.get("skipped") or case.get("error"):
        why = case.get("skipped") or case.get("error")
        return f"| {case['name']} | {case.get('kernels', '—')} | | | not run: {_short(why, 160)} | | | | | |"
    ours = case.get("ours") or {}
    return (f"| {case['name']} | {case.get('kernels', '—')} | {_variants(case)} | {_correct(case)} | "
            f"{_time(ours)} | {_rate(case, ours.get('us'))} | {_time(case.get('pointers'))} | {_peers(case)} | "
            f"{_model(case)} | {_goals(case, copy_gbps, run_cases)} |")


def section(run: dict) -> str:
    """The generated docs section for one run."""
    meta = run.get("meta", {})
    copy_gbps = (run.get("copy") or {}).get("gbps")
    where = "the CPU, Triton's interpreter, tiny sizes" if meta.get("smoke") else "on the GPU, torch + triton only"
    lines = [
        f"### {meta.get('date', '?')}, {meta.get('device', '?')}, torch {meta.get('torch', '?')}, "
        f"Triton {meta.get('triton', '?')}",
        "",
        "Generated from the run's JSON by `python benchmarks/suite.py table`; every ratio was measured in this run.",
        "",
        "```sh",
        f"python benchmarks/suite.py generate {meta.get('folder', 'DIR')}   # here, with TVM",
        f"{_portable(meta.get('command', 'python benchmarks/suite.py run DIR OUT'))}   # {where}",
        "```",
        "",
        _copy_line(run.get("copy") or {}),
        f"Whole run: {meta['total_s']:.0f} s." if meta.get("total_s") is not None else "",
        "Times are medians of `triton.testing.do_bench` (L2 flushed before each call; ours is the module's "
        "`run()`, argument checks included), the best of the run's rounds. Rates count floor bytes (each "
        "input read once, each output written once) or 2·M·N·K-style flops (causal attention: half). "
        "\"pointers only\" is the same module with its tensor-descriptor variants switched off "
        "(`USE_DESCRIPTORS = False`, the sm_80 path); \"ran\" is what the launcher chose. Correctness: "
        "‖out − ref‖ / ‖ref‖ against torch in float64, before any timing. \"model\" is the hardware model's "
        f"time of run() at the default configs on the {_model_gpus(run)} (each kernel compiled ahead of time for its "
        "registers; `tir-triton model`; priced for the GPU the run was on where the model's table has it), its "
        "bounds, and the measured time over it.",
        "",
        "| case | kernels | ran | correct (rel. error) | ours | rate | pointers only | peers (their time / ours) "
        "| model | goals |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    run_cases = {case["name"]: case for case in run.get("cases", [])}
    lines += [_row(case, copy_gbps, run_cases) for case in run.get("cases", [])]
    lines += ["", _model_summary(run.get("cases", []))]
    return "\n".join(lines) + "\n"


def _copy_line(copy: dict) -> str:
    if not copy.get("gbps"):
        return "Device copy: not measured."
    moved = f", {copy['bytes'] / 2**20:.0f} MiB" if copy.get("bytes") else ""
    return (f"Device copy (read + write{moved}): {copy['gbps'] / 1e3:.2f} TB/s. A memory-bound case's goal divides "
            "its rate by a copy of its own floor bytes timed beside it (\"of a copy of its bytes\"; smaller copies "
            "reach less), else by this one (\"of copy\").")


def _portable(command: str) -> str:
    """The run's command (`... run FOLDER OUT ...`) with OUT, where absolute (the GPU machine's output
    folder), as OUT/<its last name>: what a reader types, not a folder of that machine."""
    words = command.split(" ")
    at = words.index("run") + 2 if "run" in words else len(words)
    if at < len(words) and os.path.isabs(words[at]):
        words[at] = f"OUT/{os.path.basename(words[at].rstrip('/'))}"
    return " ".join(words)


def _model_gpus(run: dict) -> str:
    """The GPUs the run's models were priced for ("H200" in a run from before the run priced them)."""
    gpus = sorted({(case.get("model") or {}).get("gpu") for case in run.get("cases", [])} - {None})
    return " and ".join(gpus) or "H200"


def _model_summary(cases: list[dict]) -> str:
    judged = [(case["name"], model_met(case), model_ratio(case)) for case in cases if model_met(case) is not None]
    if not judged:
        return "The hardware model: no case has both a prediction and a measurement."
    missed = [f"{name} ({ratio:.2f}×)" for name, met, ratio in judged if not met]
    text = (f"The hardware model within {MODEL_WITHIN:.0%} of the measured time: "
            f"{len(judged) - len(missed)} of {len(judged)} cases")
    return text + (f"; outside: {', '.join(missed)}." if missed else ".")


def rewrite_docs(run: dict, docs: str = DOCS) -> None:
    """Replace the generated section of docs/benchmarks.md (markers included) with this run's."""
    with open(docs) as handle:
        text = handle.read()
    block = f"{BEGIN}\n{section(run)}{END}"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(docs, "w") as handle:
        handle.write(text)


def keep_results(path: str, run: dict, folder: str = RESULTS) -> str:
    """Copy the run's JSON to benchmarks/results/<date>-<device>-suite.json."""
    meta = run.get("meta", {})
    device = re.sub(r"[^a-z0-9]+", "-", str(meta.get("device", "gpu")).lower()).strip("-")
    target = os.path.join(folder, f"{meta.get('date', 'undated')}-{device}-suite.json")
    os.makedirs(folder, exist_ok=True)
    if os.path.abspath(path) != os.path.abspath(target):
        shutil.copyfile(path, target)
    return target


def load(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)
