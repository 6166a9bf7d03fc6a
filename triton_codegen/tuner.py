"""The tuner: a model-guided search over each kernel's space, timing the whole run(), then a
never-slower confirmation against the default.

The timer is injected: `timer(assignment) -> milliseconds`, where an assignment gives every
kernel of the module one config, times the module's run() with those configs
(`gpu_timing.RunTimer` on a GPU; tests pass a fake; the GPU campaign also replays the exhaustive
search's timings). A config that cannot run times as math.inf and costs no evaluation.

The search, within `budget` timed evaluations (25 by default):
1. the default assignment (what the module runs today) is timed first;
2. the rest of the budget is split between kernels by their predicted share of the run; kernels
   are searched one at a time, largest share first, the others held at their best so far, so a
   multi-kernel program is tuned end to end (each timing is the whole run());
3. a kernel's first INITIAL_DESIGN candidates are the model's best predictions (its space is
   already ranked, search_space.py);
4. each next candidate is the one a cost model fitted to this kernel's measurements rates best:
   scikit-learn's ExtraTreesRegressor of log(measured / predicted) on the config's settings (log2)
   and the model's prediction, then the lowest corrected prediction minus EXPLORATION times the
   spread across trees (a lower confidence bound, so uncertain regions get tried).

Why scikit-learn's extra trees rather than optuna's TPE: the space is a finite list that the model
has already pruned and ranked, and the model's prediction is the strongest feature. A regressor
takes both as they are (candidates as rows, the prediction as a column); TPE samples its own
parameter space, cannot be handed a ranked list or told that most of the product space is illegal,
and learns nothing from the model. Extra trees fit 25 points in milliseconds, are deterministic
under a seed, need no feature scaling, and the spread between trees is the uncertainty the search
explores with. scikit-learn is also already on the GPU machines' image.

Never slower: the FINALISTS best assignments found are timed again with the default, `rounds`
rounds interleaved (the order rotates every round, so drifting clocks hit everyone alike). The
noise is the spread of the default's repeats, (max − min) / median. A finalist replaces the default
only if its median is faster than the default's by more than max(noise, min_gain); otherwise the
default stays. Confirmation timings are extra to the budget (rounds × (finalists + 1)).

Deterministic: the same timings and seed give the same choices (no set iteration, ties by order).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from .search_space import KernelSpace

Assignment = dict[str, dict]
Timer = Callable[[Assignment], float]

BUDGET = 25
INITIAL_DESIGN = 4
EXPLORATION = 0.5
FINALISTS = 3
ROUNDS = 5
MIN_GAIN = 0.01
TREES = 32


def assignment_key(assignment: Assignment) -> str:
    return json.dumps(assignment, sort_keys=True)


@dataclass
class TuneResult:
    default: Assignment
    chosen: Assignment
    default_ms: float
    chosen_ms: float
    noise: float                # (max − min) / median of the default's confirmation repeats
    gain: float                 # 1 − chosen / default (0 when the default is kept)
    kept_default: bool
    evaluations: list[dict]     # the search's timings in order: assignment, ms, predicted_ms
    confirmation: dict[str, list[float]]
    spaces: dict[str, dict]     # per kernel: legal, runnable, searched
    seconds: float
    cache_hit: bool = False
    finalists: list[Assignment] = field(default_factory=list)

    @property
    def timed_evaluations(self) -> int:
        return sum(1 for e in self.evaluations if math.isfinite(e["ms"]))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "TuneResult":
        return cls(**data)


def tune(spaces: list[KernelSpace], timer: Timer, *, budget: int = BUDGET, seed: int = 0,
         finalists: int = FINALISTS, rounds: int = ROUNDS, min_gain: float = MIN_GAIN,
         progress: bool = False, label: str = "tune") -> TuneResult:
    """Search the spaces with `timer`, confirm against the default, return the choice."""
    started = time.perf_counter()
    bar = _progress(progress, label, budget + rounds * (finalists + 1))
    history, best = search(spaces, timer, budget=budget, seed=seed, finalists=finalists, bar=bar)
    default = {space.name: space.default for space in spaces}
    outcome = confirm(default, best, timer, rounds=rounds, min_gain=min_gain, bar=bar)
    bar.close()
    spaces_info = {s.name: {"legal": s.legal, "runnable": s.runnable, "searched": len(s.configs)} for s in spaces}
    return TuneResult(default=default, evaluations=history, spaces=spaces_info,
                      seconds=time.perf_counter() - started, finalists=best, **outcome)


def search(spaces: list[KernelSpace], timer: Timer, *, budget: int = BUDGET, seed: int = 0,
           finalists: int = FINALISTS, bar=None) -> tuple[list[dict], list[Assignment]]:
    """The model-guided search alone: (every timing in order, the `finalists` fastest assignments
    other than the default)."""
    state = _Search(spaces, timer, seed, bar or _NoBar())
    default = {space.name: space.default for space in spaces}
    state.evaluate(default)
    shares = _budget_split(spaces, budget - 1)
    for space, share in sorted(zip(spaces, shares), key=lambda item: -_weight(item[0])):
        if share:
            state.search_kernel(space, share)
    return state.history, state.best_assignments(default, finalists)


class _Search:
    def __init__(self, spaces: list[KernelSpace], timer: Timer, seed: int, bar):
        self.spaces = spaces
        self.timer = timer
        self.seed = seed
        self.bar = bar
        self.current = {space.name: space.default for space in spaces}
        self.measured: dict[str, float] = {}
        self.assignments: dict[str, Assignment] = {}
        self.history: list[dict] = []

    def evaluate(self, assignment: Assignment) -> float:
        key = assignment_key(assignment)
        if key not in self.measured:
            ms = self.timer(assignment)
            self.measured[key] = ms
            self.assignments[key] = assignment
            self.history.append({"assignment": assignment, "ms": ms, "predicted_ms": self.predicted_ms(assignment)})
            if math.isfinite(ms):
                self.bar.update(1)
                best = min(m for m in self.measured.values())
                self.bar.set_postfix_str(f"best {best:.4f} ms")
        return self.measured[key]

    def predicted_ms(self, assignment: Assignment) -> float | None:
        total = 0.0
        for space in self.spaces:
            prediction = space.predictions[space.configs.index(assignment[space.name])]
            if prediction is None:
                return None
            total += prediction.ms
        return total

    def search_kernel(self, space: KernelSpace, budget: int) -> None:
        """Time up to `budget` of this kernel's candidates, the other kernels at their current best."""
        def timed(index: int) -> float:
            return self.evaluate({**self.current, space.name: space.configs[index]})

        times = {space.configs.index(self.current[space.name]): timed(space.configs.index(self.current[space.name]))}
        model = _CostModel(space, self.seed)
        spent = 0
        while spent < budget and len(times) < len(space.configs):
            index = model.next_candidate(times, INITIAL_DESIGN)
            times[index] = timed(index)
            spent += math.isfinite(times[index])
        best = min(times, key=lambda i: (times[i], i))
        if math.isfinite(times[best]):
            self.current[space.name] = space.configs[best]

    def best_assignments(self, default: Assignment, count: int) -> list[Assignment]:
        """The `count` fastest assignments timed, other than the default (ties: the earlier timed)."""
        ranked = sorted((ms, order, key) for order, (key, ms) in enumerate(self.measured.items()) if math.isfinite(ms))
        best = [self.assignments[key] for _ms, _order, key in ranked if self.assignments[key] != default]
        return best[:count]


class _CostModel:
    """Log-time corrections to the hardware model, learnt from one kernel's measurements."""

    def __init__(self, space: KernelSpace, seed: int):
        self.space = space
        self.seed = seed
        keys = sorted({key for config in space.configs for key in config})
        self.prior = [math.log(p.seconds) if p is not None else 0.0 for p in space.predictions]
        self.features = [[math.log2(config[k]) if config.get(k) else -1.0 for k in keys] + [prior]
                         for config, prior in zip(space.configs, self.prior)]

    def next_candidate(self, times: dict[int, float], initial: int) -> int:
        """The next index to time: model order for the first `initial`, then the lowest bound."""
        untimed = [i for i in range(len(self.space.configs)) if i not in times]
        finite = {i: ms for i, ms in times.items() if math.isfinite(ms)}
        if len(times) <= initial or len(finite) < 3:
            return untimed[0]  # the space is ranked by predicted time
        from sklearn.ensemble import ExtraTreesRegressor

        rows = sorted(finite)
        targets = [math.log(finite[i]) - self.prior[i] for i in rows]
        forest = ExtraTreesRegressor(n_estimators=TREES, random_state=self.seed)
        forest.fit([self.features[i] for i in rows], targets)
        candidates = [self.features[i] for i in untimed]
        per_tree = [tree.predict(candidates) for tree in forest.estimators_]
        scores = []
        for column, index in enumerate(untimed):
            values = [row[column] for row in per_tree]
            spread = statistics.pstdev(values)
            scores.append((self.prior[index] + statistics.fmean(values) - EXPLORATION * spread, index))
        return min(scores)[1]


def confirm(default: Assignment, finalists: list[Assignment], timer: Timer, *, rounds: int = ROUNDS,
            min_gain: float = MIN_GAIN, bar=None) -> dict:
    """Time the default and the finalists again, interleaved; keep the default unless a finalist
    is faster beyond the noise. Returns TuneResult's chosen, default_ms, chosen_ms, noise, gain,
    kept_default and confirmation."""
    if rounds < 2:
        raise ValueError("confirm needs at least 2 rounds: the noise is the spread of the default's repeats")
    bar = bar or _NoBar()
    contenders = [default] + finalists
    times: list[list[float]] = [[] for _ in contenders]
    for round_ in range(rounds):
        order = list(range(len(contenders)))
        shift = round_ % len(order)
        for index in order[shift:] + order[:shift]:
            times[index].append(timer(contenders[index]))
            bar.update(1)
    medians = [statistics.median(t) if t and all(math.isfinite(x) for x in t) else math.inf for t in times]
    default_ms = medians[0]
    noise = (max(times[0]) - min(times[0])) / default_ms if math.isfinite(default_ms) and default_ms > 0 else 0.0
    best = min(range(len(contenders)), key=lambda i: (medians[i], i))
    gain = 1.0 - medians[best] / default_ms if best and math.isfinite(default_ms) else 0.0
    keep = best == 0 or gain <= max(noise, min_gain)
    chosen = 0 if keep else best
    labels = ["default"] + [f"finalist {i}" for i in range(1, len(contenders))]
    return {"chosen": contenders[chosen], "default_ms": default_ms, "chosen_ms": medians[chosen], "noise": noise,
            "gain": 0.0 if keep else gain, "kept_default": keep,
            "confirmation": {label: t for label, t in zip(labels, times)}}


def _weight(space: KernelSpace) -> float:
    """A kernel's share of the run by the model (1 without one)."""
    return space.predictions[0].seconds if space.predictions[0] is not None else 1.0


def _budget_split(spaces: list[KernelSpace], budget: int) -> list[int]:
    """Evaluations per kernel: proportional to predicted time, at most its candidates but one (its
    current config is timed already), the remainder to the heaviest kernels that can take it."""
    caps = [len(space.configs) - 1 for space in spaces]
    weights = [_weight(space) if cap else 0.0 for space, cap in zip(spaces, caps)]
    total = sum(weights)
    if budget <= 0 or not total:
        return [0] * len(spaces)
    shares = [min(cap, int(budget * w / total)) for cap, w in zip(caps, weights)]
    order = sorted(range(len(spaces)), key=lambda i: (-weights[i], i))
    while sum(shares) < budget and any(shares[i] < caps[i] for i in order):
        for i in order:
            if shares[i] < caps[i] and sum(shares) < budget:
                shares[i] += 1
    return shares


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(enabled: bool, label: str, total: int):
    """A tqdm bar: timings done of the budget plus confirmation, best so far, time left."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="timing", leave=False)
