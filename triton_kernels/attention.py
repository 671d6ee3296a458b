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

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from . import attention_tma
from ._common import INTERPRET, cdiv, f64_bits, load_f64_scalar
from .attention_common import (MASK_KINDS, batch_offsets, block_dims, causal_key_bounds, dropout_keep,
                               interpret_blocks, online_softmax_step, score_mask, seq_bucket)
from .autotune import autotune


def _keep(conf):
    """One warp count per tile: 8 warps from 128x64 up, 4 below. 8 warps on a smaller tile starve
    each warp of work; 4 warps on a 128-row tile of 64 or 128 keys sat at 255 registers and
    spilled (8-104 B a thread at head dim 64, tools/sm90_report.py), where 8 warps halve what each
    thread holds."""
    return conf.num_warps == (8 if conf.kwargs["BLOCK_M"] * conf.kwargs["BLOCK_N"] >= 128 * 64 else 4)


FWD_CONFIGS = [c for c in (triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
                           for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)
                           if bn <= bm) if _keep(c)]


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
              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, ACC: tl.constexpr):
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


def forward(out, lse, q, k, v, mask, mask_kind, batch_shape, strides, H, group, scale, causal_offset,
            is_causal, seed, rng_offset, dropout_p, input_precision) -> None:
    """out[..., h, L, DV] = attention(q, k, v); lse[(batch, h), L] = its log-sum-exp.

    ``q``/``k``/``v``/``out``/``mask`` are the 4 tensors (mask may be any tensor when
    ``mask_kind`` is None); ``strides`` holds, per operand (q, k, v, out, mask), the tuple of its
    outer-batch strides and its (head, row, col) strides. Checking and broadcasting are
    ``core/ops/attention.py``'s job; picking the kernel is this launcher's: the Hopper TMA
    forward (``attention_tma.py``) where it applies, this file's kernel everywhere else.
    """
    L, D = q.shape[-2], q.shape[-1]
    S, DV = k.shape[-2], v.shape[-1]
    nbh = lse.shape[0]
    if nbh == 0 or L == 0:
        return
    if attention_tma.usable(out, q, k, v, mask_kind, dropout_p):  # Hopper, the plain case: TMA tiles
        attention_tma.forward(out, lse, q, k, v, group, scale, causal_offset, is_causal)
        return
    scale_bits = f64_bits(scale)
    drop_scale_bits = f64_bits(0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p))
    (sqb, sq), (skb, sk), (svb, sv), (sob, so), (smb, sm) = strides
    block_d, block_dv = block_dims(D, DV)
    meta = interpret_blocks(L, S) if INTERPRET else {}
    grid = lambda META: (cdiv(L, META["BLOCK_M"]), nbh)  # noqa: E731
    launch(_attn_fwd, grid, q, k, v, out, lse, mask if mask is not None else q, batch_shape, sqb, skb, svb, sob, smb,
           *sq, *sk, *sv, *so, *sm, H, group, L, S, scale_bits, causal_offset, seed, rng_offset, float(dropout_p),
           drop_scale_bits, seq_bucket(L, S), D=D, DV=DV, NBATCH=len(batch_shape), IS_CAUSAL=bool(is_causal),
           MASK_KIND=MASK_KINDS[mask_kind], HAS_DROPOUT=dropout_p > 0, UPCAST=INTERPRET,
           INPUT_PRECISION=input_precision, BLOCK_D=block_d, BLOCK_DV=block_dv,
           ACC=getattr(tl, FLOAT_COMPUTE_NAME[q.dtype.name]), **meta)
