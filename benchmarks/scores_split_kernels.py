"""The hand-written Triton kernels of benchmarks/scores_split_gpu.py: softmax(Q·Kᵀ/√d) with its key
axis split, the statistics of each chunk (A), a combine of the chunks' partials (between A and B in the
three-kernel form) and the normalized 2-D store (B). Imported when the probe runs (triton needed), after
TRITON_INTERPRET is set where the smoke sets it.
"""

import triton
import triton.language as tl


@triton.jit
def _combined(m_part, l_part, splits, rows_total, rows, scale_log2, BLOCK_I: tl.constexpr):
    """The rows' statistics from their `splits` partials: m = max m_c, l = Σ l_c·2^(m_c − m)."""
    m = tl.full([BLOCK_I], -3.4028234663852886e38, tl.float32)
    for part in range(0, splits):
        m = tl.maximum(m, tl.load(m_part + part * rows_total + rows))
    l = tl.zeros([BLOCK_I], tl.float32)
    for part in range(0, splits):
        m_c = tl.load(m_part + part * rows_total + rows)
        l += tl.load(l_part + part * rows_total + rows) * tl.exp2((m_c - m) * scale_log2)
    return m, l


@triton.jit
def stats(Q, K, m_part, l_part, chunk, scale_log2, D: tl.constexpr, BLOCK_I: tl.constexpr,
          BLOCK_J: tl.constexpr):
    row_tile = tl.program_id(0)
    part = tl.program_id(1)
    rows = row_tile * BLOCK_I + tl.arange(0, BLOCK_I)
    d = tl.arange(0, D)
    q = tl.load(Q + rows[:, None] * D + d[None, :])
    m = tl.full([BLOCK_I], -3.4028234663852886e38, tl.float32)
    l = tl.zeros([BLOCK_I], tl.float32)
    for start in range(part * chunk, (part + 1) * chunk, BLOCK_J):
        keys = start + tl.arange(0, BLOCK_J)
        k = tl.load(K + keys[:, None] * D + d[None, :])
        s = tl.dot(q, tl.trans(k))
        new = tl.maximum(m, tl.max(s, axis=1))
        l = l * tl.exp2((m - new) * scale_log2) + tl.sum(tl.exp2(s * scale_log2 - new[:, None] * scale_log2), 1)
        m = new
    tl.store(m_part + part * tl.num_programs(0) * BLOCK_I + rows, m)
    tl.store(l_part + part * tl.num_programs(0) * BLOCK_I + rows, l)


@triton.jit
def store(Q, K, P, m_part, l_part, splits, rows_total, scale_log2, D: tl.constexpr, N: tl.constexpr,
          BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr):
    row_tile = tl.program_id(1)
    key_tile = tl.program_id(0)
    rows = row_tile * BLOCK_I + tl.arange(0, BLOCK_I)
    m, l = _combined(m_part, l_part, splits, rows_total, rows, scale_log2, BLOCK_I)
    d = tl.arange(0, D)
    keys = key_tile * BLOCK_J + tl.arange(0, BLOCK_J)
    q = tl.load(Q + rows[:, None] * D + d[None, :])
    k = tl.load(K + keys[:, None] * D + d[None, :])
    s = tl.dot(q, tl.trans(k))
    p = tl.exp2(s * scale_log2 - m[:, None] * scale_log2) / l[:, None]
    tl.store(P + rows[:, None] * N + keys[None, :], p)


@triton.jit
def combine(m_part, l_part, m_out, l_out, splits, rows_total, scale_log2, BLOCK_I: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)
    m, l = _combined(m_part, l_part, splits, rows_total, rows, scale_log2, BLOCK_I)
    tl.store(m_out + rows, m)
    tl.store(l_out + rows, l)
