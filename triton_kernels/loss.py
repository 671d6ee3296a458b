"""The loss family's kernels: fused cross-entropy (log-softmax and negative log-likelihood in one
pass over each row of logits, and the matching backward, softmax - one_hot, without materialising
either) and fused, stable binary cross-entropy with logits (one kernel each way, at the end).

Rows are processed BLOCK_M at a time; classes in tiles of BLOCK_C with an online
log-sum-exp (running max and rescaled sum), so any number of classes works. Low precision
inputs are loaded and computed in fp32 (fp64 stays fp64); per-row losses and log-sum-exps are
kept in that compute dtype.

Class weights ``w`` (HAS_WEIGHT) and label smoothing ``eps`` (SMOOTH) are compile-time options, so
the plain path compiles to the same kernel as without them. torch's definitions, per row with
``t`` its target (rows with ``t == ignore_index`` give 0), ``W = sum(w)`` and ``C`` classes:

    loss = (1 - eps) * w[t] * (lse - x[t]) + eps / C * sum_c w[c] * (lse - x[c])
    dloss/dx[c] = (1 - eps) * w[t] * (p[c] - [c == t]) + eps / C * (W * p[c] - w[c])

(``w = 1``, ``W = C`` unweighted). For a mean the forward also writes ``w[t]`` per row (1 without
weights, 0 where ignored): their sum is the mean's denominator, a device value, so nothing waits
for the device to count the targets. Targets in device memory are checked by the forward kernel
(``_common.check_index``: a target outside [0, C) reads nothing and is recorded in the device's
error flag, raised at the next sync as torch's device-side assert is); host targets were checked
on the host before the launch.

Binary cross-entropy with logits (``BCEWithLogitsLoss``): per element, with
``sp = softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)`` (never overflows) and
``lw = 1 + (pos_weight - 1) * y``:

    loss = w * ((1 - y) * x + lw * sp)
    dloss/dx = w * ((1 - y) - lw * sigmoid(-x))

One kernel computes either (BACKWARD switch) over the broadcast shape; every operand is read
through its own strides (stride 0 where broadcast: weight, pos_weight, a 0-d incoming gradient),
so nothing is expanded in memory. The output is contiguous, in fp32 (fp64 for fp64 inputs) for
the loss, in the input's dtype for the gradient. The backward multiplies by ``scale`` (1/n for
the mean reduction, passed as float64 bits).
"""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import launch
from ._common import (ELEMENTWISE_BLOCK, INTERPRET, cdiv, check_index, elementwise_block, f64_bits, grid_1d,
                      linear_index, load_f64_scalar, needs_int64, next_pow2, strided_offset)
from .elementwise import _log1p, _sigmoid


@triton.jit
def _cross_entropy_fwd_kernel(x, target, loss, lse_out, weight, wsum, wt_out, err, smoothing, smoothing_lo, N, C,
                              sxn, sxc, ignore_index, header, HAS_WEIGHT: tl.constexpr, SMOOTH: tl.constexpr,
                              STORE_WT: tl.constexpr, CHECK: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_C: tl.constexpr):
    F: tl.constexpr = loss.dtype.element_ty  # fp32, or fp64 for fp64 logits
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < N
    smoothing = tl.cast(smoothing, F) + tl.cast(smoothing_lo, F)  # float arguments arrive as fp32: hi + lo parts
    m = tl.full((BLOCK_M,), float("-inf"), F)
    s = tl.zeros((BLOCK_M,), F)
    wx = tl.zeros((BLOCK_M,), F)  # sum_c w[c] * x[c], for label smoothing
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols < C)[None, :]
        v = tl.load(x + rows[:, None] * sxn + cols[None, :] * sxc, mask=mask, other=float("-inf")).to(F)
        m_new = tl.maximum(m, tl.max(v, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new[:, None]), axis=1)
        m = m_new
        if SMOOTH:
            if HAS_WEIGHT:
                wc = tl.load(weight + cols, mask=cols < C, other=0.0).to(F)
                wx += tl.sum(tl.where(mask, v * wc[None, :], 0.0), axis=1)
            else:
                wx += tl.sum(tl.where(mask, v, 0.0), axis=1)
    lse = m + tl.log(s)
    t = tl.load(target + rows, mask=rmask, other=ignore_index)
    # A target outside [0, C) reads nothing (its row counts as ignored) and, for targets in device
    # memory (CHECK), is recorded in the device's error flag for the next sync to raise.
    valid = check_index(t, rmask & (t != ignore_index), 0, C, err, header, CHECK)
    tsafe = tl.where(valid, t, 0)
    xt = tl.load(x + rows * sxn + tsafe * sxc, mask=valid, other=0.0).to(F)
    nll = lse - xt
    if HAS_WEIGHT:
        wt = tl.where(valid, tl.load(weight + tsafe, mask=valid, other=0.0).to(F), 0.0)
        nll = wt * nll
    else:
        wt = valid.to(F)  # the unweighted mean's denominator is the count of these
    if STORE_WT:
        tl.store(wt_out + rows, wt, mask=rmask)
    if SMOOTH:
        if HAS_WEIGHT:
            W = tl.load(wsum).to(F)
        else:
            W = C * 1.0
        nll = (1.0 - smoothing) * nll + (smoothing / C) * (W * lse - wx)
    tl.store(loss + rows, tl.where(valid, nll, 0.0), mask=rmask)
    tl.store(lse_out + rows, lse, mask=rmask)


@triton.jit
def _cross_entropy_bwd_kernel(dx, x, target, lse_in, g, g_stride, scale, scale_lo, denom, weight, wsum, smoothing,
                              smoothing_lo, N, C, sxn, sxc, sdn, sdc, ignore_index, HAS_WEIGHT: tl.constexpr,
                              SMOOTH: tl.constexpr, HAS_DENOM: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_C: tl.constexpr):
    F: tl.constexpr = lse_in.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < N
    smoothing = tl.cast(smoothing, F) + tl.cast(smoothing_lo, F)  # float arguments arrive as fp32: hi + lo parts
    scale = tl.cast(scale, F) + tl.cast(scale_lo, F)
    t = tl.load(target + rows, mask=rmask, other=ignore_index)
    # Out-of-range targets were recorded by the forward; here they only must not be read through.
    valid = rmask & (t != ignore_index) & (t >= 0) & (t < C)
    lse = tl.load(lse_in + rows, mask=rmask, other=0.0)
    gr = tl.load(g + rows * g_stride, mask=rmask, other=0.0).to(F) * scale
    if HAS_DENOM:  # the mean's denominator, a device value (the forward's sum of w[t])
        gr = gr / tl.load(denom).to(F)
    gr = tl.where(valid, gr, 0.0)
    if HAS_WEIGHT:
        wt = tl.load(weight + tl.where(valid, t, 0), mask=valid, other=0.0).to(F)
        W = tl.load(wsum).to(F)
    else:
        wt = tl.full((BLOCK_M,), 1.0, F)
        W = C * 1.0
    if SMOOTH:
        wt = (1.0 - smoothing) * wt
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols < C)[None, :]
        v = tl.load(x + rows[:, None] * sxn + cols[None, :] * sxc, mask=mask, other=0.0).to(F)
        p = tl.exp(v - lse[:, None])
        onehot = (cols[None, :] == t[:, None]).to(F)
        d = p - onehot
        if HAS_WEIGHT or SMOOTH:
            d = wt[:, None] * d
        if SMOOTH:
            if HAS_WEIGHT:
                wc = tl.load(weight + cols, mask=cols < C, other=0.0).to(F)
                d += (smoothing / C) * (W * p - wc[None, :])
            else:
                d += (smoothing / C) * (W * p - 1.0)
        d = gr[:, None] * d
        tl.store(dx + rows[:, None] * sdn + cols[None, :] * sdc, d.to(dx.dtype.element_ty), mask=mask)


def _hi_lo(v: float):
    """``v`` as two fp32 values whose sum keeps ~48 bits: Triton passes Python floats as fp32, which
    would cost fp64 logits their precision (e.g. 1/3 as a mean's scale)."""
    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi)) if np.isfinite(hi) else 0.0


def _blocks(N, C):
    block_c = min(next_pow2(max(C, 1)), 4096 if INTERPRET else 1024)
    block_m = max(1, min(next_pow2(max(N, 1)), (16384 if INTERPRET else 4096) // block_c))
    return block_m, block_c


def cross_entropy_forward(loss, lse, x, target, ignore_index: int, weight=None, wsum=None, wt=None,
                          label_smoothing: float = 0.0, check=None) -> None:
    """loss[i] = logsumexp(x[i]) - x[i, target[i]] (0 where target == ignore_index); lse[i] kept.
    ``weight`` (C,) contiguous with ``wsum`` its 0-d sum; ``wt`` (N,), if given, receives
    w[target[i]] (1 without a weight; 0 where ignored): its sum is the mean's denominator;
    ``label_smoothing``: the module docstring's formula. ``check``: None (targets known to be in
    [0, C) or ignore_index) or ``(flag, header)``: record a target out of range in the device's
    error flag (``runtime/device_asserts.py``)."""
    N, C = x.shape
    if N == 0:
        return
    bm, bc = _blocks(N, C)
    has_w = weight is not None
    err, header = (loss, 0) if check is None else check
    launch(_cross_entropy_fwd_kernel, (cdiv(N, bm),), x, target, loss, lse, weight if has_w else loss,
           wsum if has_w else loss, wt if wt is not None else loss, err, *_hi_lo(label_smoothing), N, C,
           x.stride(0), x.stride(1), ignore_index, header, HAS_WEIGHT=has_w, SMOOTH=label_smoothing != 0.0,
           STORE_WT=wt is not None, CHECK=check is not None, BLOCK_M=bm, BLOCK_C=bc)


@triton.jit
def _check_targets_kernel(target, err, n, C, ignore_index, header, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < n
    t = tl.load(target + offs, mask=live, other=ignore_index)
    check_index(t, live & (t != ignore_index), 0, C, err, header, True)


def check_targets(target, C: int, ignore_index: int, check) -> None:
    """Record in the device's error flag (``check``: ``(flag, header)``) any class index of the
    contiguous ``target`` outside [0, C) that is not ``ignore_index``: for the losses written with
    other ops (nll_loss), whose reads never go out of bounds but whose errors must be raised."""
    n = target.numel()
    if n == 0:
        return
    flag, header = check
    launch(_check_targets_kernel, grid_1d(n, ELEMENTWISE_BLOCK), target, flag, n, C, ignore_index, header,
           BLOCK=ELEMENTWISE_BLOCK)


def cross_entropy_backward(dx, x, target, lse, g, scale: float, ignore_index: int, weight=None, wsum=None,
                           label_smoothing: float = 0.0, denom=None) -> None:
    """dx[i] = g[i] * scale / denom * (softmax(x[i]) - one_hot(target[i])); ``g`` may be 0-d
    (broadcast); ``denom``: a 0-d device tensor or None (1). With ``weight``/``label_smoothing``:
    the module docstring's formula."""
    N, C = x.shape
    if N == 0:
        return
    bm, bc = _blocks(N, C)
    g_stride = 0 if g.ndim == 0 else g.stride(0)
    has_w = weight is not None
    launch(_cross_entropy_bwd_kernel, (cdiv(N, bm),), dx, x, target, lse, g, g_stride, *_hi_lo(scale),
           denom if denom is not None else lse, weight if has_w else lse, wsum if has_w else lse,
           *_hi_lo(label_smoothing), N, C, x.stride(0), x.stride(1), dx.stride(0), dx.stride(1), ignore_index,
           HAS_WEIGHT=has_w, SMOOTH=label_smoothing != 0.0, HAS_DENOM=denom is not None, BLOCK_M=bm, BLOCK_C=bc)


# ----- binary_cross_entropy_with_logits ---------------------------------------------------------
@triton.jit(do_not_specialize=["scale_bits"])
def _bce_logits_kernel(x, y, w, pw, g, out, n, shape, sx, sy, sw, spw, sg, scale_bits, HAS_W: tl.constexpr,
                       HAS_PW: tl.constexpr, BACKWARD: tl.constexpr, COMPUTE: tl.constexpr, NDIM: tl.constexpr,
                       INT64: tl.constexpr, BLOCK: tl.constexpr):
    lin = linear_index(BLOCK, INT64)
    mask = lin < n
    xv = tl.load(x + strided_offset(lin, shape, sx, NDIM), mask=mask, other=0).to(COMPUTE)
    yv = tl.load(y + strided_offset(lin, shape, sy, NDIM), mask=mask, other=0).to(COMPUTE)
    if HAS_PW:
        lw = 1.0 + (tl.load(pw + strided_offset(lin, shape, spw, NDIM), mask=mask, other=0).to(COMPUTE) - 1.0) * yv
    else:
        lw = tl.full(xv.shape, 1.0, COMPUTE)
    if BACKWARD:
        r = (1.0 - yv) - lw * _sigmoid(-xv)
        gv = tl.load(g + strided_offset(lin, shape, sg, NDIM), mask=mask, other=0).to(COMPUTE)
        r = r * gv * load_f64_scalar(scale_bits).to(COMPUTE)
    else:
        sp = _log1p(tl.exp(-tl.abs(xv))) + tl.maximum(-xv, 0.0)
        r = (1.0 - yv) * xv + lw * sp
    if HAS_W:
        r = r * tl.load(w + strided_offset(lin, shape, sw, NDIM), mask=mask, other=0).to(COMPUTE)
    tl.store(out + lin, r.to(out.dtype.element_ty), mask=mask)


def _strides(t, ndim):
    return tuple(t.stride()) if ndim else (0,)


def bce_with_logits(out, x, y, w=None, pw=None, g=None, scale: float = 1.0) -> None:
    """Forward (``g`` None): out = elementwise loss. Backward: out = dloss/dx * g * scale.
    Every operand already has ``out``'s shape (broadcast operands expanded with stride 0)."""
    n = out.numel()
    if n == 0:
        return
    nd = out.ndim
    shape = tuple(out.shape) if nd else (1,)
    ops = [x, y, w if w is not None else x, pw if pw is not None else x, g if g is not None else x]
    st = [_strides(t, nd) for t in ops]
    compute = getattr(tl, FLOAT_COMPUTE_NAME[x.dtype.name])
    block = elementwise_block(n)
    launch(_bce_logits_kernel, grid_1d(n, block), *ops, out, n, shape, *st, f64_bits(scale),
           HAS_W=w is not None, HAS_PW=pw is not None, BACKWARD=g is not None, COMPUTE=compute, NDIM=len(shape),
           INT64=needs_int64(shape, *st), BLOCK=block)
