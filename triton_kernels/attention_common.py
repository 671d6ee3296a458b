"""What the attention kernels share (forward ``attention.py``, Hopper forward ``attention_tma.py``,
backward ``attention_bwd.py``): the mask kinds, block choices for the interpreter, and the tile
steps each of them runs (batch offsets, causal key bounds, the score mask, dropout, one step of
the online softmax). Kept apart so the forward launcher can pick its Hopper variant without an
import cycle between the two forward files.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ._common import next_pow2

MASK_KINDS = {None: 0, "bool": 1, "additive": 2}
MAX_GRID_Y = 65535  # batch * heads go on grid axis 1


def interpret_blocks(L: int, S: int) -> dict:
    """The interpreter pays per program and per loop trip: the fewest tiles that cover the problem
    (at least 16, what ``tl.dot`` needs on a GPU; at most 64 so long sequences still take several
    key blocks and exercise the online rescaling)."""
    return {"BLOCK_M": min(64, max(16, next_pow2(max(L, 1)))),
            "BLOCK_N": min(64, max(16, next_pow2(max(S, 1))))}


@triton.jit
def batch_offsets(bh, H, GROUP, batch_shape, sqb, skb, svb, sob, smb, sqh, skh, svh, soh, smh,
                  NBATCH: tl.constexpr):
    """Element offsets of (batch, head) ``bh`` in Q, K, V, O and the mask (K/V use head h // GROUP)."""
    h = bh % H
    rem = (bh // H).to(tl.int64)
    oq = h.to(tl.int64) * sqh
    ok = (h // GROUP).to(tl.int64) * skh
    ov = (h // GROUP).to(tl.int64) * svh
    oo = h.to(tl.int64) * soh
    om = h.to(tl.int64) * smh
    for d in tl.static_range(NBATCH - 1, -1, -1):
        i = rem % batch_shape[d]
        rem = rem // batch_shape[d]
        oq += i * sqb[d]
        ok += i * skb[d]
        ov += i * svb[d]
        oo += i * sob[d]
        om += i * smb[d]
    return oq, ok, ov, oo, om


@triton.jit
def causal_key_bounds(start_m, L, S, causal_offset, IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr):
    """For query rows [start_m, start_m + BLOCK_M): (end of the key blocks every row sees whole,
    end of the key range any row sees). Blocks before the first need no mask; none after the second run."""
    if IS_CAUSAL:
        hi = tl.minimum(S, tl.minimum(start_m + BLOCK_M, L) - 1 + causal_offset + 1)
        full = tl.minimum(S, start_m + causal_offset + 1)
    else:
        hi = S
        full = S
    hi = tl.maximum(hi, 0)
    full = tl.maximum(full, 0) // BLOCK_N * BLOCK_N
    return tl.minimum(full, hi), hi


@triton.jit
def score_mask(s, mi, nj, L, S, causal_offset, mask_ptrs, IS_CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr,
               EDGE: tl.constexpr):
    """Apply attn_mask to a score tile, then (EDGE tiles only) the key tail and the causal band.

    ``mi``/``nj`` are the tile's query/key indices, broadcast to 2-D ((BM, 1) and (1, BN), or
    transposed for the backward's Sᵀ tiles); ``mask_ptrs`` point at the tile's mask entries.
    """
    if MASK_KIND == 1:
        keep = tl.load(mask_ptrs, mask=(mi < L) & (nj < S), other=0)
        s = tl.where(keep != 0, s, float("-inf"))
    elif MASK_KIND == 2:
        s = s + tl.load(mask_ptrs, mask=(mi < L) & (nj < S), other=0.0).to(s.dtype)
    if EDGE:
        ok = nj < S
        if IS_CAUSAL:
            ok = ok & (nj <= mi + causal_offset)
        s = tl.where(ok, s, float("-inf"))
    return s


@triton.jit
def dropout_keep(seed, rng_base, mi, nj, S, dropout_p):
    """Philox keep-mask of a tile (True: kept, with probability 1 - p). Element (bh, i, j) draws
    counter ``rng_base + i·S + j`` where ``rng_base = rng_offset + bh·L·S``, whatever the tiling."""
    return tl.rand(seed, rng_base + mi.to(tl.int64) * S + nj) >= dropout_p


@triton.jit
def online_softmax_step(s, m_i, l_i, BASE2: tl.constexpr):
    """One key block of the online softmax: the block's unnormalised probabilities ``p``, the
    factor ``alpha`` that rescales what was accumulated under the old row maximum, and the new
    row sum and maximum. ``BASE2``: ``s`` is in base 2 (``exp2``), else natural (``exp``)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing yet: exp(-inf - 0) = 0
    if BASE2:
        p = tl.math.exp2(s - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)
    else:
        p = tl.exp(s - m_use[:, None])
        alpha = tl.exp(m_i - m_use)
    return p, alpha, l_i * alpha + tl.sum(p, 1), m_new


def block_dims(D: int, DV: int) -> tuple[int, int]:
    """Head dims padded to a power of two, at least 16 (``tl.dot``'s minimum)."""
    return max(16, next_pow2(max(D, 1))), max(16, next_pow2(max(DV, 1)))


def seq_bucket(L: int, S: int) -> int:
    """Autotuning key for the sequence lengths: their power-of-two bucket (tuned once per bucket)."""
    return next_pow2(max(L, S, 1))
