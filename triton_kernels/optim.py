"""Fused optimiser updates: one kernel per parameter per step does the whole update
(weight decay, momentum / moments, bias correction, the write), reading each state once.

Parameters and states are contiguous and updated in place. Hyper-parameters arrive as fp64
scalars (parameters annotated ``tl.float64``: a plain Python float would reach a compiled kernel
as fp32 and cost fp64 parameters their precision) and are rounded once to the compute dtype:
arithmetic is fp32 (fp64 for fp64 parameters), cast on store.

The AMP inputs (PyTorch's ``fused=True`` path, fed by ``GradScaler.step``), each optional:

* ``found_inf`` (fp32, one element, on the device): when it is non-zero every lane is masked
  off, so the parameter, its states and its gradient stay bit for bit as they were. The flag is
  read by the kernel, never by the host.
* ``grad_scale`` (fp32, one element): the gradient is multiplied by ``1 / grad_scale`` (the
  reciprocal taken in fp64 and rounded to fp32, as ``GradScaler.unscale_`` does), rounded to the
  gradient's dtype, used, and written back to the gradient, so a fused step leaves unscaled
  gradients behind as PyTorch's fused kernels do (and as ``unscale_`` + ``step`` would).
* ``step`` (fp32, one element, Adam): the step count on the device, already advanced for this
  step by ``advance_steps`` (ONE launch for all the counts of a parameter group: a table of
  their addresses, each ``+= 1`` unless ``found_inf`` is set). The update computes
  ``lr / (1 - beta1^t)`` and ``sqrt(1 - beta2^t)`` from it in fp64 (from lr and log(beta)),
  then rounds them to the compute dtype, as the host path rounds the same values computed in
  fp64 on the host.
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

from ..runtime.dtype_policy import FLOAT_COMPUTE_NAME
from ..runtime.launch import AddressTable, launch
from ._common import cdiv, elementwise_block, grid_1d, next_pow2, per_mode

# A program's lanes in the multi-tensor update: as many as the per-tensor kernel's block on a GPU
# (2048 lanes on 4 warps spilled the fp64 amsgrad update: 255 registers and 40 bytes of stack).
MULTI_BLOCK = per_mode(8192, 1024)


@triton.jit
def _amp_inputs(g, offs, n, found_inf, grad_scale, F: tl.constexpr, HAS_FOUND_INF: tl.constexpr,
                HAS_GRAD_SCALE: tl.constexpr):
    """(mask, gradient in F): every lane masked off when found_inf is set; the gradient unscaled
    and written back when grad_scale is given."""
    if HAS_FOUND_INF:
        n = tl.where(tl.load(found_inf) == 0.0, n, 0)
    mask = offs < n
    d = tl.load(g + offs, mask=mask)
    if HAS_GRAD_SCALE:
        inv = (1.0 / tl.load(grad_scale).to(tl.float64)).to(tl.float32)
        d = (d.to(F) * inv).to(g.dtype.element_ty)
        tl.store(g + offs, d, mask=mask)
    return mask, d.to(F)


@triton.jit
def _sgd_kernel(p, g, buf, found_inf, grad_scale, n, lr: tl.float64, weight_decay: tl.float64, momentum: tl.float64,
                dampening: tl.float64,
                HAS_MOMENTUM: tl.constexpr, FIRST: tl.constexpr, NESTEROV: tl.constexpr, MAXIMIZE: tl.constexpr,
                HAS_FOUND_INF: tl.constexpr, HAS_GRAD_SCALE: tl.constexpr, F: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lr, weight_decay, momentum, dampening = lr.to(F), weight_decay.to(F), momentum.to(F), dampening.to(F)
    mask, d = _amp_inputs(g, offs, n, found_inf, grad_scale, F, HAS_FOUND_INF, HAS_GRAD_SCALE)
    w = tl.load(p + offs, mask=mask).to(F)
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
def _adam_update(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, found_inf, grad_scale, step, offs, n, lr, beta1, beta2,
                 eps, weight_decay, step_size, bias_c2_sqrt, log_beta1, log_beta2,
                 DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr, AMSGRAD: tl.constexpr,
                 HAS_FOUND_INF: tl.constexpr, HAS_GRAD_SCALE: tl.constexpr, STEP_ON_DEVICE: tl.constexpr,
                 F: tl.constexpr):
    """The update of the lanes ``offs`` (< ``n``) of one parameter: the single-tensor kernel and the
    multi-tensor one share it, so both give the same bits."""
    mask, d = _amp_inputs(g, offs, n, found_inf, grad_scale, F, HAS_FOUND_INF, HAS_GRAD_SCALE)
    if STEP_ON_DEVICE:  # lr / (1 - b1^t) and sqrt(1 - b2^t) in fp64, as the host computes them
        t = tl.load(step).to(tl.float64)
        step_size = lr / (1.0 - tl.exp(t * log_beta1))
        bias_c2_sqrt = tl.sqrt(1.0 - tl.exp(t * log_beta2))
    # One rounding of each fp64 hyper-parameter to the compute dtype (none for fp64 parameters).
    step_size, bias_c2_sqrt, lr, eps = step_size.to(F), bias_c2_sqrt.to(F), lr.to(F), eps.to(F)
    beta1, beta2, weight_decay = beta1.to(F), beta2.to(F), weight_decay.to(F)
    w = tl.load(p + offs, mask=mask).to(F)
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
    tl.store(p + offs, (w - step_size * m / denom).to(p.dtype.element_ty), mask=mask)


@triton.jit
def _adam_kernel(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, found_inf, grad_scale, step, n, lr: tl.float64,
                 beta1: tl.float64, beta2: tl.float64, eps: tl.float64, weight_decay: tl.float64,
                 step_size: tl.float64, bias_c2_sqrt: tl.float64, log_beta1: tl.float64, log_beta2: tl.float64,
                 DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr, AMSGRAD: tl.constexpr,
                 HAS_FOUND_INF: tl.constexpr, HAS_GRAD_SCALE: tl.constexpr, STEP_ON_DEVICE: tl.constexpr,
                 F: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    _adam_update(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, found_inf, grad_scale, step, offs, n, lr, beta1, beta2,
                 eps, weight_decay, step_size, bias_c2_sqrt, log_beta1, log_beta2, DECOUPLED, MAXIMIZE, AMSGRAD,
                 HAS_FOUND_INF, HAS_GRAD_SCALE, STEP_ON_DEVICE, F)


@triton.jit
def _adam_multi_kernel(tp, tg, tm, tv, tmax, tstep, found_inf, grad_scale, lr: tl.float64, beta1: tl.float64,
                       beta2: tl.float64, eps: tl.float64, weight_decay: tl.float64, step_size: tl.float64,
                       bias_c2_sqrt: tl.float64, log_beta1: tl.float64, log_beta2: tl.float64,
                       P_T: tl.constexpr, G_T: tl.constexpr, S_T: tl.constexpr,
                       DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr, AMSGRAD: tl.constexpr,
                       HAS_FOUND_INF: tl.constexpr, HAS_GRAD_SCALE: tl.constexpr, STEP_ON_DEVICE: tl.constexpr,
                       F: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row of the block tables (address, block start, element count): the rows of
    # the parameter's, gradient's and states' tables line up, as the tensors have equal sizes.
    row = tl.program_id(0).to(tl.int64) * 3
    start = tl.load(tp + row + 1)
    n = tl.load(tp + row + 2)
    offs = start + tl.arange(0, BLOCK).to(tl.int64)
    p = tl.load(tp + row).to(tl.pointer_type(P_T))
    g = tl.load(tg + row).to(tl.pointer_type(G_T))
    m = tl.load(tm + row).to(tl.pointer_type(S_T))
    v = tl.load(tv + row).to(tl.pointer_type(S_T))
    if AMSGRAD:
        mx = tl.load(tmax + row).to(tl.pointer_type(S_T))
    else:
        mx = v
    if STEP_ON_DEVICE:  # one step count per row: its parameter's
        step = tl.load(tstep + tl.program_id(0).to(tl.int64)).to(tl.pointer_type(tl.float32))
    else:
        step = tl.load(tstep + row).to(tl.pointer_type(P_T))  # unused
    _adam_update(p, g, m, v, mx, found_inf, grad_scale, step, offs, n, lr, beta1, beta2, eps, weight_decay,
                 step_size, bias_c2_sqrt, log_beta1, log_beta2, DECOUPLED, MAXIMIZE, AMSGRAD, HAS_FOUND_INF,
                 HAS_GRAD_SCALE, STEP_ON_DEVICE, F)


@triton.jit
def _advance_steps_kernel(table, n, found_inf, HAS_FOUND_INF: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ptrs = tl.load(table + offs, mask=mask, other=0).to(tl.pointer_type(tl.float32))
    s = tl.load(ptrs, mask=mask)
    if HAS_FOUND_INF:
        s = tl.where(tl.load(found_inf) == 0.0, s + 1.0, s)
    else:
        s = s + 1.0
    tl.store(ptrs, s, mask=mask)


def sgd_step(p, g, buf, *, lr, weight_decay, momentum, dampening, nesterov, maximize, first,
             found_inf=None, grad_scale=None) -> None:
    n = p.numel()
    if n == 0:
        return
    has_m = momentum != 0
    block = elementwise_block(n)
    acc = getattr(tl, FLOAT_COMPUTE_NAME[p.dtype.name])  # the policy's compute dtype
    launch(_sgd_kernel, grid_1d(n, block), p, g, buf if has_m else p,
           p if found_inf is None else found_inf, p if grad_scale is None else grad_scale,
           n, float(lr), float(weight_decay), float(momentum), float(dampening), HAS_MOMENTUM=has_m,
           FIRST=bool(first), NESTEROV=bool(nesterov), MAXIMIZE=bool(maximize),
           HAS_FOUND_INF=found_inf is not None, HAS_GRAD_SCALE=grad_scale is not None, F=acc, BLOCK=block)


def advance_steps(steps, found_inf=None) -> None:
    """``+= 1`` (unless ``found_inf`` is set) on every one-element fp32 step count of ``steps`` (one
    device); one launch through a table of their addresses."""
    table = AddressTable(steps)
    n = len(table)
    if n == 0:
        return
    block = min(next_pow2(n), 1024)
    launch(_advance_steps_kernel, (cdiv(n, block),), table, n, steps[0] if found_inf is None else found_inf,
           HAS_FOUND_INF=found_inf is not None, BLOCK=block)


def adam_step(p, g, exp_avg, exp_avg_sq, *, step, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,
              max_exp_avg_sq=None, found_inf=None, grad_scale=None) -> None:
    """One Adam/AdamW update in place; ``max_exp_avg_sq`` given means amsgrad (it is updated too).

    ``step``: the count including this step, an int or an fp32 one-element device tensor (advanced
    by :func:`advance_steps`), from which the kernel takes the bias corrections.
    """
    n = p.numel()
    if n == 0:
        return
    on_device = not isinstance(step, int)
    if on_device:
        step_size = bias_c2_sqrt = 1.0
    else:  # in fp64 on the host, one rounding to fp32 in the kernel (the same in both modes)
        step_size = lr / (1.0 - beta1 ** step)
        bias_c2_sqrt = (1.0 - beta2 ** step) ** 0.5
    # log(0) for beta == 0: -inf, and exp(t * -inf) = 0 for t >= 1, as 0 ** t.
    log_b1 = math.log(beta1) if beta1 > 0 else -math.inf
    log_b2 = math.log(beta2) if beta2 > 0 else -math.inf
    ams = max_exp_avg_sq is not None
    block = elementwise_block(n)
    acc = getattr(tl, FLOAT_COMPUTE_NAME[p.dtype.name])  # the policy's compute dtype
    launch(_adam_kernel, grid_1d(n, block), p, g, exp_avg, exp_avg_sq, max_exp_avg_sq if ams else exp_avg_sq,
           p if found_inf is None else found_inf, p if grad_scale is None else grad_scale,
           step if on_device else p, n, float(lr), float(beta1), float(beta2), float(eps), float(weight_decay),
           float(step_size), float(bias_c2_sqrt), float(log_b1), float(log_b2),
           DECOUPLED=bool(decoupled), MAXIMIZE=bool(maximize), AMSGRAD=ams, HAS_FOUND_INF=found_inf is not None,
           HAS_GRAD_SCALE=grad_scale is not None, STEP_ON_DEVICE=on_device, F=acc, BLOCK=block)


def adam_multi_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                    maximize, max_exp_avg_sqs=None, found_inf=None, grad_scale=None) -> None:
    """:func:`adam_step` of many parameters in one launch (torch's multi-tensor "foreach" Adam):
    one device; parameters of one dtype, gradients of one dtype, states of one dtype; all
    contiguous. ``step``: one int for all of them (the bias corrections are the launch's), or a
    list of each parameter's fp32 device count."""
    rows = [(p, g, m, v, mx, st) for p, g, m, v, mx, st in
            zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs or [None] * len(params),
                step if isinstance(step, list) else [None] * len(params)) if p.numel() > 0]
    if not rows:
        return
    p0, g0, m0 = rows[0][0], rows[0][1], rows[0][2]
    on_device = isinstance(step, list)
    if on_device:
        step_size = bias_c2_sqrt = 1.0
    else:
        step_size = lr / (1.0 - beta1 ** step)
        bias_c2_sqrt = (1.0 - beta2 ** step) ** 0.5
    log_b1 = math.log(beta1) if beta1 > 0 else -math.inf
    log_b2 = math.log(beta2) if beta2 > 0 else -math.inf
    ams = max_exp_avg_sqs is not None
    tp = AddressTable([r[0] for r in rows], MULTI_BLOCK)
    tv = AddressTable([r[3] for r in rows], MULTI_BLOCK)
    if on_device:  # each row's parameter's count: one address per row
        tstep = AddressTable([r[5] for r in rows for _ in range(-(-r[0].numel() // MULTI_BLOCK))])
    else:
        tstep = tp
    acc = getattr(tl, FLOAT_COMPUTE_NAME[p0.dtype.name])
    launch(_adam_multi_kernel, (len(tp),), tp, AddressTable([r[1] for r in rows], MULTI_BLOCK),
           AddressTable([r[2] for r in rows], MULTI_BLOCK), tv,
           AddressTable([r[4] for r in rows], MULTI_BLOCK) if ams else tv, tstep,
           p0 if found_inf is None else found_inf, p0 if grad_scale is None else grad_scale,
           float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), float(step_size),
           float(bias_c2_sqrt), float(log_b1), float(log_b2), P_T=getattr(tl, p0.dtype.name),
           G_T=getattr(tl, g0.dtype.name), S_T=getattr(tl, m0.dtype.name), DECOUPLED=bool(decoupled),
           MAXIMIZE=bool(maximize), AMSGRAD=ams, HAS_FOUND_INF=found_inf is not None,
           HAS_GRAD_SCALE=grad_scale is not None, STEP_ON_DEVICE=on_device, F=acc, BLOCK=MULTI_BLOCK)


# ----- RMSprop and Adagrad, torch's update rules in one pass each --------------------------------------
@triton.jit
def _rmsprop_kernel(p, g, square_avg, grad_avg, buf, n, lr: tl.float64, alpha: tl.float64, eps: tl.float64,
                    weight_decay: tl.float64, momentum: tl.float64,
                    CENTERED: tl.constexpr, HAS_MOMENTUM: tl.constexpr, MAXIMIZE: tl.constexpr, F: tl.constexpr,
                    BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    lr, alpha, eps, weight_decay, momentum = lr.to(F), alpha.to(F), eps.to(F), weight_decay.to(F), momentum.to(F)
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
def _adagrad_kernel(p, g, state_sum, n, clr: tl.float64, eps: tl.float64, weight_decay: tl.float64,
                    MAXIMIZE: tl.constexpr, F: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    clr, eps, weight_decay = clr.to(F), eps.to(F), weight_decay.to(F)
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
    acc = getattr(tl, FLOAT_COMPUTE_NAME[p.dtype.name])  # the policy's compute dtype
    launch(_rmsprop_kernel, grid_1d(n, block), p, g, square_avg, grad_avg if centered else square_avg,
           momentum_buffer if has_m else square_avg, n, float(lr), float(alpha), float(eps), float(weight_decay),
           float(momentum), CENTERED=bool(centered), HAS_MOMENTUM=has_m, MAXIMIZE=bool(maximize), F=acc, BLOCK=block)


def adagrad_step(p, g, state_sum, *, clr, eps, weight_decay, maximize) -> None:
    n = p.numel()
    if n == 0:
        return
    block = elementwise_block(n)
    acc = getattr(tl, FLOAT_COMPUTE_NAME[p.dtype.name])  # the policy's compute dtype
    launch(_adagrad_kernel, grid_1d(n, block), p, g, state_sum, n, float(clr), float(eps), float(weight_decay),
           MAXIMIZE=bool(maximize), F=acc, BLOCK=block)
