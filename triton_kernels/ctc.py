"""CTC (connectionist temporal classification) loss: the forward (alpha) and backward (beta)
recursions in log space, and the gradient with respect to the log-probabilities.

The extended target of a sample with L labels is blank, l1, blank, l2, ..., lL, blank (2L + 1
states s). One program per batch element walks time: alpha_t(s) = logsumexp(alpha_{t-1}(s),
alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) where l'(s) is a label differing from l'(s - 2)) +
log_probs[t, l'(s)], all states of a step as one vector. Each step's row is written to the (N, T,
S') ``log_alpha`` buffer (the backward pass needs it) and the next step reads the shifted rows back
from it, so a barrier separates the two on a GPU. The loss is -logsumexp of the last two states at
the sample's last input step. beta is the same walk from the end.

The gradient kernel runs one program per (t, sample): for each class c, lcab = logsumexp over the
states s with l'(s) = c of alpha_t(s) + beta_t(s), and grad = (exp(lp) - exp(lcab + nll - lp)) *
grad_out, torch's formula (the derivative with respect to the logits under a log_softmax, which is
what torch's ctc_loss returns for its log_probs argument); steps past a sample's input length get
0, and with ``zero_infinity`` so does every step of a sample whose loss is infinite.

Everything is computed in the accumulation dtype (fp32, fp64 for fp64).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import per_mode

_TL = {"float32": tl.float32, "float64": tl.float64}
_BLOCK_C = per_mode(64, 32)


@triton.jit
def _lse3(a, b, c):
    m = tl.maximum(a, tl.maximum(b, c))
    ms = tl.where(m == float("-inf"), 0.0, m)
    return ms + tl.log(tl.exp(a - ms) + tl.exp(b - ms) + tl.exp(c - ms))


@triton.jit
def _labels(tgt, off, ts, s, valid, blank):
    """l'(s): blank on even states, the target's label s // 2 on odd ones."""
    odd = (s % 2) == 1
    lab = tl.load(tgt + off + (s // 2) * ts, mask=odd & valid, other=0).to(tl.int64)
    return tl.where(odd & valid, lab, blank), odd


@triton.jit
def _ctc_alpha_kernel(lp, st, sn, sc, tgt, toff, ts, in_len, tgt_len, alpha, nll, T, SP, blank,
                      COMPUTE: tl.constexpr, BLOCK_S: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    Tb = tl.load(in_len + b)
    L = tl.load(tgt_len + b)
    off = tl.load(toff + b)
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    S2 = 2 * L + 1
    valid = s < S2
    lab, odd = _labels(tgt, off, ts, s, valid, blank)
    before = odd & valid & (s >= 3)
    lab2 = tl.load(tgt + off + (s // 2 - 1) * ts, mask=before, other=0).to(tl.int64)
    skip = before & (lab != lab2)  # a label may follow the previous label directly unless they repeat
    base = alpha + b * T * SP
    lpb = lp + b * sn
    started = (s * 0 + Tb) > 0  # as a vector: the interpreter refuses a scalar in a mask
    x0 = tl.load(lpb + lab * sc, mask=valid & (s < 2) & started, other=float("-inf")).to(COMPUTE)
    tl.store(base + s, x0, mask=s < SP)
    for t in range(1, Tb):
        tl.debug_barrier()
        row = base + (t - 1) * SP
        a0 = tl.load(row + s, mask=valid, other=float("-inf"))
        a1 = tl.load(row + s - 1, mask=valid & (s >= 1), other=float("-inf"))
        a2 = tl.load(row + s - 2, mask=skip, other=float("-inf"))
        x = tl.load(lpb + t * st + lab * sc, mask=valid, other=float("-inf")).to(COMPUTE)
        tl.store(base + t * SP + s, tl.where(valid, _lse3(a0, a1, a2) + x, float("-inf")), mask=s < SP)
    tl.debug_barrier()
    row = base + tl.maximum(Tb - 1, 0) * SP
    e1 = tl.load(row + S2 - 1)
    e2 = tl.load(row + S2 - 2, mask=S2 >= 2, other=float("-inf"))
    m = tl.maximum(e1, e2)
    ms = tl.where(m == float("-inf"), 0.0, m)
    loss = -(ms + tl.log(tl.exp(e1 - ms) + tl.exp(e2 - ms)))
    # no input step: a feasible alignment only for an empty target
    loss = tl.where(Tb > 0, loss, tl.where(L == 0, 0.0, float("inf")))
    tl.store(nll + b, loss.to(COMPUTE))


@triton.jit
def _ctc_beta_kernel(lp, st, sn, sc, tgt, toff, ts, in_len, tgt_len, beta, T, SP, blank,
                     COMPUTE: tl.constexpr, BLOCK_S: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    Tb = tl.load(in_len + b)
    L = tl.load(tgt_len + b)
    off = tl.load(toff + b)
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    S2 = 2 * L + 1
    valid = s < S2
    lab, odd = _labels(tgt, off, ts, s, valid, blank)
    after = odd & (s + 2 < S2)
    lab2 = tl.load(tgt + off + (s // 2 + 1) * ts, mask=after, other=0).to(tl.int64)
    skip = after & (lab != lab2)
    base = beta + b * T * SP
    lpb = lp + b * sn
    last = tl.maximum(Tb - 1, 0)
    started = (s * 0 + Tb) > 0  # as a vector: the interpreter refuses a scalar in a mask
    xl = tl.load(lpb + last * st + lab * sc, mask=valid & (s >= S2 - 2) & started, other=float("-inf"))
    tl.store(base + last * SP + s, xl.to(COMPUTE), mask=(s < SP) & started)
    for i in range(1, Tb):
        t = Tb - 1 - i
        tl.debug_barrier()
        row = base + (t + 1) * SP
        b0 = tl.load(row + s, mask=valid, other=float("-inf"))
        b1 = tl.load(row + s + 1, mask=s + 1 < S2, other=float("-inf"))
        b2 = tl.load(row + s + 2, mask=skip, other=float("-inf"))
        x = tl.load(lpb + t * st + lab * sc, mask=valid, other=float("-inf")).to(COMPUTE)
        tl.store(base + t * SP + s, tl.where(valid, _lse3(b0, b1, b2) + x, float("-inf")), mask=s < SP)


@triton.jit
def _ctc_grad_kernel(lp, st, sn, sc, tgt, toff, ts, in_len, tgt_len, alpha, beta, nll, gout, grad, gt, gn, gc,
                     T, SP, C, blank, ZERO_INF: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_S: tl.constexpr,
                     BLOCK_C: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1).to(tl.int64)
    Tb = tl.load(in_len + b)
    L = tl.load(tgt_len + b)
    off = tl.load(toff + b)
    loss = tl.load(nll + b)
    g = tl.load(gout + b)
    s = tl.arange(0, BLOCK_S).to(tl.int64)
    valid = s < 2 * L + 1
    lab, odd = _labels(tgt, off, ts, s, valid, blank)
    rows = b * T * SP + t * SP + s
    ab = tl.load(alpha + rows, mask=valid, other=float("-inf")) + tl.load(beta + rows, mask=valid,
                                                                           other=float("-inf"))
    keep = t < Tb
    if ZERO_INF:
        keep = keep & (loss != float("inf"))
    for c0 in range(0, C, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C).to(tl.int64)
        mc = c < C
        v = tl.where((lab[None, :] == c[:, None]) & valid[None, :], ab[None, :], float("-inf"))
        m = tl.max(v, axis=1)
        ms = tl.where(m == float("-inf"), 0.0, m)
        lcab = ms + tl.log(tl.sum(tl.exp(v - ms[:, None]), axis=1))
        x = tl.load(lp + t * st + b * sn + c * sc, mask=mc, other=0.0).to(COMPUTE)
        d = (tl.exp(x) - tl.exp(lcab + loss - x)) * g
        d = tl.where(keep, d, 0.0)
        tl.store(grad + t * gt + b * gn + c * gc, d.to(grad.dtype.element_ty), mask=mc)


def _block_s(max_target: int) -> int:
    return max(triton.next_power_of_2(2 * max_target + 1), 2)


def ctc_alpha(log_alpha, nll, lp, tgt, toff, ts: int, in_len, tgt_len, blank: int, max_target: int,
              compute: str) -> None:
    """log_alpha (N, T, S') (filled with -inf by the caller) and nll (N,) for lp (T, N, C)."""
    T, N, _ = lp.shape
    if N == 0:
        return
    launch(_ctc_alpha_kernel, (N,), lp, *lp.stride(), tgt, toff, ts, in_len, tgt_len, log_alpha, nll, T,
           log_alpha.shape[2], blank, COMPUTE=_TL[compute], BLOCK_S=_block_s(max_target))


def ctc_grad(grad, log_alpha, log_beta, nll, gout, lp, tgt, toff, ts: int, in_len, tgt_len, blank: int,
             max_target: int, zero_infinity: bool, compute: str) -> None:
    """log_beta (N, T, S') (filled with -inf by the caller), then grad (T, N, C) of sum_b gout[b] * nll[b]."""
    T, N, C = lp.shape
    if N == 0 or T == 0 or C == 0:
        return
    bs = _block_s(max_target)
    launch(_ctc_beta_kernel, (N,), lp, *lp.stride(), tgt, toff, ts, in_len, tgt_len, log_beta, T,
           log_beta.shape[2], blank, COMPUTE=_TL[compute], BLOCK_S=bs)
    launch(_ctc_grad_kernel, (T, N), lp, *lp.stride(), tgt, toff, ts, in_len, tgt_len, log_alpha, log_beta, nll,
           gout, grad, *grad.stride(), T, log_alpha.shape[2], C, blank, ZERO_INF=bool(zero_infinity),
           COMPUTE=_TL[compute], BLOCK_S=bs, BLOCK_C=_BLOCK_C)
