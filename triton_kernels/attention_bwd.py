"""Fused attention, backward: dQ, dK, dV (and an additive mask's gradient) from the saved log-sum-exp.

Why three kernels and no atomics (FlashAttention-2's split): the probabilities are never stored;
every kernel recomputes a tile of them as ``P = exp(Q Kᵀ·scale + mask - lse)`` from the forward's
per-row log-sum-exp. With ``Δ = rowsum(dO ∘ O)`` (kernel 1, ``_bwd_delta``):

    dV = Pdᵀ dO            dP = dO Vᵀ (∘ the dropout mask / (1 - p))
    dS = P ∘ (dP - Δ)      dQ = dS K · scale       dK = dSᵀ Q · scale      dMask = dS

* ``_bwd_dkdv`` owns BLOCK_N keys of one key/value head and walks every query block of every
  query head of its GQA group, so dK/dV are summed in registers and written once;
* ``_bwd_dq`` owns BLOCK_M queries and walks the keys, as the forward does; it also writes dS
  when an additive mask needs its gradient.

Each output element is written by exactly one program in a fixed order, so the backward is
deterministic run to run (no ``tl.atomic_add``): there is no non-deterministic mode to opt out of.
Dropout regenerates the forward's Philox mask from the same counters (``attention.dropout_keep``).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import INTERPRET, cdiv, load_f64_scalar
from .attention_common import (MASK_KINDS, batch_offsets, block_dims, causal_key_bounds, dropout_keep,
                               interpret_blocks, score_mask, seq_bucket)
from .autotune import autotune

KEY = ["BLOCK_D", "BLOCK_DV", "IS_CAUSAL", "MASK_KIND", "HAS_DROPOUT", "SEQ_BUCKET"]
DKDV_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
                for bm, bn in ((32, 64), (32, 128), (64, 64), (64, 128)) for s in (2, 3) for w in (4, 8)]
DQ_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
              for bm, bn in ((64, 32), (128, 32), (64, 64), (128, 64)) for s in (2, 3) for w in (4, 8)]
DELTA_BLOCK = 64


@triton.jit
def _bwd_delta(O, DO, DELTA, L, DV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr, ACC: tl.constexpr):
    """Δ[bh, i] = Σ_d O[bh, i, d] · dO[bh, i, d] (both contiguous (nbh, L, DV))."""
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    ptrs = bh * L * DV + offs_m[:, None] * DV + offs_dv[None, :]
    ok = (offs_m[:, None] < L) & (offs_dv[None, :] < DV)
    o = tl.load(O + ptrs, mask=ok, other=0.0).to(ACC)
    do = tl.load(DO + ptrs, mask=ok, other=0.0).to(ACC)
    tl.store(DELTA + bh * L + offs_m, tl.sum(o * do, 1), mask=offs_m < L)


@triton.jit
def _dkdv_tile(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, start_m, offs_n, L, S, scale,
               causal_offset, sqm, sqd, smm, smn, seed, rng_base, dropout_p, drop_scale,
               D: tl.constexpr, DV: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
               MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
               INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    """dK/dV contributions of query rows [start_m, start_m + BLOCK_M), computed on transposed tiles (keys × queries)."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_ok = offs_m < L
    q = tl.load(q_base + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=m_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    do = tl.load(do_base + offs_m[:, None] * DV + offs_dv[None, :], mask=m_ok[:, None] & (offs_dv[None, :] < DV),
                 other=0.0)
    lse = tl.load(lse_base + offs_m, mask=m_ok, other=float("inf"))  # rows past L: P = 0
    delta = tl.load(delta_base + offs_m, mask=m_ok, other=0.0)
    if UPCAST:
        q = q.to(dk.dtype)
        do = do.to(dk.dtype)
    st = tl.dot(k, tl.trans(q), input_precision=INPUT_PRECISION, out_dtype=dk.dtype) * scale
    # Keys past S need no mask here: their dK/dV rows are never stored and feed no other row.
    st = score_mask(st, offs_m[None, :], offs_n[:, None], L, S, causal_offset,
                    mask_base + offs_m[None, :] * smm + offs_n[:, None] * smn, IS_CAUSAL, MASK_KIND, EDGE)
    pt = tl.exp(st - lse[None, :])
    dpt = tl.dot(v, tl.trans(do), input_precision=INPUT_PRECISION, out_dtype=dk.dtype)
    if HAS_DROPOUT:
        keep = dropout_keep(seed, rng_base, offs_m[None, :], offs_n[:, None], S, dropout_p)
        pdt = tl.where(keep, pt * drop_scale, 0.0)
        dpt = tl.where(keep, dpt * drop_scale, 0.0)
    else:
        pdt = pt
    dv = tl.dot(pdt.to(do.dtype), do, dv, input_precision=INPUT_PRECISION, out_dtype=dv.dtype)
    dst = pt * (dpt - delta[None, :])
    dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=INPUT_PRECISION, out_dtype=dk.dtype)
    return dk, dv


@autotune(configs=DKDV_CONFIGS, key=KEY)
@triton.jit(do_not_specialize=["seed", "rng_offset", "causal_offset"])
def _bwd_dkdv(Q, K, V, MASK, DO, LSE, DELTA, DK, DV_, batch_shape, sqb, skb, svb, smb,
              sqh, sqm, sqd, skh, skn, skd, svh, svn, svd, smh, smm, smn,
              H, HK, GROUP, L, S, scale_bits, causal_offset, seed, rng_offset, dropout_p, drop_scale_bits, SEQ_BUCKET,
              D: tl.constexpr, DV: tl.constexpr, NBATCH: tl.constexpr, IS_CAUSAL: tl.constexpr,
              MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
              INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, ACC: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    bhk = tl.program_id(1)
    z = bhk // HK
    scale = load_f64_scalar(scale_bits).to(ACC)
    drop_scale = load_f64_scalar(drop_scale_bits).to(ACC)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    n_ok = offs_n < S
    first_bh = z * H + (bhk % HK) * GROUP
    _, ok, ov, _, _ = batch_offsets(first_bh, H, GROUP, batch_shape, sqb, skb, svb, sqb, smb, sqh, skh, svh, sqh, smh,
                                    NBATCH)
    k = tl.load(K + ok + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=n_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    v = tl.load(V + ov + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                mask=n_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
    if UPCAST:
        k = k.to(ACC)
        v = v.to(ACC)
    dk = tl.zeros([BLOCK_N, BLOCK_D], ACC)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], ACC)
    if IS_CAUSAL:  # query rows that see some of these keys start at lo; from band_end on they see all
        lo = tl.maximum(start_n - causal_offset, 0) // BLOCK_M * BLOCK_M
        band_end = tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - causal_offset, 0), BLOCK_M) * BLOCK_M
        band_end = tl.minimum(tl.maximum(band_end, lo), tl.cdiv(L, BLOCK_M) * BLOCK_M)
    else:
        lo = 0
        band_end = 0
    for g in range(0, GROUP):
        bh = first_bh + g
        oq, _, _, _, om = batch_offsets(bh, H, GROUP, batch_shape, sqb, skb, svb, sqb, smb, sqh, skh, svh, sqh, smh,
                                        NBATCH)
        bh64 = bh.to(tl.int64)
        q_base, do_base, mask_base = Q + oq, DO + bh64 * L * DV, MASK + om
        lse_base, delta_base = LSE + bh64 * L, DELTA + bh64 * L
        rng_base = rng_offset + bh64 * L * S
        for start_m in range(lo, band_end, BLOCK_M):
            dk, dv = _dkdv_tile(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, start_m, offs_n, L, S,
                                scale, causal_offset, sqm, sqd, smm, smn, seed, rng_base, dropout_p, drop_scale, D, DV,
                                True, IS_CAUSAL, MASK_KIND, HAS_DROPOUT, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_D,
                                BLOCK_DV)
        for start_m in range(band_end, L, BLOCK_M):
            dk, dv = _dkdv_tile(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, start_m, offs_n, L, S,
                                scale, causal_offset, sqm, sqd, smm, smn, seed, rng_base, dropout_p, drop_scale, D, DV,
                                False, IS_CAUSAL, MASK_KIND, HAS_DROPOUT, UPCAST, INPUT_PRECISION, BLOCK_M, BLOCK_D,
                                BLOCK_DV)
    bhk64 = bhk.to(tl.int64)
    tl.store(DK + bhk64 * S * D + offs_n[:, None] * D + offs_d[None, :], (dk * scale).to(DK.dtype.element_ty),
             mask=n_ok[:, None] & (offs_d[None, :] < D))
    tl.store(DV_ + bhk64 * S * DV + offs_n[:, None] * DV + offs_dv[None, :], dv.to(DV_.dtype.element_ty),
             mask=n_ok[:, None] & (offs_dv[None, :] < DV))


@triton.jit
def _dq_tile(dq, q, do, lse, delta, k_base, v_base, mask_base, dmask_base, start_n, offs_m, L, S, scale,
             causal_offset, skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale,
             D: tl.constexpr, DV: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
             MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, MASK_GRAD: tl.constexpr, UPCAST: tl.constexpr,
             INPUT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    kt_ptrs = k_base + offs_n[None, :] * skn + offs_d[:, None] * skd
    vt_ptrs = v_base + offs_n[None, :] * svn + offs_dv[:, None] * svd
    if EDGE:
        kt = tl.load(kt_ptrs, mask=(offs_n[None, :] < S) & (offs_d[:, None] < D), other=0.0)
        vt = tl.load(vt_ptrs, mask=(offs_n[None, :] < S) & (offs_dv[:, None] < DV), other=0.0)
    else:
        kt = tl.load(kt_ptrs, mask=offs_d[:, None] < D, other=0.0)
        vt = tl.load(vt_ptrs, mask=offs_dv[:, None] < DV, other=0.0)
    if UPCAST:
        kt = kt.to(dq.dtype)
        vt = vt.to(dq.dtype)
    s = tl.dot(q, kt, input_precision=INPUT_PRECISION, out_dtype=dq.dtype) * scale
    s = score_mask(s, offs_m[:, None], offs_n[None, :], L, S, causal_offset,
                   mask_base + offs_m[:, None] * smm + offs_n[None, :] * smn, IS_CAUSAL, MASK_KIND, EDGE)
    p = tl.exp(s - lse[:, None])
    dp = tl.dot(do, vt, input_precision=INPUT_PRECISION, out_dtype=dq.dtype)
    if HAS_DROPOUT:
        keep = dropout_keep(seed, rng_base, offs_m[:, None], offs_n[None, :], S, dropout_p)
        dp = tl.where(keep, dp * drop_scale, 0.0)
    ds = p * (dp - delta[:, None])
    if MASK_GRAD:
        tl.store(dmask_base + offs_m[:, None] * S + offs_n[None, :], ds.to(dmask_base.dtype.element_ty),
                 mask=(offs_m[:, None] < L) & (offs_n[None, :] < S))
    return tl.dot(ds.to(kt.dtype), tl.trans(kt), dq, input_precision=INPUT_PRECISION, out_dtype=dq.dtype)


@autotune(configs=DQ_CONFIGS, key=KEY + ["MASK_GRAD"])
@triton.jit(do_not_specialize=["seed", "rng_offset", "causal_offset"])
def _bwd_dq(Q, K, V, MASK, DO, LSE, DELTA, DQ, DMASK, batch_shape, sqb, skb, svb, smb,
            sqh, sqm, sqd, skh, skn, skd, svh, svn, svd, smh, smm, smn,
            H, GROUP, L, S, scale_bits, causal_offset, seed, rng_offset, dropout_p, drop_scale_bits, SEQ_BUCKET,
            D: tl.constexpr, DV: tl.constexpr, NBATCH: tl.constexpr, IS_CAUSAL: tl.constexpr,
            MASK_KIND: tl.constexpr, HAS_DROPOUT: tl.constexpr, MASK_GRAD: tl.constexpr, UPCAST: tl.constexpr,
            INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, ACC: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    bh64 = bh.to(tl.int64)
    oq, ok, ov, _, om = batch_offsets(bh, H, GROUP, batch_shape, sqb, skb, svb, sqb, smb, sqh, skh, svh, sqh, smh,
                                      NBATCH)
    scale = load_f64_scalar(scale_bits).to(ACC)
    drop_scale = load_f64_scalar(drop_scale_bits).to(ACC)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_ok = offs_m < L
    q = tl.load(Q + oq + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=m_ok[:, None] & (offs_d[None, :] < D),
                other=0.0)
    do = tl.load(DO + bh64 * L * DV + offs_m[:, None] * DV + offs_dv[None, :],
                 mask=m_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
    if UPCAST:
        q = q.to(ACC)
        do = do.to(ACC)
    lse = tl.load(LSE + bh64 * L + offs_m, mask=m_ok, other=float("inf"))
    delta = tl.load(DELTA + bh64 * L + offs_m, mask=m_ok, other=0.0)
    rng_base = rng_offset + bh64 * L * S
    dq = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    k_base, v_base, mask_base, dmask_base = K + ok, V + ov, MASK + om, DMASK + bh64 * L * S
    full, hi = causal_key_bounds(start_m, L, S, causal_offset, IS_CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in range(0, full, BLOCK_N):
        dq = _dq_tile(dq, q, do, lse, delta, k_base, v_base, mask_base, dmask_base, start_n, offs_m, L, S, scale,
                      causal_offset, skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale, D, DV, False,
                      IS_CAUSAL, MASK_KIND, HAS_DROPOUT, MASK_GRAD, UPCAST, INPUT_PRECISION, BLOCK_N, BLOCK_D,
                      BLOCK_DV)
    for start_n in range(full, hi, BLOCK_N):
        dq = _dq_tile(dq, q, do, lse, delta, k_base, v_base, mask_base, dmask_base, start_n, offs_m, L, S, scale,
                      causal_offset, skn, skd, svn, svd, smm, smn, seed, rng_base, dropout_p, drop_scale, D, DV, True,
                      IS_CAUSAL, MASK_KIND, HAS_DROPOUT, MASK_GRAD, UPCAST, INPUT_PRECISION, BLOCK_N, BLOCK_D,
                      BLOCK_DV)
    if MASK_GRAD:  # keys past the causal limit got no tile above; their mask gradient is 0
        for start_n in range(hi // BLOCK_N * BLOCK_N, S, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            tl.store(dmask_base + offs_m[:, None] * S + offs_n[None, :], tl.zeros([BLOCK_M, BLOCK_N], ACC).to(
                DMASK.dtype.element_ty), mask=m_ok[:, None] & (offs_n[None, :] < S) & (offs_n[None, :] >= hi))
    tl.store(DQ + bh64 * L * D + offs_m[:, None] * D + offs_d[None, :], (dq * scale).to(DQ.dtype.element_ty),
             mask=m_ok[:, None] & (offs_d[None, :] < D))


def backward(dq, dk, dv, dmask, delta, do, q, k, v, out, lse, mask, mask_kind, batch_shape, strides, H, group,
             scale_bits, causal_offset, is_causal, seed, rng_offset, dropout_p, drop_scale_bits, input_precision) -> None:
    """Fill dq/dk/dv (contiguous, q's/k's/v's shapes), dmask (contiguous (*B, Hq, L, S) or None)
    and ``delta`` (scratch shaped like ``lse``).

    ``do`` and ``out`` are contiguous (*B, Hq, L, DV); the rest is as for ``attention.forward``.
    With L = 0 or S = 0 the loops run no trips and the gradients come out 0.
    """
    L, D = q.shape[-2], q.shape[-1]
    S, DV = k.shape[-2], v.shape[-1]
    nbh = lse.shape[0]
    hk = k.shape[-3]
    nbk = nbh // H * hk if H else 0
    (sqb, sq), (skb, sk), (svb, sv), _, (smb, sm) = strides
    block_d, block_dv = block_dims(D, DV)
    meta = interpret_blocks(L, S) if INTERPRET else {}
    common = dict(D=D, DV=DV, NBATCH=len(batch_shape), IS_CAUSAL=bool(is_causal), MASK_KIND=MASK_KINDS[mask_kind],
                  HAS_DROPOUT=dropout_p > 0, UPCAST=INTERPRET, INPUT_PRECISION=input_precision, BLOCK_D=block_d,
                  BLOCK_DV=block_dv, ACC=getattr(tl, FLOAT_COMPUTE_NAME[q.dtype.name]), **meta)
    tail = (scale_bits, causal_offset, seed, rng_offset, float(dropout_p), drop_scale_bits, seq_bucket(L, S))
    mask_arg = mask if mask is not None else q
    if nbh and L:
        launch(_bwd_delta, (cdiv(L, DELTA_BLOCK), nbh), out, do, delta, L, DV=DV, BLOCK_M=DELTA_BLOCK,
               BLOCK_DV=block_dv, ACC=common["ACC"])
    if nbk and S:
        launch(_bwd_dkdv, lambda META: (cdiv(S, META["BLOCK_N"]), nbk), q, k, v, mask_arg, do, lse, delta, dk,
               dv, batch_shape, sqb, skb, svb, smb, *sq, *sk, *sv, *sm, H, hk, group, L, S, *tail, **common)
    if nbh and L:
        launch(_bwd_dq, lambda META: (cdiv(L, META["BLOCK_M"]), nbh), q, k, v, mask_arg, do, lse, delta, dq,
               dmask if dmask is not None else dq, batch_shape, sqb, skb, svb, smb, *sq, *sk, *sv, *sm, H, group, L, S,
               *tail, MASK_GRAD=dmask is not None, **common)
