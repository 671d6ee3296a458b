"""Batch normalization: one fused kernel forward, one backward; one program per channel.

The input is seen as (N, C, S) (S: the spatial extent, collapsed by the caller) with any strides.

Forward, training: the program walks its channel's N*S values in chunks; each chunk's mean and
sum of squared deviations are exact (two passes over registers), and chunks merge with Chan's
parallel Welford formula, so a large mean does not eat the variance's precision. It stores the
batch mean and ``rstd = 1 / sqrt(var + eps)`` (biased variance) for the backward, updates the
running statistics in place (``running = (1 - momentum) * running + momentum * batch``, the
unbiased variance, as PyTorch), then normalizes with the affine weight and bias. Eval: the
running statistics normalize, nothing is updated. Statistics in fp32 (fp64 for fp64 input).

Backward: per channel ``sum(dy)`` and ``sum(dy * xhat)`` (= d bias, d weight), then
``dx = w * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)`` in training, ``w * rstd * dy``
in eval. dx is written contiguous.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import f64_bits, load_f64_scalar, next_pow2, per_mode

MAX_BLOCK = per_mode(16384, 1024)


@triton.jit
def _offsets(j, S, sN, sS):
    return (j // S) * sN + (j % S) * sS


@triton.jit(do_not_specialize=["eps_bits", "mom_bits"])
def _bn_fwd_kernel(x, y, w, b, rmean, rvar, smean, srstd, M, S, sN, sC, sS, ysN, ysC, ysS, eps_bits, mom_bits,
                   TRAINING: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, UPDATE: tl.constexpr,
                   COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    xc = x + c * sC
    yc = y + c * ysC
    eps = load_f64_scalar(eps_bits).to(COMPUTE)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    if TRAINING:
        count = tl.zeros((), COMPUTE)
        mean = tl.zeros((), COMPUTE)
        m2 = tl.zeros((), COMPUTE)
        total = count + M
        # Statistics of x - (the channel's first value): a large common offset no longer eats the
        # sums' precision (as layer_norm.py); the pivot is added back to the mean at the end.
        pivot = tl.load(xc).to(COMPUTE)
        for start in range(0, M, BLOCK):
            j = start + lanes
            m = j < M
            v = tl.load(xc + _offsets(j, S, sN, sS), mask=m, other=0).to(COMPUTE) - pivot
            nb = tl.minimum(total - start, BLOCK)
            mb = tl.sum(tl.where(m, v, 0), axis=0) / nb
            d = tl.where(m, v - mb, 0)
            m2b = tl.sum(d * d, axis=0)
            n = count + nb
            delta = mb - mean
            mean = mean + delta * (nb / n)
            m2 = m2 + m2b + delta * delta * (count * nb / n)
            count = n
        var = m2 / count
        mean = mean + pivot
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(smean + c, mean)
        tl.store(srstd + c, rstd)
        if UPDATE:
            mom = load_f64_scalar(mom_bits).to(COMPUTE)
            unbiased = m2 / (count - 1.0)
            rm = tl.load(rmean + c).to(COMPUTE)
            rv = tl.load(rvar + c).to(COMPUTE)
            tl.store(rmean + c, ((1.0 - mom) * rm + mom * mean).to(rmean.dtype.element_ty))
            tl.store(rvar + c, ((1.0 - mom) * rv + mom * unbiased).to(rvar.dtype.element_ty))
    else:
        mean = tl.load(rmean + c).to(COMPUTE)
        rstd = 1.0 / tl.sqrt(tl.load(rvar + c).to(COMPUTE) + eps)
    scale = rstd
    shift = tl.zeros((), COMPUTE)
    if HAS_W:
        scale = scale * tl.load(w + c).to(COMPUTE)
    if HAS_B:
        shift = shift + tl.load(b + c).to(COMPUTE)
    for start in range(0, M, BLOCK):
        j = start + lanes
        m = j < M
        v = tl.load(xc + _offsets(j, S, sN, sS), mask=m, other=0).to(COMPUTE)
        r = (v - mean) * scale + shift  # not v * scale - mean * scale: that cancels when var ~ 0
        tl.store(yc + _offsets(j, S, ysN, ysS), r.to(y.dtype.element_ty), mask=m)


@triton.jit
def _bn_bwd_kernel(x, dy, dx, w, mean_, rstd_, dw, db, M, S, sN, sC, sS, gN, gC, gS, dN, dC, dS,
                   TRAINING: tl.constexpr, HAS_W: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    xc = x + c * sC
    gc = dy + c * gC
    dxc = dx + c * dC
    mean = tl.load(mean_ + c).to(COMPUTE)
    rstd = tl.load(rstd_ + c).to(COMPUTE)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    sum_dy = tl.zeros((), COMPUTE)
    sum_dyx = tl.zeros((), COMPUTE)
    for start in range(0, M, BLOCK):
        j = start + lanes
        m = j < M
        v = tl.load(xc + _offsets(j, S, sN, sS), mask=m, other=0).to(COMPUTE)
        g = tl.load(gc + _offsets(j, S, gN, gS), mask=m, other=0).to(COMPUTE)
        sum_dy += tl.sum(g, axis=0)
        sum_dyx += tl.sum(tl.where(m, g * (v - mean) * rstd, 0), axis=0)
    tl.store(dw + c, sum_dyx)
    tl.store(db + c, sum_dy)
    k = rstd
    if HAS_W:
        k = k * tl.load(w + c).to(COMPUTE)
    inv_m = 1.0 / (sum_dy * 0 + M)  # in COMPUTE (M may arrive as a constexpr)
    for start in range(0, M, BLOCK):
        j = start + lanes
        m = j < M
        g = tl.load(gc + _offsets(j, S, gN, gS), mask=m, other=0).to(COMPUTE)
        if TRAINING:
            v = tl.load(xc + _offsets(j, S, sN, sS), mask=m, other=0).to(COMPUTE)
            xhat = (v - mean) * rstd
            r = k * (g - sum_dy * inv_m - xhat * (sum_dyx * inv_m))
        else:
            r = k * g
        tl.store(dxc + _offsets(j, S, dN, dS), r.to(dx.dtype.element_ty), mask=m)


def _block(M: int) -> int:
    return max(16, min(MAX_BLOCK, next_pow2(max(M, 1))))


def _compute(dtype_name: str):
    return getattr(tl, FLOAT_COMPUTE_NAME[dtype_name])


def batch_norm_forward(y, y_strides, x, strides, w, b, running_mean, running_var, save_mean, save_rstd, *, N, C, S,
                       training: bool, update: bool, momentum: float, eps: float) -> None:
    """``x`` is (N, C, S) through ``strides`` (sN, sC, sS), ``y`` through ``y_strides``. In training,
    ``save_mean``/``save_rstd`` (C,) get the batch statistics and, with ``update``, the running
    statistics are updated in place; in eval ``running_*`` normalize."""
    M = N * S
    if C == 0:
        return
    sN, sC, sS = strides
    dummy = save_mean
    launch(_bn_fwd_kernel, (C,), x, y, w if w is not None else dummy, b if b is not None else dummy,
           running_mean if running_mean is not None else dummy, running_var if running_var is not None else dummy,
           save_mean, save_rstd, M, S, sN, sC, sS, *y_strides, f64_bits(eps), f64_bits(momentum),
           TRAINING=bool(training),
           HAS_W=w is not None, HAS_B=b is not None, UPDATE=bool(update), COMPUTE=_compute(save_mean.dtype.name),
           BLOCK=_block(M))


def batch_norm_backward(dx, dx_strides, dw, db, x, x_strides, dy, dy_strides, w, mean, rstd, *, N, C, S,
                        training: bool) -> None:
    """``dx`` (N, C, S) through ``dx_strides``; ``dw``/``db`` (C,) in the statistics' dtype."""
    if C == 0:
        return
    launch(_bn_bwd_kernel, (C,), x, dy, dx, w if w is not None else mean, mean, rstd, dw, db, N * S, S,
           *x_strides, *dy_strides, *dx_strides, TRAINING=bool(training), HAS_W=w is not None,
           COMPUTE=_compute(mean.dtype.name), BLOCK=_block(N * S))
