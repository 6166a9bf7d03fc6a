"""The fusion record: what LoopFusion decided, in one typed form stored in the IR.

LoopFusion (loop_fusion.py, recompute.py) writes one `FusionStep` per decision, taken or refused,
as the root block's "fusion.decisions" annotation (a list of dicts, in the order decided); nothing
else writes it. Readers:

  Tiling (tiling_plan.py)       the blocks a recompute copied (`recomputed_blocks`): a copy beside
                                an online loop is walked in that loop's tiles; the blocks a producer
                                streams into (`streaming_blocks`): their reduction loop is walked in tiles
  the report (report/decisions) every step, its text and the bytes it saves
  the contract check            each step against the IR (verify_contract.py)

A step says what was done (`action`), to which blocks (`blocks`), for whom (`into`), which
intermediates no longer reach memory (`buffers`), which outputs the consumer now reads where they are
computed while they are still stored (`stored`: a training forward's saved statistics, which the fused
walk keeps in registers and stores once at its end), with how many shared loops (`depth`), the
global-memory bytes that saves (`bytes_saved`: the intermediates' write and read, the stored outputs'
read; None for a symbolic size or a refusal), and why it was taken or refused (`reason`). `text` is the line a
person reads; nobody parses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import tirx

from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.dtypes import element_bytes
from tir_passes.infra.pass_util import replace_block, root_block, static_int, with_root_block

FUSION_KEY = "fusion.decisions"
INLINE, RECOMPUTE, FUSE, MOVE, MERGE, STREAM = "inline", "recompute", "fuse", "move", "merge", "stream"
SHARE = "share"
ACTIONS = (INLINE, RECOMPUTE, FUSE, MOVE, MERGE, STREAM, SHARE)
_WRITER = "LoopFusion"


@dataclass(frozen=True)
class FusionStep:
    action: str                  # inline | recompute | fuse | move | merge | stream | share
    blocks: tuple[str, ...]      # what: the blocks inlined, recomputed, fused or moved (merged)
    into: tuple[str, ...] = ()   # for whom: the consumer (fuse), the producer nest (move, merge), the readers' nests
    buffers: tuple[str, ...] = ()    # the intermediates that no longer reach memory (taken)
    taken: bool = True
    reason: str = ""             # why taken, or why refused
    bytes_saved: int | None = None   # taken, static shapes: global-memory bytes saved
    depth: int = 0               # fuse, move, merge: the shared leading loops
    copies: tuple[str, ...] = ()     # recompute: the copies' blocks, one per later reader nest
    stored: tuple[str, ...] = ()     # fuse, move, merge: outputs read in registers by the consumer, still stored

    @property
    def text(self) -> str:
        """The decision as a person reads it in the dump and the report."""
        what, into = ", ".join(self.blocks), ", ".join(self.into)
        if not self.taken:
            if self.action == INLINE:
                return f"keep {what}: {self.reason}"
            if self.action == RECOMPUTE:
                return f"not recomputed: {what}: {self.reason}"
            if self.action == SHARE:
                return f"not shared: {what} with {into}: {self.reason}"
            return f"not fused: {what} -> {into}: {self.reason}"
        saved = f"saves {self.bytes_saved} bytes of global traffic" if self.bytes_saved is not None \
            else "saves the global round trip"
        kept = ", ".join(self.buffers)
        if self.action == INLINE:
            return f"inline {what} into its consumers ({self.reason}); {kept} never reaches memory: {saved}"
        if self.action == RECOMPUTE:
            return f"recompute {what} for the later readers of {kept} ({', '.join(self.copies)}): {self.reason}"
        if self.action == SHARE:
            return (f"share {into} with the nest of {what} over {self.depth} shared loop(s): {self.reason}; "
                    f"{kept} and {what} dropped")
        if self.action == STREAM:
            return (f"stream {what} into {into}: one element per step of its reduction loop (walked in tiles); "
                    f"{', '.join(self.buffers)} stays in registers: {saved}")
        how = {FUSE: "fuse", MOVE: "move", MERGE: "merge the nest of"}[self.action]
        if not self.buffers and not self.stored:   # a merge that only makes the next fusion possible
            return f"{how} {what} into the nest of {into} over {self.depth} shared axis(es): {self.reason}"
        stay = "stays" if len(self.buffers) == 1 and self.action == FUSE else "stay"
        stored = f"; {', '.join(self.stored)} read where computed and stored once" if self.stored else ""
        kept_text = f"{kept} {stay} in registers" if self.buffers else "no intermediate"
        return (f"{how} {what} into the nest of {into} over {self.depth} shared axis(es); "
                f"{kept_text}{stored}: {saved}")


def saved_bytes(*buffers) -> int | None:
    """The global traffic of the intermediates' write and read (None: a symbolic size): what a
    step that keeps them off memory saves (LoopFusion writes it, the contract check recomputes it)."""
    total = 0
    for buf in buffers:
        dims = [static_int(dim) for dim in buf.shape]
        if None in dims:
            return None
        total += 2 * math.prod(dims) * element_bytes(buf.dtype)
    return total


def read_bytes(*buffers) -> int | None:
    """The global traffic of reading the buffers once (None: a symbolic size): what a step saves for an
    output it reads where computed (its write stays)."""
    both = saved_bytes(*buffers)
    return None if both is None else both // 2


def step_bytes(kept: list, stored: list) -> int | None:
    """What a fusion step saves: the kept intermediates' write and read, the stored outputs' read (None: a
    symbolic size). LoopFusion writes it, the record check recomputes it."""
    both, read = saved_bytes(*kept), read_bytes(*stored)
    return None if both is None or read is None else both + read


def _value(step: FusionStep) -> dict:
    value: dict = {"action": step.action, "blocks": list(step.blocks), "taken": step.taken, "reason": step.reason}
    for key, items in (("into", step.into), ("buffers", step.buffers), ("copies", step.copies),
                       ("stored", step.stored)):
        if items:
            value[key] = list(items)
    if step.bytes_saved is not None:
        value["bytes_saved"] = step.bytes_saved
    if step.depth:
        value["depth"] = step.depth
    return value


def write_fusion(func: tirx.PrimFunc, steps: list[FusionStep]) -> tirx.PrimFunc:
    """`func` with the steps as its root block's record (the only writer)."""
    root = root_block(func)
    annotations = {**dict(root.annotations), FUSION_KEY: [_value(step) for step in steps]}
    return with_root_block(func, replace_block(root, annotations=annotations))


def _names(raw, key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, ())
    if isinstance(value, str) or not all(isinstance(name, str) for name in value):
        raise ContractError(where, f'fusion step "{key}" must be a list of names, not {value!r}', _WRITER)
    return tuple(str(name) for name in value)


def _step(raw, where: str) -> FusionStep:
    if not hasattr(raw, "items"):
        raise ContractError(where, f"a fusion step must be a dict, not {raw!r}", _WRITER)
    fields = dict(raw.items())
    action, taken, reason = fields.get("action"), fields.get("taken"), fields.get("reason", "")
    if action not in ACTIONS:
        raise ContractError(where, f"fusion action must be one of {', '.join(ACTIONS)}, not {action!r}", _WRITER)
    if not isinstance(taken, bool) or not isinstance(reason, str):
        raise ContractError(where, f'a fusion step needs a boolean "taken" and a text "reason", not {raw!r}',
                            _WRITER)
    saved, depth = fields.get("bytes_saved"), fields.get("depth", 0)
    if saved is not None and (not isinstance(saved, int) or saved < 0 or not taken):
        raise ContractError(where, f"bytes_saved {saved!r} must be a count of bytes of a taken step", _WRITER)
    if not isinstance(depth, int) or depth < 0:
        raise ContractError(where, f"depth must be a count of loops, not {depth!r}", _WRITER)
    blocks = _names(fields, "blocks", where)
    if not blocks:
        raise ContractError(where, "a fusion step names the blocks it acts on", _WRITER)
    return FusionStep(str(action), blocks, _names(fields, "into", where), _names(fields, "buffers", where), taken,
                      str(reason), saved, depth, _names(fields, "copies", where), _names(fields, "stored", where))


def fusion_steps(func: tirx.PrimFunc) -> tuple[FusionStep, ...]:
    """LoopFusion's steps, in the order it took them (empty when it decided nothing)."""
    root = root_block(func)
    raw = root.annotations.get(FUSION_KEY) if root.annotations else None
    if raw is None:
        return ()
    if isinstance(raw, str) or not hasattr(raw, "__len__"):
        raise ContractError("the root block", f'"{FUSION_KEY}" must be a list of fusion steps, not {raw!r}', _WRITER)
    return tuple(_step(item, f"the root block's fusion step {index}") for index, item in enumerate(raw))


def recomputed_blocks(func: tirx.PrimFunc) -> frozenset[str]:
    """The blocks that compute again a contraction another nest also computes (LoopFusion's recompute)."""
    return frozenset(copy for step in fusion_steps(func) if step.action == RECOMPUTE and step.taken
                     for copy in step.copies)


def streaming_blocks(func: tirx.PrimFunc) -> frozenset[str]:
    """The consumers a contraction was streamed into (LoopFusion's stream): the reduction loop that
    carries the producer's axis is walked tile by tile."""
    return frozenset(name for step in fusion_steps(func) if step.action == STREAM and step.taken for name in step.into)
