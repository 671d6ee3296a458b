"""``batch_norm`` (``F.batch_norm``, ``nn.BatchNorm1d/2d``): PyTorch's checks, the (N, C, S) view
of the input, then one fused kernel (``triton_kernels/batch_norm.py``). :func:`native_batch_norm`
also returns the batch mean and rstd the backward kernel needs (:func:`batch_norm_backward`)."""
from __future__ import annotations

import math
import numbers

from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ...triton_kernels import batch_norm as _k
from ..tensor_base import TensorBase


def _stats_dtype(x) -> dt.dtype:
    return FLOAT_COMPUTE[x.dtype]


def _nc_s(x):
    """(N, C, S) and the strides (sN, sC, sS) to read x in place; x is made contiguous when its
    spatial dims do not collapse into one stride."""
    N, C = x.shape[0], x.shape[1]
    spatial = tuple(x.shape[2:])
    S = math.prod(spatial)
    st = x.stride()
    dims = [(n, s) for n, s in zip(spatial, st[2:]) if n != 1]
    if not dims:
        return x, (N, C, S), (st[0], st[1], 1)
    ok = all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))
    if not ok:
        x = x.contiguous()
        st = x.stride()
        return x, (N, C, S), (st[0], st[1], 1)
    return x, (N, C, S), (st[0], st[1], dims[-1][1])


def _check_vec(t, name: str, C: int, x):
    if t is None:
        return None
    if not isinstance(t, TensorBase):
        raise TypeError(f"batch_norm(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if t.numel() != C:
        raise RuntimeError(f"{name} should contain {C} elements not {t.numel()}")
    if t.device != x.device:
        raise RuntimeError(f"batch_norm(): Expected all tensors to be on the same device, but found at least two "
                           f"devices, {x.device} and {t.device}! ({name})")
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"batch_norm(): expected {name} to be a floating point tensor, got {t.dtype.name}")
    return t


def check_batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """batch_norm's argument checks, with torch's messages, before any kernel runs: a floating input of at
    least 2 dims, per-channel statistics, weight and bias of C elements, running statistics when not
    training."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"batch_norm(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"batch_norm(): expected a floating point input, got {input.dtype.name}")
    if input.ndim < 2:
        raise ValueError(f"batch_norm(): expected an input of at least 2 dims (N, C, ...), got {input.ndim}D")
    C = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_vec(t, name, C, input)
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and not t.is_contiguous():
            raise RuntimeError(f"batch_norm(): {name} must be contiguous (it is updated in place)")
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if (running_mean is None) != (running_var is None):
        raise RuntimeError("batch_norm(): running_mean and running_var must be given together")
    if training:
        if math.prod(input.shape) // max(C, 1) == 1 and input.numel():
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
    for name, v in (("momentum", momentum), ("eps", eps)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"batch_norm(): argument '{name}' must be a number, not {type(v).__name__}")


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``(out, save_mean, save_rstd)``; the statistics are (C,) fp32 (fp64 for fp64 input); in eval
    they are the running ones (mean, 1/sqrt(var + eps)), computed by the same kernel."""
    x, (N, C, S), strides = _nc_s(input)
    sd = _stats_dtype(input)
    out = TensorBase._empty_like_format(input, input.shape, input.dtype, input.device)  # channels-last stays so
    save_mean = TensorBase._empty((C,), sd, input.device)
    save_rstd = TensorBase._empty((C,), sd, input.device)
    w = weight.contiguous() if weight is not None else None
    b = bias.contiguous() if bias is not None else None
    if N * S == 0:  # nothing to normalize, no statistics to learn from (running ones left as they are)
        save_mean.fill_(float("nan"))
        save_rstd.fill_(float("nan"))
        return out, save_mean, save_rstd
    update = bool(training) and running_mean is not None
    _k.batch_norm_forward(out, _nc_s(out)[2], x, strides, w, b, running_mean, running_var, save_mean, save_rstd, N=N, C=C, S=S,
                          training=bool(training), update=update, momentum=float(momentum), eps=float(eps))
    if not training:  # the kernel normalized with the running statistics: hand the backward those
        save_mean.copy_(running_mean)
        save_rstd.copy_(((running_var.to(sd)) + float(eps)).rsqrt())
    return out, save_mean, save_rstd


def batch_norm_backward(grad, input, weight, save_mean, save_rstd, training):
    """``(dx, dweight, dbias)`` (dweight/dbias in the statistics' dtype, cast by the caller)."""
    x, (N, C, S), xs = _nc_s(input)
    g, _, gs = _nc_s(grad)
    dx = TensorBase._empty_like_format(input, input.shape, input.dtype, input.device)
    dw = TensorBase._empty((C,), save_mean.dtype, input.device)
    db = TensorBase._empty((C,), save_mean.dtype, input.device)
    if N * S == 0:
        dw.fill_(0)
        db.fill_(0)
        return dx, dw, db
    _k.batch_norm_backward(dx, _nc_s(dx)[2], dw, db, x, xs, g, gs, weight.contiguous() if weight is not None else None,
                           save_mean, save_rstd, N=N, C=C, S=S, training=bool(training))
    return dx, dw, db


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """``torch.nn.functional.batch_norm``: normalize each channel (dim 1) by the batch statistics
    (training; running statistics updated in place) or by the running ones (eval)."""
    check_batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]
