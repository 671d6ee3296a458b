"""Fused cross-entropy kernels: log-softmax and negative log-likelihood in one pass over each
row of logits, and the matching backward (softmax - one_hot) without materialising either.

Rows are processed BLOCK_M at a time; classes in tiles of BLOCK_C with an online
log-sum-exp (running max and rescaled sum), so any number of classes works. Low precision
inputs are loaded and computed in fp32 (fp64 stays fp64); per-row losses and log-sum-exps are
kept in that compute dtype.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..core.launch import launch
from ._common import INTERPRET


@triton.jit
def _cross_entropy_fwd_kernel(x, target, loss, lse_out, N, C, sxn, sxc, ignore_index,
                              BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr):
    F: tl.constexpr = loss.dtype.element_ty  # fp32, or fp64 for fp64 logits
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < N
    m = tl.full((BLOCK_M,), float("-inf"), F)
    s = tl.zeros((BLOCK_M,), F)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols < C)[None, :]
        v = tl.load(x + rows[:, None] * sxn + cols[None, :] * sxc, mask=mask, other=float("-inf")).to(F)
        m_new = tl.maximum(m, tl.max(v, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new[:, None]), axis=1)
        m = m_new
    lse = m + tl.log(s)
    t = tl.load(target + rows, mask=rmask, other=ignore_index)
    valid = rmask & (t != ignore_index)
    xt = tl.load(x + rows * sxn + tl.where(valid, t, 0) * sxc, mask=valid, other=0.0).to(F)
    tl.store(loss + rows, tl.where(valid, lse - xt, 0.0), mask=rmask)
    tl.store(lse_out + rows, lse, mask=rmask)


@triton.jit
def _cross_entropy_bwd_kernel(dx, x, target, lse_in, g, g_stride, scale, N, C, sxn, sxc, sdn, sdc, ignore_index,
                              BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr):
    F: tl.constexpr = lse_in.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < N
    t = tl.load(target + rows, mask=rmask, other=ignore_index)
    valid = rmask & (t != ignore_index)
    lse = tl.load(lse_in + rows, mask=rmask, other=0.0)
    gr = tl.load(g + rows * g_stride, mask=rmask, other=0.0).to(F) * scale
    gr = tl.where(valid, gr, 0.0)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols < C)[None, :]
        v = tl.load(x + rows[:, None] * sxn + cols[None, :] * sxc, mask=mask, other=0.0).to(F)
        p = tl.exp(v - lse[:, None])
        onehot = (cols[None, :] == t[:, None]).to(F)
        d = gr[:, None] * (p - onehot)
        tl.store(dx + rows[:, None] * sdn + cols[None, :] * sdc, d.to(dx.dtype.element_ty), mask=mask)


def _blocks(N, C):
    block_c = min(triton.next_power_of_2(max(C, 1)), 4096 if INTERPRET else 1024)
    block_m = max(1, min(triton.next_power_of_2(max(N, 1)), (16384 if INTERPRET else 4096) // block_c))
    return block_m, block_c


def cross_entropy_forward(loss, lse, x, target, ignore_index: int) -> None:
    """loss[i] = logsumexp(x[i]) - x[i, target[i]] (0 where target == ignore_index); lse[i] kept."""
    N, C = x.shape
    if N == 0:
        return
    bm, bc = _blocks(N, C)
    launch(_cross_entropy_fwd_kernel, (triton.cdiv(N, bm),), x, target, loss, lse, N, C, x.stride(0), x.stride(1),
           ignore_index, BLOCK_M=bm, BLOCK_C=bc)


def cross_entropy_backward(dx, x, target, lse, g, scale: float, ignore_index: int) -> None:
    """dx[i] = g[i] * scale * (softmax(x[i]) - one_hot(target[i])); ``g`` may be 0-d (broadcast)."""
    N, C = x.shape
    if N == 0:
        return
    bm, bc = _blocks(N, C)
    g_stride = 0 if g.ndim == 0 else g.stride(0)
    launch(_cross_entropy_bwd_kernel, (triton.cdiv(N, bm),), dx, x, target, lse, g, g_stride, float(scale), N, C,
           x.stride(0), x.stride(1), dx.stride(0), dx.stride(1), ignore_index, BLOCK_M=bm, BLOCK_C=bc)
