"""The probes of benchmarks/sota_sweep.py: small parameterized Triton kernels, each what the code
generator would print with one knob turned (imports triton at once: GPU side only)."""

import triton
import triton.language as tl


@triton.jit
def flash_tiles(acc, l_i, m_i, q, K, V, k_desc, v_desc, base, sm, b, h, offs_m, lo, hi, qk_scale,
                BLOCK_N: tl.constexpr, D: tl.constexpr, MASKED: tl.constexpr, EXP2: tl.constexpr,
                NAN_CHECK: tl.constexpr, GUARDS: tl.constexpr, USE_DESC: tl.constexpr, WS: tl.constexpr,
                STAGES: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    for j0 in tl.range(lo, hi, BLOCK_N, num_stages=STAGES, warp_specialize=WS):
        if USE_DESC:
            k = tl.reshape(k_desc.load([b, h, j0, 0]), [BLOCK_N, D])
            v = tl.reshape(v_desc.load([b, h, j0, 0]), [BLOCK_N, D])
        else:
            k = tl.load(K + base + (j0 + offs_n)[:, None] * sm + offs_d[None, :])
            v = tl.load(V + base + (j0 + offs_n)[:, None] * sm + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        if EXP2:
            s = s * qk_scale
        if MASKED:
            s = tl.where((j0 + offs_n)[None, :] <= offs_m[:, None], s, float("-inf"))
        row = tl.max(s, 1)
        if NAN_CHECK:
            row = tl.where(tl.max((s != s).to(tl.int8), 1) > 0, float("nan"), row)
        m_new = tl.maximum(m_i, row)
        if EXP2:
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
        else:
            p = tl.exp((s - m_new[:, None]) * qk_scale)
            alpha = tl.exp((m_i - m_new) * qk_scale)
        if GUARDS:  # the generated kernel's guards for a first tile (m_i = -inf)
            alpha = tl.where(m_i == m_new, 1.0, alpha)
            l_i = tl.where(m_i == float("-inf"), 0.0, l_i * alpha) + tl.sum(p, 1)
            acc = tl.where((m_i == float("-inf"))[:, None], 0.0, acc * alpha[:, None])
        else:
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    return acc, l_i, m_i

@triton.jit
def flash(Q, K, V, O, q_desc, k_desc, v_desc, o_desc, sz, sh, sm, H, S, qk_scale,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
          EXP2: tl.constexpr, NAN_CHECK: tl.constexpr, SPLIT_DIAG: tl.constexpr, GUARDS: tl.constexpr,
          USE_DESC: tl.constexpr, WS: tl.constexpr, REVERSE: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(S, BLOCK_M)
    i0 = pid % num_m
    if REVERSE:  # the longest causal rows first: the last wave is the short rows
        i0 = num_m - 1 - i0
    bh = pid // num_m
    b = bh // H
    h = bh % H
    base = b.to(tl.int64) * sz + h.to(tl.int64) * sh
    offs_m = i0 * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    if USE_DESC:
        q = tl.reshape(q_desc.load([b, h, i0 * BLOCK_M, 0]), [BLOCK_M, D])
    else:
        q = tl.load(Q + base + offs_m[:, None] * sm + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        if SPLIT_DIAG:  # tiles below the diagonal unmasked, the diagonal's masked
            acc, l_i, m_i = flash_tiles(acc, l_i, m_i, q, K, V, k_desc, v_desc, base, sm, b, h, offs_m, 0,
                                        i0 * BLOCK_M, qk_scale, BLOCK_N, D, False, EXP2, NAN_CHECK, GUARDS,
                                        USE_DESC, WS, STAGES)
            acc, l_i, m_i = flash_tiles(acc, l_i, m_i, q, K, V, k_desc, v_desc, base, sm, b, h, offs_m,
                                        i0 * BLOCK_M, (i0 + 1) * BLOCK_M, qk_scale, BLOCK_N, D, True, EXP2,
                                        NAN_CHECK, GUARDS, USE_DESC, WS, STAGES)
        else:
            acc, l_i, m_i = flash_tiles(acc, l_i, m_i, q, K, V, k_desc, v_desc, base, sm, b, h, offs_m, 0,
                                        (i0 + 1) * BLOCK_M, qk_scale, BLOCK_N, D, True, EXP2, NAN_CHECK, GUARDS,
                                        USE_DESC, WS, STAGES)
    else:
        acc, l_i, m_i = flash_tiles(acc, l_i, m_i, q, K, V, k_desc, v_desc, base, sm, b, h, offs_m, 0, S,
                                    qk_scale, BLOCK_N, D, False, EXP2, NAN_CHECK, GUARDS, USE_DESC, WS, STAGES)
    out = (acc / l_i[:, None]).to(tl.float16)
    if USE_DESC:
        o_desc.store([b, h, i0 * BLOCK_M, 0], tl.reshape(out, [1, 1, BLOCK_M, D]))
    else:
        tl.store(O + base + offs_m[:, None] * sm + offs_d[None, :], out)

@triton.jit
def splitk_partial(X, W, P, Y, M, N, K, sxm, swn, K_SPLIT: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, SWAP: tl.constexpr,
                   STAGES: tl.constexpr):
    """Y = X·Wᵀ over K range `split`; SPLIT > 1 writes fp32 partials P[split, m, n]."""
    pid = tl.program_id(0)
    split = tl.program_id(1)
    num_n = tl.cdiv(N, BLOCK_N)
    pm = pid // num_n
    pn = pid % num_n
    offs_m = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    if SWAP:
        acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    k_start = split * K_SPLIT
    for k0 in tl.range(k_start, k_start + K_SPLIT, BLOCK_K, num_stages=STAGES):
        x = tl.load(X + offs_m[:, None] * sxm + (k0 + offs_k)[None, :], mask=mask_m[:, None], other=0.0)
        w = tl.load(W + offs_n[:, None] * swn + (k0 + offs_k)[None, :])
        if SWAP:
            acc = tl.dot(w, tl.trans(x), acc)
        else:
            acc = tl.dot(x, tl.trans(w), acc)
    if SWAP:
        acc = tl.trans(acc)
    out_offsets = offs_m[:, None] * N + offs_n[None, :]
    if SPLIT == 1:
        tl.store(Y + out_offsets, acc.to(tl.float16), mask=mask_m[:, None])
    else:
        tl.store(P + split * M * N + out_offsets, acc, mask=mask_m[:, None])

@triton.jit
def splitk_reduce(P, Y, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    """Y = Σ_s P[s] in a fixed order: the same bits every run."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    total = tl.load(P + offs, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT):
        total += tl.load(P + s * MN + offs, mask=mask, other=0.0)
    tl.store(Y + offs, total.to(tl.float16), mask=mask)

@triton.jit
def persistent(a_desc, b_desc, c_desc, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr,
               WS: tl.constexpr, STORE_DESC: tl.constexpr, STAGES: tl.constexpr):
    """C = A·B over tiles walked tile = pid, pid + PROGRAMS, ... in GROUP_M-swizzled order."""
    start = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    tiles = num_m * num_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(start, tiles, PROGRAMS, flatten=FLATTEN, warp_specialize=WS):
        group = GROUP_M * num_n
        first_m = (tile // group) * GROUP_M
        rows = tl.minimum(num_m - first_m, GROUP_M)
        pm = first_m + (tile % group) % rows
        pn = (tile % group) // rows
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for kk in tl.range(0, k_tiles, num_stages=STAGES):
            a = a_desc.load([pm * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([kk * BLOCK_K, pn * BLOCK_N])
            acc = tl.dot(a, b, acc)
        if STORE_DESC:
            c_desc.store([pm * BLOCK_M, pn * BLOCK_N], acc)
        else:
            offs_m = pm * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(C + offs_m[:, None] * N + offs_n[None, :], acc,
                     mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])

@triton.jit
def rms_chunked(X, Wt, Y, N, sx, CHUNK: tl.constexpr, ROWS_PER: tl.constexpr):
    """RMSNorm of ROWS_PER rows per program, each row in CHUNK-wide pieces: two passes over the row
    (the second from L2), a chunk of registers instead of a whole row."""
    for r in tl.static_range(ROWS_PER):
        row = tl.program_id(0) * ROWS_PER + r
        base = row.to(tl.int64) * sx
        total = tl.zeros([CHUNK], tl.float32)
        for c in tl.range(0, N, CHUNK):
            x = tl.load(X + base + c + tl.arange(0, CHUNK)).to(tl.float32)
            total += x * x
        scale = tl.rsqrt(tl.sum(total, 0) / N + 1e-6)
        for c in tl.range(0, N, CHUNK):
            x = tl.load(X + base + c + tl.arange(0, CHUNK)).to(tl.float32)
            w = tl.load(Wt + c + tl.arange(0, CHUNK)).to(tl.float32)
            tl.store(Y + base + c + tl.arange(0, CHUNK), (x * scale * w).to(tl.float16))
