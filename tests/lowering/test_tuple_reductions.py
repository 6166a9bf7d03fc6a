"""Reduction blocks with several stores: independent folds (LayerNorm's moments) and selections
(arg-max, arg-min), each against TVM's llvm build in the interpreter and compiled for sm_90/sm_80."""

import re

import numpy as np
import pytest
import torch
from tvm import te, topi
from tvm.script import tirx as T

from helpers import compile_and_check
from lowering.tile_ir import CombineAssign, Loop
from tir_passes import UnsupportedConstructError
from tir_passes.checks.numerics import build_llvm, run_built
from triton_codegen import compile


def make_moments_layernorm(M: int, N: int, dtype: str, eps: float = 1e-5):
    """LayerNorm whose two moments are one block: mean = s / N, var = sq / N - mean^2."""

    @T.prim_func(s_tir=True)
    def moments_layernorm(X: T.Buffer((M, N), dtype), gamma: T.Buffer((N,), dtype), beta: T.Buffer((N,), dtype),
                          Y: T.Buffer((M, N), dtype)):
        s = T.sblock_alloc_buffer((M,), "float32")
        sq = T.sblock_alloc_buffer((M,), "float32")
        for i, k in T.grid(M, N):
            with T.sblock("moments"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    s[vi] = T.float32(0)
                    sq[vi] = T.float32(0)
                s[vi] = s[vi] + T.Cast("float32", X[vi, vk])
                sq[vi] = sq[vi] + T.Cast("float32", X[vi, vk]) * T.Cast("float32", X[vi, vk])
        for i, j in T.grid(M, N):
            with T.sblock("normalize"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.Cast(dtype, (T.Cast("float32", X[vi, vj]) - s[vi] * T.float32(1.0 / N))
                                   * T.rsqrt(sq[vi] * T.float32(1.0 / N) - s[vi] * s[vi] * T.float32(1.0 / (N * N))
                                             + T.float32(eps))
                                   * T.Cast("float32", gamma[vj]) + T.Cast("float32", beta[vj]))

    return moments_layernorm


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layernorm_with_moments_in_one_block_is_one_kernel(dtype):
    kernel = compile_and_check(make_moments_layernorm(67, 45, dtype))
    assert len(kernel.program.kernels) == 1
    assert kernel.program.scratch == ()   # both moments stay in registers


@T.prim_func(s_tir=True)
def sum_and_max_into_outputs(A: T.Buffer((67, 45), "float32"), S: T.Buffer((67,), "float32"),
                             M: T.Buffer((67,), "float32")):
    for i, k in T.grid(67, 45):
        with T.sblock("sum_and_max"):
            vi, vk = T.axis.remap("SR", [i, k])
            S[vi] = S[vi] + A[vi, vk]
            M[vi] = T.max(M[vi], A[vi, vk])


def test_independent_folds_without_init_accumulate_into_their_outputs():
    compile_and_check(sum_and_max_into_outputs)


@pytest.mark.parametrize("reduction", [topi.argmax, topi.argmin])
def test_topi_arg_reductions_match_tvm(reduction):
    A = te.placeholder((67, 45), "float32", name="A")
    compile_and_check(te.create_prim_func([A, reduction(A, axis=1)]))


def make_hand_argmax(M: int, N: int, keep_old_on_ties: bool):
    """idx/val of the row maximum, written by hand: with `>=` ties keep the old index (the first
    wins), with `>` they take the new one (the last wins)."""

    @T.prim_func(s_tir=True)
    def hand_argmax(A: T.Buffer((M, N), "float32"), idx: T.Buffer((M,), "int32"), val: T.Buffer((M,), "float32")):
        for i, k in T.grid(M, N):
            with T.sblock("argmax"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    idx[vi] = -1
                    val[vi] = T.min_value("float32")
                if keep_old_on_ties:
                    idx[vi] = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
                else:
                    idx[vi] = T.Select(val[vi] > A[vi, vk], idx[vi], vk)
                val[vi] = T.max(val[vi], A[vi, vk])

    return hand_argmax


def _tied_rows(M: int, N: int, seed: int = 0) -> np.ndarray:
    """Few distinct values, so every row repeats its maximum; plus rows that tie with the init
    value (-FLT_MAX) and rows below it (-inf)."""
    data = np.random.default_rng(seed).integers(-3, 3, (M, N)).astype("float32")
    data[0, :] = 2.0
    data[1, :] = np.finfo("float32").min
    data[2, :] = -np.inf
    data[3, ::7] = np.finfo("float32").min
    return data


def _run_both(kernel, func, arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    expected = run_built(build_llvm(func), func, arrays)
    tensors = {name: torch.from_numpy(array.copy()) for name, array in arrays.items()}
    kernel(*(tensors[p.name] for p in func.params), interpret=True)
    return expected, {name: tensor.numpy() for name, tensor in tensors.items()}


@pytest.mark.parametrize("keep_old_on_ties, shape", [(True, (67, 45)), (False, (67, 45)), (True, (67, 5000))])
def test_hand_written_argmax_sends_ties_where_the_sequential_fold_does(keep_old_on_ties, shape):
    func = make_hand_argmax(*shape, keep_old_on_ties)
    kernel = compile_and_check(func)
    arrays = {"A": _tied_rows(*shape), "idx": np.zeros(shape[0], "int32"), "val": np.zeros(shape[0], "float32")}
    expected, actual = _run_both(kernel, func, arrays)
    np.testing.assert_array_equal(actual["idx"], expected["idx"])
    np.testing.assert_array_equal(actual["val"], expected["val"])
    assert expected["idx"][0] == (0 if keep_old_on_ties else shape[1] - 1)   # the data does tie
    assert expected["idx"][1] == (-1 if keep_old_on_ties else shape[1] - 1)  # ties with the init value


@T.prim_func(s_tir=True)
def argmax_into_outputs(A: T.Buffer((67, 45), "float32"), idx: T.Buffer((67,), "int32"),
                        val: T.Buffer((67,), "float32")):
    for i, k in T.grid(67, 45):
        with T.sblock("argmax"):
            vi, vk = T.axis.remap("SR", [i, k])
            idx[vi] = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
            val[vi] = T.max(val[vi], A[vi, vk])


def test_argmax_without_init_continues_from_the_outputs():
    """The outputs' values are the state before the first element (position -1: it wins ties)."""
    compile_and_check(argmax_into_outputs)


@T.prim_func(s_tir=True)
def last_argmin_with_two_payloads(K: T.Buffer((67, 45), "int8"), B: T.Buffer((67, 45), "float16"),
                                  key: T.Buffer((67,), "int8"), idx: T.Buffer((67,), "int32"),
                                  value: T.Buffer((67,), "float16")):
    for i, k in T.grid(67, 45):
        with T.sblock("argmin"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                key[vi] = T.int8(127)
                idx[vi] = -1
                value[vi] = T.float16(0)
            idx[vi] = T.Select(K[vi, vk] <= key[vi], vk, idx[vi])
            value[vi] = T.Select(K[vi, vk] <= key[vi], B[vi, vk], value[vi])
            key[vi] = T.min(key[vi], K[vi, vk])


def test_argmin_of_small_integers_brings_several_payloads_of_the_last_minimum():
    kernel = compile_and_check(last_argmin_with_two_payloads)
    rng = np.random.default_rng(2)
    arrays = {"K": rng.integers(-2, 2, (67, 45)).astype("int8"), "B": rng.standard_normal((67, 45)).astype("float16"),
              "key": np.zeros(67, "int8"), "idx": np.zeros(67, "int32"), "value": np.zeros(67, "float16")}
    expected, actual = _run_both(kernel, last_argmin_with_two_payloads, arrays)
    for name in ("key", "idx", "value"):
        np.testing.assert_array_equal(actual[name], expected[name])


def test_reduction_longer_than_a_tile_merges_tiles_in_a_serial_loop():
    kernel = compile(make_hand_argmax(67, 5000, True))
    loops = [stmt for stmt in kernel.program.kernels[0].body if isinstance(stmt, Loop)]
    assert len(loops) == 1 and any(isinstance(stmt, CombineAssign) for stmt in loops[0].body)


def test_argmax_over_two_axes_numbers_elements_row_major():
    A = te.placeholder((37, 7, 29), "float32", name="A")
    func = te.create_prim_func([A, topi.argmax(A, axis=(1, 2))])
    kernel = compile_and_check(func)
    data = np.random.default_rng(1).integers(0, 3, (37, 7, 29)).astype("float32")
    expected, actual = _run_both(kernel, func, {"A": data, "A_red": np.zeros(37, "int32")})
    np.testing.assert_array_equal(actual["A_red"], expected["A_red"])
    np.testing.assert_array_equal(actual["A_red"], data.reshape(37, -1).argmax(axis=1))


def test_a_nan_key_wins_as_in_torch():
    """Torch's rule (catalogue #29): the first NaN of a row is its arg-max, and the max is NaN; a
    row without NaN is unchanged. (TVM's sequential answer depends on where NaNs fall.)"""
    func = make_hand_argmax(5, 9, True)
    kernel = compile(func)
    data = np.arange(45, dtype="float32").reshape(5, 9) % 4
    data[0, 3] = data[1, 0] = data[1, 5] = np.nan
    data[2, :] = np.nan
    idx, val = torch.zeros(5, dtype=torch.int32), torch.zeros(5)
    kernel(torch.from_numpy(data), idx, val, interpret=True)
    expected = torch.argmax(torch.from_numpy(data), dim=1)
    np.testing.assert_array_equal(idx.numpy(), expected.numpy())
    assert torch.equal(torch.isnan(val), torch.tensor([True, True, True, False, False]))


@T.prim_func(s_tir=True)
def coupled(A: T.Buffer((67, 45), "float32"), S: T.Buffer((67,), "float32"), Q: T.Buffer((67,), "float32")):
    for i, k in T.grid(67, 45):
        with T.sblock("coupled"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
                Q[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
            Q[vi] = Q[vi] + S[vi] * A[vi, vk]


def test_coupled_outputs_are_refused_with_the_block_and_line():
    with pytest.raises(UnsupportedConstructError, match=r"test_tuple_reductions.py:\d+: reduction block 'coupled' "
                                                        r"updates Q with .*couples it to other outputs.*supported: "):
        compile(coupled, verify=False)


@T.prim_func(s_tir=True)
def swapped_argmax(A: T.Buffer((8, 16, 4), "float32"), idx: T.Buffer((8,), "int32"), val: T.Buffer((8,), "float32")):
    for i, k2, k1 in T.grid(8, 4, 16):
        with T.sblock("swapped"):
            vi, vk1, vk2 = T.axis.remap("SRR", [i, k1, k2])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float32")
            idx[vi] = T.Select(val[vi] >= A[vi, vk1, vk2], idx[vi], vk1 * 4 + vk2)
            val[vi] = T.max(val[vi], A[vi, vk1, vk2])


def test_selection_whose_loops_walk_its_axes_out_of_order_is_refused():
    """Ties go to the first element in loop order, which is not the order of the positions."""
    with pytest.raises(UnsupportedConstructError, match=r"selection reduction 'swapped' depends on the order of its "
                                                        r"elements, but its loops walk reduction variable vk2 before"):
        compile(swapped_argmax, verify=False)


GOLDEN_LAST_INDEX_ARGMAX = """\
  params: A: float32[8, 45], idx: int32[8], val: float32[8]
  combine select_max_last_float32_int32: (key float32; payloads int32; position int32) the larger key wins, of equal keys the larger position
kernel hand_argmax_kernel0  (blocks argmax; warps 4, stages 2)
  grid: i_0[(8 cdiv BLOCK_I)]
  axis i: BLOCK_I=8 over extent 8 (no tail)
  axis k: BLOCK_K=64 over extent 45
  val_1: float32<i> = -3.4028234663852886e+38
  idx_2: int32<i> = -1
  position_3: int32<i> = -1
  for k_0 in range(0, (45 cdiv BLOCK_K)):
      # block argmax (source line)
      element_key_4: float32<i,k> = A[((((i_0 * BLOCK_I) + arange(BLOCK_I)@i) * A_stride0) + (((k_0 * BLOCK_K) + arange(BLOCK_K)@k) * A_stride1)) if (((k_0 * BLOCK_K) + arange(BLOCK_K)@k) < 45)]
      valid_5: bool<k> = (((k_0 * BLOCK_K) + arange(BLOCK_K)@k) < 45)
      candidate_key_6: float32<i,k> = where(valid_5, element_key_4, -inf)
      candidate_position_7: int32<k> = where(valid_5, ((k_0 * BLOCK_K) + arange(BLOCK_K)@k), -2147483648)
      nan_key_8: bool<i,k> = ((candidate_key_6 != candidate_key_6) and valid_5)
      any_nan_key_9: bool<i> = (max(where(nan_key_8, 1, 0), over k) > 0)
      best_number_10: float32<i> = max(where(nan_key_8, -inf, candidate_key_6), over k)
      best_key_11: float32<i> = where(any_nan_key_9, nan, best_number_10)
      best_position_12: int32<i> = max(where(where(any_nan_key_9, nan_key_8, (where(nan_key_8, -inf, candidate_key_6) == best_number_10)), candidate_position_7, -2147483648), over k)
      val_1, idx_2, position_3: (float32, int32, int32)<i> = select_max_last_float32_int32((val_1, idx_2, position_3), (best_key_11, best_position_12, best_position_12))
  val[(((i_0 * BLOCK_I) + arange(BLOCK_I)@i) * val_stride0)] = val_1
  idx[(((i_0 * BLOCK_I) + arange(BLOCK_I)@i) * idx_stride0)] = idx_2
"""


def test_tile_program_of_a_last_index_argmax():
    """Golden text: the state opens before the loop over tiles, each tile's winner (the largest
    position among the best keys) merges in through the generated combine function."""
    text = compile(make_hand_argmax(8, 45, False), verify=False).tile_ir
    body = re.sub(r"\(\S+\.py:\d+\)", "(source line)", text.split("\n", 1)[1])
    assert body == GOLDEN_LAST_INDEX_ARGMAX
