"""The `contract` check's part for the root block's records: LoopFusion's fusion record and
BufferLayout's layout record (fusion_record.py, layout_record.py) parse, name blocks and buffers
that exist, and state facts that are true of the IR, after every pass from their writer on:

- a taken inline: the block is gone (inlined into its consumers);
- a taken fuse, move or merge: its blocks and the blocks it joined are one top-level nest (one
  kernel), the intermediates it keeps off memory are root allocations, and the bytes it saves are
  their write and read (fusion_record.saved_bytes); except a merge of a row's readers with the
  online statistics SplitOnlineRows later split apart (its OnlineSplit mark names the combined
  maximum among the step's buffers: the split's record says it undid the merge);
- a taken recompute: the block and its copies exist, each copy writing a root allocation of its own;
- a taken share: the dropped copy and its buffer are gone, the kept copy exists; from then on the earlier
  steps' names of the dropped copy and buffer stand for the kept ones;
- a refusal: the blocks it names exist;
- a layout decision names a root allocation; a permuted one has its old shape permuted.
"""

from __future__ import annotations

from tvm import tirx

from tir_passes.analyses.nest import blocks_under, written_buffers
from tir_passes.contracts.fusion_record import INLINE, RECOMPUTE, SHARE, FusionStep, fusion_steps, step_bytes
from tir_passes.contracts.layout_record import layout_decisions
from tir_passes.contracts.online_contract import online_split
from tir_passes.contracts.tile_contract import ContractError
from tir_passes.infra.pass_util import root_block, static_int, top_level_statements


def record_problems(func: tirx.PrimFunc) -> list[str]:
    try:
        steps, layouts = fusion_steps(func), layout_decisions(func)
    except ContractError as err:
        return [str(err)]
    nests = {block.name_hint: index for index, stmt in enumerate(top_level_statements(func))
             for block in blocks_under(stmt)}
    allocated = {buf.name: buf for buf in root_block(func).alloc_buffers}
    shares = [step for step in steps if step.action == SHARE and step.taken]
    problems = [f"share step ({step.blocks[0]} with {step.into[0]}): {problem}" for step in shares
                for problem in _share_problems(step, nests, allocated)]
    writes = {block.name_hint: written_buffers(block) for block in blocks_under(root_block(func).body)}
    for step in shares:   # the earlier steps name the dropped copy and its buffer: they stand for the kept ones
        if step.into[0] in nests:
            nests[step.blocks[0]] = nests[step.into[0]]
            allocated[step.buffers[0]] = writes[step.into[0]][0]
    split = {mark.combined for block in blocks_under(func.body) if (mark := online_split(block)) is not None}
    problems += [f"fusion step {index} ({step.action} {', '.join(step.blocks)}): {problem}"
                 for index, step in enumerate(steps) if not split.intersection(step.buffers) and step not in shares
                 for problem in _step_problems(func, step, nests, allocated, shares)]
    for decision in layouts:
        buf = allocated.get(decision.buffer)
        if buf is None:
            problems.append(f"layout decision for {decision.buffer}: no root allocation has that name")
        elif decision.permutation is not None:
            shape = tuple(static_int(dim) for dim in buf.shape)
            expected = tuple(decision.old_shape[p] for p in decision.permutation)
            if shape != expected:
                problems.append(f"layout decision for {decision.buffer}: its shape is {shape}, not the old shape "
                                f"{decision.old_shape} permuted by {decision.permutation} = {expected}")
    return problems


def _missing(names, nests: dict[str, int]) -> list[str]:
    return [f"names block {name}, which does not exist" for name in names if name not in nests]


def _share_problems(step: FusionStep, nests: dict[str, int], allocated: dict) -> list[str]:
    problems = [f"names block {step.into[0]}, which does not exist"] if step.into[0] not in nests else []
    if step.blocks[0] in nests:
        problems.append(f"block {step.blocks[0]} was shared but still exists")
    if step.buffers[0] in allocated:
        problems.append(f"buffer {step.buffers[0]} was dropped but is still a root allocation")
    return problems


def _step_problems(func, step: FusionStep, nests: dict[str, int], allocated: dict, shares=()) -> list[str]:
    if not step.taken:
        return _missing((*step.blocks, *step.into), nests)
    if step.action == INLINE:
        return [f"block {name} was inlined but still exists" for name in step.blocks if name in nests]
    if step.action == RECOMPUTE:
        dropped = {share.blocks[0] for share in shares}
        return _missing((*step.blocks, *step.copies), nests) + _copy_problems(func, step, allocated, dropped)
    problems = _missing((*step.blocks, *step.into), nests)
    if problems:
        return problems
    joined = sorted({nests[name] for name in (*step.blocks, *step.into)})
    if len(joined) > 1:
        problems.append(f"{', '.join((*step.blocks, *step.into))} are in nests {joined}, not one nest")
    kept = [allocated.get(name) for name in step.buffers]
    params = {p.name: p for p in func.params if tirx.is_buffer_var(p)}
    stored = [params.get(name) for name in step.stored]
    if None in kept:
        problems.append(f"keeps {', '.join(step.buffers)} in registers, but not all are root allocations")
    elif None in stored:
        problems.append(f"reads {', '.join(step.stored)} where computed and stores them, but not all are "
                        "parameters (an intermediate read in registers belongs in `buffers`)")
    elif step_bytes(kept, stored) != step.bytes_saved:
        problems.append(f"says it saves {step.bytes_saved} bytes; the write and read of {', '.join(step.buffers)} "
                        f"and the read of {', '.join(step.stored) or 'no output'} are {step_bytes(kept, stored)}")
    return problems


def _copy_problems(func, step: FusionStep, allocated: dict, dropped=frozenset()) -> list[str]:
    """Each copy writes a root allocation of its own (a copy a share step dropped: none, it is gone)."""
    written = {block.name_hint: [buf.name for buf in written_buffers(block)]
               for block in blocks_under(root_block(func).body)}
    problems = []
    live = [copy for copy in step.copies if copy not in dropped]
    targets = [written.get(copy, []) for copy in live]
    for copy, target in zip(live, targets):
        if len(target) != 1 or target[0] not in allocated or target[0] in step.buffers:
            problems.append(f"copy {copy} must write one intermediate of its own, not {target}")
    if len({tuple(t) for t in targets}) != len(targets):
        problems.append(f"copies {', '.join(live)} write the same buffer")
    return problems
