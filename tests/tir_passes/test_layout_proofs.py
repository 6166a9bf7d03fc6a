"""The analyzer proofs behind the layout passes: real layouts pass, broken ones are named."""

import pytest
from tvm import tirx

from tir_passes.passes.buffer_layout import permutation_map
from tir_passes.analyses.layout_proofs import bijection_problems, injection_problems


def _index_map(fn, ndim):
    return tirx.IndexMap.from_func(fn, ndim=ndim, index_dtype="int32")


@pytest.mark.parametrize("permutation, shape", [([1, 0], [3, 5]), ([0, 2, 1], [2, 3, 4]), ([2, 0, 1], [64, 64, 2])])
def test_permutations_are_proven_bijections(permutation, shape):
    forward = permutation_map(permutation)
    assert bijection_problems(forward, forward.inverse(shape), shape, [shape[p] for p in permutation]) == []


def test_a_map_that_merges_indices_is_not_a_bijection():
    """(i, j) -> (i // 2, j): rows 0 and 1 land on one row; its would-be inverse cannot undo that."""
    forward, claimed_inverse = _index_map(lambda i, j: (i // 2, j), 2), _index_map(lambda i, j: (i * 2, j), 2)
    assert bijection_problems(forward, claimed_inverse, [4, 3], [2, 3]) == ["not proven: inverse(map(x)) == x"]


def test_a_wrong_inverse_is_caught():
    """A transpose of a 3x5 buffer checked against the identity as its inverse."""
    forward, identity = permutation_map([1, 0]), permutation_map([0, 1])
    assert bijection_problems(forward, identity, [3, 5], [5, 3]) == [
        "not proven: inverse(map(x)) == x", "not proven: inverse(y) lies in shape (3, 5)",
        "not proven: map(inverse(y)) == y"]


def test_a_map_into_a_smaller_buffer_is_caught():
    forward = permutation_map([1, 0])
    assert "not proven: map(x) lies in shape (4, 3)" in bijection_problems(forward, forward.inverse([3, 5]), [3, 5], [4, 3])


def test_an_injection_may_leave_gaps():
    """A padded 4x3 layout (stride 5) is one to one into 20 elements, though not onto them."""
    address = _index_map(lambda i, j: (i * 5 + j,), 2)
    index = _index_map(lambda a: (a // 5, a % 5), 1)
    assert injection_problems(address, index, [4, 3], [20]) == []
    # map(inverse(y)) == y holds as algebra; only the range claim sees the gaps (y % 5 may be 3 or 4)
    assert bijection_problems(address, index, [4, 3], [20]) == ["not proven: inverse(y) lies in shape (4, 3)"]


def test_overlapping_rows_are_not_an_injection():
    address = _index_map(lambda i, j: (i * 2 + j,), 2)
    index = _index_map(lambda a: (a // 2, a % 2), 1)
    assert injection_problems(address, index, [4, 3], [12]) == ["not proven: inverse(map(x)) == x"]


def test_maps_of_the_wrong_rank_are_reported():
    assert bijection_problems(permutation_map([1, 0]), permutation_map([1, 0]), [3, 5], [15]) == [
        "the maps have 2 and 2 indices for shapes (15,) and (3, 5)"]
