"""The online-softmax contract: what OnlineSoftmax decided, in one typed form stored in the IR.

OnlineSoftmax (online_softmax.py) fuses a max reduction and the sums that read it into one loop
over their reduction axis. Per element that loop is ordinary TIR (TVM's llvm build runs it and
the numerics check compares it with the input); what needs a decision is that the lowering may
run it one *tile* of the axis at a time. That holds because of an identity the pass proved, not
because of the loop's shape, so the pass marks the blocks and the later stages read the marks:

  block annotation "online.shift"    OnlineShift    the max block: besides the running maximum
                                                    `shift`, it keeps `previous`, the maximum
                                                    before the current element; `streamed`: the
                                                    loop is walked in tiles (Tiling steps it with
                                                    a serial loop), which is why the pass took it;
                                                    `first_finite`: the first element is proven
                                                    finite for every row (leading_element.py), so
                                                    the sums do not restart where it was -inf
  block annotation "online.rescale"  OnlineRescale  a sum block `Y = Y * F + t` whose factor F
                                                    reads only `shift` and `previous`, and whose
                                                    term t scales like exp(-c * shift)

The identity: for Y(k) = Y(k-1) * exp(c*(P(k) - N(k))) + u(k) * exp(c*(x(k) - N(k))), where P(k)
and N(k) are the shift before and after element k, Y * exp(c * N) gains exactly
u(k) * exp(c * x(k)) per element, whatever the shifts are. So a tile of elements may be folded
at once: Y_after = Y_before * exp(c*(P - N)) + sum over the tile of u * exp(c*(x - N)), with P
and N the shift before and after the whole tile. The lowering folds a tile that way (registers:
`previous` is the maximum before the tile, `shift` after it); the dependence analysis lets the
loop be a tile axis although the sums read the shift it carries; the contract check verifies
that the marks name a shift block and buffers that exist.

  block annotation "online.split"    OnlineSplit    SplitOnlineRows's decision, on the max block
                                                    of a row split into `splits` chunks of
                                                    `chunk` elements: the block keeps the chunk's
                                                    statistics (a partial buffer over chunks ×
                                                    rows), a combine nest merges them into
                                                    `combined`; Tiling reads it (the chunks and
                                                    rows are program ids, the chunk the online loop)
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir

from tir_passes.contracts.tile_contract import ContractError

SHIFT_KEY, RESCALE_KEY = "online.shift", "online.rescale"
DECISIONS_KEY = "online.decisions"   # root block: the pass's reasons, one line per group found or refused
SPLIT_KEY = "online.split"
SPLIT_DECISIONS_KEY = "online.split_decisions"   # root block: SplitOnlineRows's reasons, taken or refused


@dataclass(frozen=True)
class OnlineShift:
    shift: str       # the running maximum's buffer
    previous: str    # the maximum before the current element (an intermediate only the sums read)
    streamed: bool = True   # the row is walked tile by tile: OnlineSoftmax's reason to take it, read by Tiling
    # the first element is finite for every row that has one (analyses/leading_element.py): the
    # sums are written without the -inf restart, which the contract check then allows
    first_finite: bool = False
    # and the maximum starts at a finite constant: with first_finite it is finite from the first
    # element on, so the rescale exp(c*(previous - shift)) is written without its `==` guard
    finite_init: bool = False


@dataclass(frozen=True)
class OnlineRescale:
    shift: str
    previous: str


@dataclass(frozen=True)
class OnlineSplit:
    splits: int      # chunks of the row, each a program id beside the rows
    chunk: int       # elements per chunk (the row's extent / splits)
    combined: str    # the running maximum's buffer the combine nest writes (what the readers read)


def split_value(mark: OnlineSplit) -> dict:
    return {"splits": mark.splits, "chunk": mark.chunk, "combined": mark.combined}


def online_split(block: s_tir.SBlock) -> OnlineSplit | None:
    raw = block.annotations.get(SPLIT_KEY)
    if raw is None:
        return None
    fields = dict(raw.items()) if hasattr(raw, "items") else {}
    splits, chunk, combined = fields.get("splits"), fields.get("chunk"), fields.get("combined")
    if not (isinstance(splits, int) and isinstance(chunk, int) and splits > 1 and chunk > 0
            and isinstance(combined, str)):
        raise ContractError(f"block {block.name_hint}", f'annotation "{SPLIT_KEY}" needs integers "splits" > 1 and '
                            f'"chunk" > 0 and a buffer name "combined", not {raw!r}', "SplitOnlineRows")
    return OnlineSplit(int(splits), int(chunk), str(combined))


def shift_value(mark: OnlineShift) -> dict:
    return {"shift": mark.shift, "previous": mark.previous, "streamed": mark.streamed,
            "first_finite": mark.first_finite, "finite_init": mark.finite_init}


def rescale_value(mark: OnlineRescale) -> dict:
    return {"shift": mark.shift, "previous": mark.previous}


def _fields(block: s_tir.SBlock, key: str) -> dict | None:
    raw = block.annotations.get(key)
    if raw is None:
        return None
    where = f"block {block.name_hint}"
    if not hasattr(raw, "items"):
        raise ContractError(where, f'annotation "{key}" must be a dict, not {raw!r}', "OnlineSoftmax")
    fields = dict(raw.items())
    if not all(isinstance(fields.get(name), str) for name in ("shift", "previous")):
        raise ContractError(
            where, f'annotation "{key}" needs the buffer names "shift" and "previous", not {raw!r}', "OnlineSoftmax"
        )
    return fields


def online_shift(block: s_tir.SBlock) -> OnlineShift | None:
    fields = _fields(block, SHIFT_KEY)
    if fields is None:
        return None
    if not isinstance(fields.get("streamed"), bool):
        raise ContractError(
            f"block {block.name_hint}",
            f'annotation "{SHIFT_KEY}" needs a boolean "streamed", not {fields.get("streamed")!r}',
            "OnlineSoftmax",
        )
    flags = {name: fields.get(name, False) for name in ("first_finite", "finite_init")}
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ContractError(
                f"block {block.name_hint}", f'annotation "{SHIFT_KEY}" needs a boolean "{name}", not {flag!r}',
                "OnlineSoftmax",
            )
    if flags["finite_init"] and not flags["first_finite"]:
        raise ContractError(f"block {block.name_hint}", "finite_init needs first_finite", "OnlineSoftmax")
    return OnlineShift(str(fields["shift"]), str(fields["previous"]), bool(fields["streamed"]), **flags)


def online_rescale(block: s_tir.SBlock) -> OnlineRescale | None:
    fields = _fields(block, RESCALE_KEY)
    return OnlineRescale(str(fields["shift"]), str(fields["previous"])) if fields else None
