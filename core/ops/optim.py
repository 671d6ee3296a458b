"""Core entries of the fused optimizer updates: ``optim/`` calls these, never the kernels.

Each checks its tensors before any launch (same shape, dtype and device as the parameter, all
contiguous: the kernel walks them as flat arrays) and hyper-parameters that the kernel cannot
represent, then runs one fused kernel per parameter (``triton_kernels/optim.py``), in place.
"""
from __future__ import annotations

import math

from ...triton_kernels import optim as _k
from ..tensor_base import TensorBase


def _check(op: str, p, **state) -> None:
    if not isinstance(p, TensorBase):
        raise TypeError(f"{op}: 'param' must be a tensor, got {type(p).__name__}")
    if not p.dtype.is_floating_point:
        raise TypeError(f"{op}: 'param' must be floating point, got {p.dtype}")
    for name, t in (("param", p), *state.items()):
        if t is None:
            continue
        if not isinstance(t, TensorBase):
            raise TypeError(f"{op}: '{name}' must be a tensor, got {type(t).__name__}")
        if t.shape != p.shape or t.dtype is not p.dtype or t.device != p.device:
            raise ValueError(f"{op}: '{name}' must match the parameter ({list(p.shape)}, {p.dtype}, {p.device}), "
                             f"got {list(t.shape)}, {t.dtype}, {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"{op}: '{name}' must be contiguous (the update walks it as a flat array)")


def _finite(op: str, **values) -> None:
    for name, v in values.items():
        if not math.isfinite(float(v)):
            raise ValueError(f"{op}: '{name}' must be finite, got {v!r}")


def sgd_step_(param, grad, momentum_buffer, *, lr, weight_decay, momentum, dampening, nesterov, maximize,
              first) -> None:
    """One SGD update of ``param`` in place (``momentum_buffer`` too, when momentum != 0)."""
    _check("sgd_step_", param, grad=grad, momentum_buffer=momentum_buffer if momentum != 0 else None)
    _finite("sgd_step_", lr=lr, weight_decay=weight_decay, momentum=momentum, dampening=dampening)
    _k.sgd_step(param, grad, momentum_buffer, lr=lr, weight_decay=weight_decay, momentum=momentum,
                dampening=dampening, nesterov=nesterov, maximize=maximize, first=first)


def adam_step_(param, grad, exp_avg, exp_avg_sq, *, step, lr, beta1, beta2, eps, weight_decay, decoupled,
               maximize, max_exp_avg_sq=None) -> None:
    """One Adam/AdamW update of ``param`` and its moments in place (``max_exp_avg_sq``: amsgrad)."""
    _check("adam_step_", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, max_exp_avg_sq=max_exp_avg_sq)
    _finite("adam_step_", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    if int(step) < 1:
        raise ValueError(f"adam_step_: 'step' counts from 1, got {step}")
    _k.adam_step(param, grad, exp_avg, exp_avg_sq, step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                 weight_decay=weight_decay, decoupled=decoupled, maximize=maximize, max_exp_avg_sq=max_exp_avg_sq)


# ----- issue 15 (nn15) ---------------------------------------------------------------------------------
def rmsprop_step_(param, grad, square_avg, *, lr, alpha, eps, weight_decay, momentum, centered, maximize,
                  grad_avg=None, momentum_buffer=None) -> None:
    """One RMSprop update of ``param`` and its state in place (``grad_avg``: centered,
    ``momentum_buffer``: momentum > 0)."""
    if centered and grad_avg is None:
        raise ValueError("rmsprop_step_: centered=True needs 'grad_avg'")
    if momentum > 0 and momentum_buffer is None:
        raise ValueError("rmsprop_step_: momentum > 0 needs 'momentum_buffer'")
    _check("rmsprop_step_", param, grad=grad, square_avg=square_avg, grad_avg=grad_avg if centered else None,
           momentum_buffer=momentum_buffer if momentum > 0 else None)
    _finite("rmsprop_step_", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
    _k.rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr=lr, alpha=alpha, eps=eps,
                    weight_decay=weight_decay, momentum=momentum, centered=centered, maximize=maximize)


def adagrad_step_(param, grad, state_sum, *, step, lr, lr_decay, eps, weight_decay, maximize) -> None:
    """One Adagrad update of ``param`` and ``state_sum`` in place; the rate is lr / (1 + (step - 1) lr_decay)."""
    _check("adagrad_step_", param, grad=grad, state_sum=state_sum)
    _finite("adagrad_step_", lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay)
    if int(step) < 1:
        raise ValueError(f"adagrad_step_: 'step' counts from 1, got {step}")
    clr = lr / (1 + (int(step) - 1) * lr_decay)
    _k.adagrad_step(param, grad, state_sum, clr=clr, eps=eps, weight_decay=weight_decay, maximize=maximize)
