"""``nn.functional``'s normalizations written with recorded ops: ``group_norm`` (layer_norm's fused
kernel over each group), ``instance_norm`` (the batch-norm kernel over N*C channels), ``rms_norm``,
``normalize`` and ``local_response_norm`` (elementwise ops and a reduction).

``layer_norm`` and ``batch_norm`` themselves are op-table entries with kernels of their own (see
``functional.py``); these are compositions of ops autograd records, so none needs a derivative of
its own. fp16/bf16 inputs are normalized in fp32 where torch does so.
"""
from __future__ import annotations

import math
import numbers

from ..core.factories import zeros
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .functional_checks import _check_input, _check_number, _tensor

__all__ = ["group_norm", "instance_norm", "rms_norm", "normalize", "local_response_norm"]
_layer_norm = _function(_table.OPS["layer_norm"], "layer_norm", numpy_names=False)
_batch_norm = _function(_table.OPS["batch_norm"], "batch_norm", numpy_names=False)
_cat = _function(_table.OPS["cat"], "cat", numpy_names=False)
_EPS = {dt.float32: 1.1920928955078125e-07, dt.float16: 0.0009765625, dt.bfloat16: 0.0078125,
        dt.float64: 2.220446049250313e-16}


def _affine_shape(x, C):
    return (1, C) + (1,) * (x.ndim - 2)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalize each of ``num_groups`` channel groups per sample (layer_norm's kernel over the
    group's values), then the per-channel affine."""
    _check_input(input, "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    N, C = input.shape[0], input.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0:
        raise ValueError(f"group_norm(): num_groups must be a positive int, got {num_groups!r}")
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.numel() != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape) if isinstance(t, Tensor) else t!r} and "
                               f"input of shape {list(input.shape)}")
    per = (input.numel() // (N * num_groups)) if N * num_groups else 0
    y = _layer_norm(input.reshape(N, num_groups, per), (per,), None, None, eps).reshape(input.shape)
    if weight is not None:
        y = y * weight.reshape(_affine_shape(input, C))
    if bias is not None:
        y = y + bias.reshape(_affine_shape(input, C))
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each (sample, channel) plane over its spatial dims: batch_norm over a batch of one
    with N*C channels, as torch does; running statistics are averaged over the samples."""
    _tensor(input, "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"Expected input with at least 3 dims (N, C, ...), got input of size {list(input.shape)}")
    spatial = math.prod(input.shape[2:])
    if use_input_stats and spatial <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
    N, C = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"instance_norm(): expected {name} of shape [{C}], got {list(t.shape)}")
    rm = running_mean.repeat(N) if running_mean is not None else None
    rv = running_var.repeat(N) if running_var is not None else None
    w = weight.repeat(N) if weight is not None else None
    b = bias.repeat(N) if bias is not None else None
    x = input.reshape((1, N * C) + tuple(input.shape[2:]))
    out = _batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats:  # the updated per-sample statistics, averaged back into the module's
        if running_mean is not None:
            running_mean.copy_(rm.detach().reshape(N, C).mean(0))
        if running_var is not None:
            running_var.copy_(rv.detach().reshape(N, C).mean(0))
    return out.reshape(input.shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight; fp16/bf16 are
    computed in fp32 and cast back before the weight, as torch; eps=None means the dtype's eps."""
    _check_input(input, "rms_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    e = _EPS[input.dtype] if eps is None else float(eps)
    x = input if input.dtype in (dt.float32, dt.float64) else input.float()
    dims = tuple(range(input.ndim - k, input.ndim))
    y = (x * (x * x).mean(dims, keepdim=True).add(e).rsqrt()).to(input.dtype)
    return y * weight if weight is not None else y


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """input / max(||input||_p along dim, eps). The norm is taken as (sum |x|^p clamped at eps^p)^(1/p),
    equal to max(norm, eps) and with a finite gradient at a zero vector."""
    _check_input(input, "normalize")
    if out is not None:
        raise NotImplementedError("normalize(): out= is not supported")
    pf = _check_number(p, "normalize", "p")
    if not pf > 0:
        raise ValueError(f"normalize(): p must be positive, got {p}")
    low = input.dtype in (dt.float16, dt.bfloat16)
    x = input.float() if low else input  # eps**2 = 1e-24 is 0 in fp16: the norm is taken in fp32
    if math.isinf(pf):
        n = x.abs().amax(dim, keepdim=True).clamp_min(eps)
    elif pf == 2.0:
        n = (x * x).sum(dim, keepdim=True).clamp_min(eps * eps).sqrt()
    else:
        n = (x.abs() ** pf).sum(dim, keepdim=True).clamp_min(eps ** pf) ** (1.0 / pf)
    return (x / n).to(input.dtype) if low else x / n


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """x / (k + alpha / size * sum of x^2 over the ``size`` neighbouring channels)^beta, torch's form:
    the channel window is an average pool over a zero-padded channel axis (size // 2 before,
    (size - 1) // 2 after)."""
    _tensor(input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"local_response_norm(): size must be a positive int, got {size!r}")
    if input.numel() == 0:
        return input
    N, C = input.shape[0], input.shape[1]
    sq = (input * input).reshape(N, C, -1)
    # the channel window as C + size - 1 padded rows, summed by gathering each row's window
    lo, hi = size // 2, (size - 1) // 2
    padded = _cat([zeros((N, lo, sq.shape[2]), dtype=sq.dtype, device=sq.device), sq,
                   zeros((N, hi, sq.shape[2]), dtype=sq.dtype, device=sq.device)], 1)
    total = None
    for j in range(size):
        term = padded.narrow(1, j, C)
        total = term if total is None else total + term
    div = (total * (alpha / size) + k).pow(beta).reshape(input.shape)
    return input / div
