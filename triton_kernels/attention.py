"""Fused attention, forward: softmax(Q Kᵀ · scale + mask) V without the L×S score matrix.

Why a kernel of its own: composed of matmul + softmax + matmul, attention writes and reads the
whole (batch, heads, L, S) score matrix twice; at L = S = 8k that is gigabytes per layer. This is
FlashAttention-2's forward (Dao, 2023; Triton's tutorial 06 follows it): each program owns
BLOCK_M query rows of one (batch, head), keeps them in registers, and walks the keys in BLOCK_N
steps with an *online softmax*: a running row maximum ``m`` and row sum ``l`` rescale the output
accumulator whenever the maximum grows. Only O and the per-row log-sum-exp (``lse = m + log l``,
what the backward kernels in ``attention_bwd.py`` recompute the probabilities from) are written.

What the one kernel covers, all by compile-time switches so the plain case pays for nothing:

* any batch shape and strides (outer batch dims arrive as a shape tuple + per-operand strides);
* grouped-query attention: query head ``h`` reads key/value head ``h // GROUP`` (index math, no
  copies); GROUP = Hq also broadcasts a single key/value head;
* causal masking ``key j <= query i + causal_offset`` (0: PyTorch's ``is_causal``, aligned to the
  upper left; S - L: aligned to the lower right). Key blocks wholly past the diagonal are never
  visited, blocks wholly before it run unmasked, only the band pays for the mask;
* ``attn_mask``: boolean (MASK_KIND 1, True = attend) or additive (MASK_KIND 2), read through its
  own strides, so a mask broadcast over batch/heads is never materialised;
* dropout on the probabilities with Philox (``tl.rand``): element (bh, i, j) uses counter
  ``rng_offset + (bh·L + i)·S + j``, so the backward kernels regenerate the same mask;
* rows with nothing to attend to (everything masked) give 0, as PyTorch's math path does.

Precision: fp16/bf16 tiles feed ``tl.dot`` with fp32 accumulation (probabilities are cast to the
value dtype for the second product, as FlashAttention does); fp32 uses IEEE fp32 dots unless TF32
is allowed; fp64 computes in fp64. In the interpreter, tiles are upcast before the dots (its bf16
arithmetic is wrong, see DESIGN.md).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import INTERPRET, cdiv, load_f64_scalar, next_pow2
from .autotune import autotune

MASK_KINDS = {None: 0, "bool": 1, "additive": 2}
MAX_GRID_Y = 65535  # batch * heads go on grid axis 1


def _keep(conf):
    """Drop 8-warp configs on small tiles (they starve the tile of work per warp)."""
    return not (conf.kwargs["BLOCK_M"] * conf.kwargs["BLOCK_N"] < 128 * 128 and conf.num_warps == 8)


FWD_CONFIGS = [c for c in (triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
                           for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)
                           if bn <= bm) if _keep(c)]


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


@triton.jit
def _fwd_tile(acc, l_i, m_i, q, k_base, v_base, mask_base, start_n, offs_m, L, S, scale, causal_offset,
              skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale,
              D: tl.constexpr, DV: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
              MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
              INPUT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_DV: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    k_ptrs = k_base + offs_n[None, :] * skn + offs_d[:, None] * skd
    v_ptrs = v_base + offs_n[:, None] * svn + offs_dv[None, :] * svd
    if EDGE:  # whole blocks need no row mask
        kt = tl.load(k_ptrs, mask=(offs_n[None, :] < S) & (offs_d[:, None] < D), other=0.0)
    else:
        kt = tl.load(k_ptrs, mask=offs_d[:, None] < D, other=0.0)
    if UPCAST:
        kt = kt.to(acc.dtype)
    s = tl.dot(q, kt, input_precision=INPUT_PRECISION, out_dtype=acc.dtype) * scale
    s = score_mask(s, offs_m[:, None], offs_n[None, :], L, S, causal_offset,
                   mask_base + offs_m[:, None] * smm + offs_n[None, :] * smn, IS_CAUSAL, MASK_KIND, EDGE)
    p, alpha, l_i, m_new = online_softmax_step(s, m_i, l_i, False)
    acc = acc * alpha[:, None]
    if HAS_DROPOUT:
        p = tl.where(dropout_keep(seed, rng_base, offs_m[:, None], offs_n[None, :], S, dropout_p), p * drop_scale, 0.0)
    if EDGE:
        v = tl.load(v_ptrs, mask=(offs_n[:, None] < S) & (offs_dv[None, :] < DV), other=0.0)
    else:
        v = tl.load(v_ptrs, mask=offs_dv[None, :] < DV, other=0.0)
    if UPCAST:
        v = v.to(acc.dtype)
    acc = tl.dot(p.to(v.dtype), v, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)
    return acc, l_i, m_new


@autotune(configs=FWD_CONFIGS, key=["BLOCK_D", "BLOCK_DV", "IS_CAUSAL", "MASK_KIND", "HAS_DROPOUT", "SEQ_BUCKET"])
@triton.jit(do_not_specialize=["seed", "rng_offset", "causal_offset"])
def _attn_fwd(Q, K, V, O, LSE, MASK, batch_shape, sqb, skb, svb, sob, smb,
              sqh, sqm, sqd, skh, skn, skd, svh, svn, svd, soh, som, sod, smh, smm, smn,
              H, GROUP, L, S, scale_bits, causal_offset, seed, rng_offset, dropout_p, drop_scale_bits, SEQ_BUCKET,
              D: tl.constexpr, DV: tl.constexpr, NBATCH: tl.constexpr, IS_CAUSAL: tl.constexpr,
              MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
              INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if Q.dtype.element_ty == tl.float64 else tl.float32
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    oq, ok, ov, oo, om = batch_offsets(bh, H, GROUP, batch_shape, sqb, skb, svb, sob, smb, sqh, skh, svh, soh, smh,
                                       NBATCH)
    scale = load_f64_scalar(scale_bits).to(ACC)
    drop_scale = load_f64_scalar(drop_scale_bits).to(ACC)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_ok = offs_m < L
    q = tl.load(Q + oq + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=m_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    if UPCAST:
        q = q.to(ACC)
    rng_base = rng_offset + bh.to(tl.int64) * L * S
    m_i = tl.full([BLOCK_M], float("-inf"), ACC)
    l_i = tl.zeros([BLOCK_M], ACC)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], ACC)
    full, hi = causal_key_bounds(start_m, L, S, causal_offset, IS_CAUSAL, BLOCK_M, BLOCK_N)
    k_base, v_base, mask_base = K + ok, V + ov, MASK + om
    for start_n in range(0, full, BLOCK_N):  # every row sees the whole block: no tail/causal mask
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, k_base, v_base, mask_base, start_n, offs_m, L, S, scale,
                                  causal_offset, skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale,
                                  D, DV, False, IS_CAUSAL, MASK_KIND, HAS_DROPOUT, UPCAST, INPUT_PRECISION,
                                  BLOCK_N, BLOCK_D, BLOCK_DV)
    for start_n in range(full, hi, BLOCK_N):  # the causal band and the ragged tail
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, k_base, v_base, mask_base, start_n, offs_m, L, S, scale,
                                  causal_offset, skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale,
                                  D, DV, True, IS_CAUSAL, MASK_KIND, HAS_DROPOUT, UPCAST, INPUT_PRECISION,
                                  BLOCK_N, BLOCK_D, BLOCK_DV)
    empty = l_i == 0.0  # every key masked out: output 0, lse +inf (so the backward's exp(s - lse) is 0)
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    m_fin = tl.where(empty, 0.0, m_i)
    lse = tl.where(empty, float("inf"), m_fin + tl.log(tl.where(empty, 1.0, l_i)))
    tl.store(LSE + bh.to(tl.int64) * L + offs_m, lse, mask=m_ok)
    tl.store(O + oo + offs_m[:, None] * som + offs_dv[None, :] * sod, out.to(O.dtype.element_ty),
             mask=m_ok[:, None] & (offs_dv[None, :] < DV))


def block_dims(D: int, DV: int) -> tuple[int, int]:
    """Head dims padded to a power of two, at least 16 (``tl.dot``'s minimum)."""
    return max(16, next_pow2(max(D, 1))), max(16, next_pow2(max(DV, 1)))


def seq_bucket(L: int, S: int) -> int:
    """Autotuning key for the sequence lengths: their power-of-two bucket (tuned once per bucket)."""
    return next_pow2(max(L, S, 1))


def forward(out, lse, q, k, v, mask, mask_kind, batch_shape, strides, H, group, scale_bits, causal_offset,
            is_causal, seed, rng_offset, dropout_p, drop_scale_bits, input_precision) -> None:
    """out[..., h, L, DV] = attention(q, k, v); lse[(batch, h), L] = its log-sum-exp.

    ``q``/``k``/``v``/``out``/``mask`` are the 4 tensors (mask may be any tensor when
    ``mask_kind`` is None); ``strides`` holds, per operand (q, k, v, out, mask), the tuple of its
    outer-batch strides and its (head, row, col) strides. Checking and broadcasting are
    ``core/ops/attention.py``'s job.
    """
    L, D = q.shape[-2], q.shape[-1]
    S, DV = k.shape[-2], v.shape[-1]
    nbh = lse.shape[0]
    if nbh == 0 or L == 0:
        return
    (sqb, sq), (skb, sk), (svb, sv), (sob, so), (smb, sm) = strides
    block_d, block_dv = block_dims(D, DV)
    meta = interpret_blocks(L, S) if INTERPRET else {}
    grid = lambda META: (cdiv(L, META["BLOCK_M"]), nbh)  # noqa: E731
    launch(_attn_fwd, grid, q, k, v, out, lse, mask if mask is not None else q, batch_shape, sqb, skb, svb, sob, smb,
           *sq, *sk, *sv, *so, *sm, H, group, L, S, scale_bits, causal_offset, seed, rng_offset, float(dropout_p),
           drop_scale_bits, seq_bucket(L, S), D=D, DV=DV, NBATCH=len(batch_shape), IS_CAUSAL=bool(is_causal),
           MASK_KIND=MASK_KINDS[mask_kind], HAS_DROPOUT=dropout_p > 0, UPCAST=INTERPRET,
           INPUT_PRECISION=input_precision, BLOCK_D=block_d, BLOCK_DV=block_dv, **meta)
