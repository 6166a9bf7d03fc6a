"""Proofs about buffer layouts as index maps, shared by BufferLayout and BankConflictFreeTiling.

A layout is an IndexMap from a buffer's logical indices to where they are stored. The two
properties the passes need:
- injective into a shape (a padded shared tile inside its allocation): every index lands inside
  the shape, and a left inverse gives the index back, so no two indices share a slot;
- bijective between two shapes (a permuted buffer): the same both ways.
Each claim is proven by the arithmetic analyzer over symbolic indices bound to their ranges, so it
holds for the whole index space, whatever its size; a claim it cannot prove is reported.
"""

from __future__ import annotations

import tvm
from tvm import sym, tirx


def injection_problems(forward: tirx.IndexMap, left_inverse: tirx.IndexMap, domain: list[int],
                       codomain: list[int]) -> list[str]:
    """What is not proven of `forward` mapping the index space of `domain` one to one into that of
    `codomain`, with `left_inverse` undoing it (empty when everything is proven)."""
    return _problems(forward, left_inverse, domain, codomain, both_ways=False)


def bijection_problems(forward: tirx.IndexMap, inverse: tirx.IndexMap, domain: list[int],
                       codomain: list[int]) -> list[str]:
    """What is not proven of `forward` being a bijection from the index space of `domain` onto that
    of `codomain`, with `inverse` its inverse (empty when everything is proven)."""
    return _problems(forward, inverse, domain, codomain, both_ways=True)


def _problems(forward, inverse, domain, codomain, both_ways: bool) -> list[str]:
    if len(forward.final_indices) != len(codomain) or len(inverse.final_indices) != len(domain):
        return [f"the maps have {len(forward.final_indices)} and {len(inverse.final_indices)} indices "
                f"for shapes {tuple(codomain)} and {tuple(domain)}"]
    analyzer = sym.Analyzer()
    x = _index_vars(analyzer, "x", domain)
    mapped = forward.map_indices(x)
    claims = {
        f"map(x) lies in shape {tuple(codomain)}": _within(analyzer, mapped, codomain),
        "inverse(map(x)) == x": equal_indices(analyzer, inverse.map_indices(mapped), x),
    }
    if both_ways:
        y = _index_vars(analyzer, "y", codomain)
        unmapped = inverse.map_indices(y)
        claims[f"inverse(y) lies in shape {tuple(domain)}"] = _within(analyzer, unmapped, domain)
        claims["map(inverse(y)) == y"] = equal_indices(analyzer, forward.map_indices(unmapped), y)
    return [f"not proven: {claim}" for claim, proven in claims.items() if not proven]


def _index_vars(analyzer: sym.Analyzer, prefix: str, shape: list[int]) -> list[tirx.Var]:
    indices = [tirx.Var(f"{prefix}{axis}", "int32") for axis in range(len(shape))]
    for var, extent in zip(indices, shape):
        analyzer.bind(var, tvm.ir.Range(0, extent))
    return indices


def _within(analyzer: sym.Analyzer, indices, shape: list[int]) -> bool:
    return all(analyzer.can_prove(tirx.all(index >= 0, index < extent)) for index, extent in zip(indices, shape))


def equal_indices(analyzer: sym.Analyzer, left, right) -> bool:
    return len(left) == len(right) and all(analyzer.can_prove_equal(a, b) for a, b in zip(left, right))
