"""Core entries of the fused optimizer updates: ``optim/`` calls these, never the kernels.

Each checks its tensors before any launch (same shape, dtype and device as the parameter, all
contiguous: the kernel walks them as flat arrays) and hyper-parameters that the kernel cannot
represent, then runs one fused kernel per parameter (``triton_kernels/optim.py``), in place.

The AMP inputs ``found_inf`` / ``grad_scale`` (the scaler's flag and scale, PyTorch's fused path)
and Adam's on-device ``step`` must be one-element fp32 tensors on the parameter's device: the
kernel reads them there, the host never does.
"""
from __future__ import annotations

import math
import numbers

from ...runtime import dtype as dt
from ...triton_kernels import optim as _k
from ..shape import channels_last
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
        if t.stride() != p.stride() or not (p.is_contiguous() or p.is_contiguous(memory_format=channels_last)):
            raise ValueError(f"{op}: '{name}' must be dense and laid out as the parameter (the update walks them "
                             f"as flat arrays): strides {list(t.stride())}, parameter's {list(p.stride())}")


def _check_scalar(op: str, p, **scalars) -> None:
    for name, t in scalars.items():
        if t is None:
            continue
        if not isinstance(t, TensorBase):
            raise TypeError(f"{op}: '{name}' must be a tensor, got {type(t).__name__}")
        if t.dtype is not dt.float32 or t.numel() != 1 or t.device != p.device:
            raise ValueError(f"{op}: '{name}' must be a one-element float32 tensor on {p.device}, got "
                             f"{list(t.shape)}, {t.dtype}, {t.device}")


def _host_step(op: str, step, or_else: str) -> int:
    """Adam's step count kept on the host: an int from 1 (``or_else`` names the device form)."""
    if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 1:
        raise ValueError(f"{op}: 'step' must be an int counting from 1 or {or_else}, got {step!r}")
    return int(step)


def _finite(op: str, **values) -> None:
    for name, v in values.items():
        if not math.isfinite(float(v)):
            raise ValueError(f"{op}: '{name}' must be finite, got {v!r}")


def sgd_step_(param, grad, momentum_buffer, *, lr, weight_decay, momentum, dampening, nesterov, maximize,
              first, found_inf=None, grad_scale=None) -> None:
    """One SGD update of ``param`` in place (``momentum_buffer`` too, when momentum != 0); none at
    all when ``found_inf`` is set; ``grad`` unscaled in place by ``grad_scale`` when given."""
    _check("sgd_step_", param, grad=grad, momentum_buffer=momentum_buffer if momentum != 0 else None)
    _check_scalar("sgd_step_", param, found_inf=found_inf, grad_scale=grad_scale)
    _finite("sgd_step_", lr=lr, weight_decay=weight_decay, momentum=momentum, dampening=dampening)
    _k.sgd_step(param, grad, momentum_buffer, lr=lr, weight_decay=weight_decay, momentum=momentum,
                dampening=dampening, nesterov=nesterov, maximize=maximize, first=first, found_inf=found_inf,
                grad_scale=grad_scale)


def adam_step_(param, grad, exp_avg, exp_avg_sq, *, step, lr, beta1, beta2, eps, weight_decay, decoupled,
               maximize, max_exp_avg_sq=None, found_inf=None, grad_scale=None) -> None:
    """One Adam/AdamW update of ``param`` and its moments in place (``max_exp_avg_sq``: amsgrad).

    ``step``: the count including this update, an int or a one-element fp32 tensor on the
    parameter's device (advanced by :func:`advance_steps_`). ``found_inf`` set: nothing changes.
    ``grad_scale``: ``grad`` is unscaled in place and the update uses it unscaled.
    """
    _check("adam_step_", param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, max_exp_avg_sq=max_exp_avg_sq)
    _check_scalar("adam_step_", param, found_inf=found_inf, grad_scale=grad_scale)
    _finite("adam_step_", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    if isinstance(step, TensorBase):
        _check_scalar("adam_step_", param, step=step)
    else:
        step = _host_step("adam_step_", step, "a device tensor")
    _k.adam_step(param, grad, exp_avg, exp_avg_sq, step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                 weight_decay=weight_decay, decoupled=decoupled, maximize=maximize, max_exp_avg_sq=max_exp_avg_sq,
                 found_inf=found_inf, grad_scale=grad_scale)


def adam_multi_step_(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1, beta2, eps, weight_decay, decoupled,
                     maximize, max_exp_avg_sqs=None, found_inf=None, grad_scale=None) -> None:
    """:func:`adam_step_` of every parameter of ``params`` (one device), as torch's multi-tensor
    ("foreach") Adam: one launch per dtype among the contiguous ones, the same bits as one launch
    each. ``step``: one int for all of them, or a list of each parameter's one-element fp32 device
    count. A channels_last parameter (dense, not contiguous) takes its own launch."""
    params = list(params)
    lists = {"grads": list(grads), "exp_avgs": list(exp_avgs), "exp_avg_sqs": list(exp_avg_sqs)}
    if max_exp_avg_sqs is not None:
        lists["max_exp_avg_sqs"] = list(max_exp_avg_sqs)
    on_device = isinstance(step, (list, tuple))
    if on_device:
        lists["step"] = list(step)
    for name, values in lists.items():
        if len(values) != len(params):
            raise ValueError(f"adam_multi_step_: '{name}' has {len(values)} entries for {len(params)} parameters")
    _finite("adam_multi_step_", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    if not on_device:
        step = _host_step("adam_multi_step_", step, "a list of device tensors")
    batches: dict = {}
    for i, p in enumerate(params):
        mx = lists["max_exp_avg_sqs"][i] if max_exp_avg_sqs is not None else None
        _check("adam_multi_step_", p, grad=lists["grads"][i], exp_avg=lists["exp_avgs"][i],
               exp_avg_sq=lists["exp_avg_sqs"][i], max_exp_avg_sq=mx)
        _check_scalar("adam_multi_step_", p, found_inf=found_inf, grad_scale=grad_scale,
                      step=lists["step"][i] if on_device else None)
        if i and p.device != params[0].device:
            raise ValueError(f"adam_multi_step_: 'params[{i}]' is on {p.device}, 'params[0]' on {params[0].device}: "
                             "one device per call")
        batches.setdefault(p.dtype if p.is_contiguous() else i, []).append(i)
    hyper = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, decoupled=decoupled,
                 maximize=maximize, found_inf=found_inf, grad_scale=grad_scale)
    for key, idx in batches.items():
        pick = {name: [values[i] for i in idx] for name, values in lists.items()}
        steps = pick["step"] if on_device else step
        if isinstance(key, int):  # a channels_last parameter, walked in its own memory order
            i = idx[0]
            _k.adam_step(params[i], pick["grads"][0], pick["exp_avgs"][0], pick["exp_avg_sqs"][0],
                         step=steps[0] if on_device else step,
                         max_exp_avg_sq=pick["max_exp_avg_sqs"][0] if max_exp_avg_sqs is not None else None, **hyper)
            continue
        _k.adam_multi_step([params[i] for i in idx], pick["grads"], pick["exp_avgs"], pick["exp_avg_sqs"], step=steps,
                           max_exp_avg_sqs=pick.get("max_exp_avg_sqs"), **hyper)


def advance_steps_(steps, found_inf=None) -> None:
    """``+= 1`` in place on every one-element fp32 count in ``steps`` (one device), unless
    ``found_inf`` (same device) is set: one launch for all of them, through a table of addresses."""
    steps = list(steps)
    if not steps:
        return
    first = steps[0]
    for i, t in enumerate(steps):
        if not isinstance(t, TensorBase):
            raise TypeError(f"advance_steps_: 'steps[{i}]' must be a tensor, got {type(t).__name__}")
        _check_scalar("advance_steps_", first, **{f"steps[{i}]": t})
    _check_scalar("advance_steps_", first, found_inf=found_inf)
    _k.advance_steps(steps, found_inf)


# ----- RMSprop and Adagrad: one fused update each (triton_kernels/optim.py) ----------------------------
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
