"""Fused optimiser updates: one kernel per parameter per step does the whole update
(weight decay, momentum / moments, bias correction, the write), reading each state once.

Parameters and states are contiguous and updated in place. Hyper-parameters arrive as fp32
scalars; arithmetic is fp32 (fp64 for fp64 parameters), cast on store.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..runtime.launch import launch
from ._common import elementwise_block, grid_1d


@triton.jit
def _sgd_kernel(p, g, buf, n, lr, weight_decay, momentum, dampening,
                HAS_MOMENTUM: tl.constexpr, FIRST: tl.constexpr, NESTEROV: tl.constexpr, MAXIMIZE: tl.constexpr,
                BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    F: tl.constexpr = tl.float64 if p.dtype.element_ty == tl.float64 else tl.float32
    w = tl.load(p + offs, mask=mask).to(F)
    d = tl.load(g + offs, mask=mask).to(F)
    if MAXIMIZE:
        d = -d
    d = d + weight_decay * w
    if HAS_MOMENTUM:
        if FIRST:
            b = d
        else:
            b = tl.load(buf + offs, mask=mask).to(F) * momentum + (1.0 - dampening) * d
        tl.store(buf + offs, b.to(buf.dtype.element_ty), mask=mask)
        if NESTEROV:
            d = d + momentum * b
        else:
            d = b
    tl.store(p + offs, (w - lr * d).to(p.dtype.element_ty), mask=mask)


@triton.jit
def _adam_kernel(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, bias_c1,
                 bias_c2_sqrt, DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr, AMSGRAD: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    F: tl.constexpr = tl.float64 if p.dtype.element_ty == tl.float64 else tl.float32
    w = tl.load(p + offs, mask=mask).to(F)
    d = tl.load(g + offs, mask=mask).to(F)
    if MAXIMIZE:
        d = -d
    if DECOUPLED:  # AdamW: shrink the weight, not the gradient
        w = w * (1.0 - lr * weight_decay)
    else:
        d = d + weight_decay * w
    m = tl.load(exp_avg + offs, mask=mask).to(F) * beta1 + (1.0 - beta1) * d
    v = tl.load(exp_avg_sq + offs, mask=mask).to(F) * beta2 + (1.0 - beta2) * d * d
    tl.store(exp_avg + offs, m.to(exp_avg.dtype.element_ty), mask=mask)
    tl.store(exp_avg_sq + offs, v.to(exp_avg_sq.dtype.element_ty), mask=mask)
    if AMSGRAD:  # the denominator uses the running max of the second moments (v itself stays the EMA)
        v = tl.maximum(tl.load(max_exp_avg_sq + offs, mask=mask).to(F), v)
        tl.store(max_exp_avg_sq + offs, v.to(max_exp_avg_sq.dtype.element_ty), mask=mask)
    denom = tl.sqrt(v) / bias_c2_sqrt + eps
    tl.store(p + offs, (w - (lr / bias_c1) * m / denom).to(p.dtype.element_ty), mask=mask)


def sgd_step(p, g, buf, *, lr, weight_decay, momentum, dampening, nesterov, maximize, first) -> None:
    n = p.numel()
    if n == 0:
        return
    has_m = momentum != 0
    block = elementwise_block(n)
    launch(_sgd_kernel, grid_1d(n, block), p, g, buf if has_m else p, n, float(lr), float(weight_decay),
           float(momentum), float(dampening), HAS_MOMENTUM=has_m, FIRST=bool(first), NESTEROV=bool(nesterov),
           MAXIMIZE=bool(maximize), BLOCK=block)


def adam_step(p, g, exp_avg, exp_avg_sq, *, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,
              max_exp_avg_sq=None) -> None:
    """One Adam/AdamW update in place; ``max_exp_avg_sq`` given means amsgrad (it is updated too)."""
    n = p.numel()
    if n == 0:
        return
    bias_c1 = 1.0 - beta1 ** step
    bias_c2_sqrt = (1.0 - beta2 ** step) ** 0.5
    ams = max_exp_avg_sq is not None
    block = elementwise_block(n)
    launch(_adam_kernel, grid_1d(n, block), p, g, exp_avg, exp_avg_sq, max_exp_avg_sq if ams else exp_avg_sq,
           n, float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), float(bias_c1),
           float(bias_c2_sqrt), DECOUPLED=bool(decoupled), MAXIMIZE=bool(maximize), AMSGRAD=ams,
           BLOCK=block)


# ----- issue 15 (nn15): RMSprop and Adagrad, torch's update rules in one pass each ------------------
@triton.jit
def _rmsprop_kernel(p, g, square_avg, grad_avg, buf, n, lr, alpha, eps, weight_decay, momentum,
                    CENTERED: tl.constexpr, HAS_MOMENTUM: tl.constexpr, MAXIMIZE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    F: tl.constexpr = tl.float64 if p.dtype.element_ty == tl.float64 else tl.float32
    w = tl.load(p + offs, mask=mask).to(F)
    d = tl.load(g + offs, mask=mask).to(F)
    if MAXIMIZE:
        d = -d
    d = d + weight_decay * w
    sq = tl.load(square_avg + offs, mask=mask).to(F) * alpha + (1.0 - alpha) * d * d
    tl.store(square_avg + offs, sq.to(square_avg.dtype.element_ty), mask=mask)
    if CENTERED:
        ga = tl.load(grad_avg + offs, mask=mask).to(F)
        ga = ga + (1.0 - alpha) * (d - ga)  # torch's lerp
        tl.store(grad_avg + offs, ga.to(grad_avg.dtype.element_ty), mask=mask)
        avg = tl.sqrt(sq - ga * ga) + eps
    else:
        avg = tl.sqrt(sq) + eps
    if HAS_MOMENTUM:
        b = tl.load(buf + offs, mask=mask).to(F) * momentum + d / avg
        tl.store(buf + offs, b.to(buf.dtype.element_ty), mask=mask)
        w = w - lr * b
    else:
        w = w - lr * d / avg
    tl.store(p + offs, w.to(p.dtype.element_ty), mask=mask)


@triton.jit
def _adagrad_kernel(p, g, state_sum, n, clr, eps, weight_decay, MAXIMIZE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    F: tl.constexpr = tl.float64 if p.dtype.element_ty == tl.float64 else tl.float32
    w = tl.load(p + offs, mask=mask).to(F)
    d = tl.load(g + offs, mask=mask).to(F)
    if MAXIMIZE:
        d = -d
    d = d + weight_decay * w
    s = tl.load(state_sum + offs, mask=mask).to(F) + d * d
    tl.store(state_sum + offs, s.to(state_sum.dtype.element_ty), mask=mask)
    tl.store(p + offs, (w - clr * d / (tl.sqrt(s) + eps)).to(p.dtype.element_ty), mask=mask)


def rmsprop_step(p, g, square_avg, grad_avg, momentum_buffer, *, lr, alpha, eps, weight_decay, momentum, centered,
                 maximize) -> None:
    n = p.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    has_m = momentum > 0
    launch(_rmsprop_kernel, grid_1d(n, block), p, g, square_avg, grad_avg if centered else square_avg,
           momentum_buffer if has_m else square_avg, n, float(lr), float(alpha), float(eps), float(weight_decay),
           float(momentum), CENTERED=bool(centered), HAS_MOMENTUM=has_m, MAXIMIZE=bool(maximize), BLOCK=block)


def adagrad_step(p, g, state_sum, *, clr, eps, weight_decay, maximize) -> None:
    n = p.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    launch(_adagrad_kernel, grid_1d(n, block), p, g, state_sum, n, float(clr), float(eps), float(weight_decay),
           MAXIMIZE=bool(maximize), BLOCK=block)
