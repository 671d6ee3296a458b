"""Gradient clipping as torch.nn.utils does it, without a host synchronisation.

``clip_grad_norm_``: the total norm of all gradients is ONE multi-tensor kernel launch per
(dtype, device) (``core/ops/foreach.py``), the clip coefficient ``min(max_norm / (norm + 1e-6), 1)``
stays a device tensor, and the gradients are scaled in place by one more multi-tensor launch
(always, as torch's foreach path: multiplying by 1 when no clipping is needed avoids reading the
norm back). Only ``error_if_nonfinite=True`` reads the norm on the host, as in torch.
"""
from __future__ import annotations

import math
import numbers

from ...autograd.grad_mode import no_grad
from ...core.factories import zeros
from ...core.ops import foreach as _fe
from ...core.tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _check_number(v, name: str):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"clip_grad: '{name}' must be a number, not {type(v).__name__}")
    return float(v)


@no_grad()
def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together (a 0-d tensor)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    p = _check_number(norm_type, "norm_type")
    if not tensors:
        return zeros(())
    total = _fe.multi_tensor_norm([t.detach() for t in tensors], p)
    if error_if_nonfinite and not math.isfinite(float(total.item())):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients by ``min(max_norm / (total_norm + 1e-6), 1)`` in place (one launch per dtype)."""
    m = _check_number(max_norm, "max_norm")
    grads = _grads(parameters)
    if not grads:
        return
    coef = (m / (total_norm + 1e-6)).clamp(max=1.0)
    _fe.multi_tensor_scale_([g.detach() for g in grads], coef)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Clip the gradients of ``parameters`` so their total ``norm_type``-norm is at most ``max_norm``;
    returns the total norm before clipping (a 0-d tensor, as torch)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    _check_number(max_norm, "max_norm")
    if not grads:
        return zeros(())
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_` (as torch)."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]`` in place."""
    v = _check_number(clip_value, "clip_value")
    for g in _grads(parameters):
        g.clamp_(-v, v)
