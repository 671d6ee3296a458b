"""Core entries of ``layer_norm`` and ``native_layer_norm``: PyTorch's checks, then the kernel.

The kernel is ``triton_kernels/layer_norm.py``, the derivative ``autograd/functions/layer_norm.py``.
What the backward needs is returned here, not recomputed there: :func:`native_layer_norm`
returns the per-row mean and rstd, and :func:`native_layer_norm_backward` (aten's, which torch
does not expose) hands them to the fused backward kernels.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

import numpy as np

from ...triton_kernels import layer_norm as _ln
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _check_tensor(x, op: str, argname: str = "input") -> None:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument '{argname}' must be Tensor, not {type(x).__name__}")


def _normalized_shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)) and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    if isinstance(normalized_shape, (tuple, list)) and all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in normalized_shape):
        return tuple(int(s) for s in normalized_shape)
    raise TypeError(f"layer_norm(): argument 'normalized_shape' must be an int or a sequence of ints, "
                    f"not {normalized_shape!r}")


def _check_affine(t, name: str, shape: tuple, input: Tensor):
    if t is None:
        return None
    _check_tensor(t, "layer_norm", name)
    if tuple(t.shape) != shape:
        raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                           f"{list(t.shape)} and normalized_shape = {list(shape)}")
    if t.device != input.device:
        raise RuntimeError(f"layer_norm(): Expected all tensors to be on the same device, but found at least two "
                           f"devices, {input.device} and {t.device}! ({name})")
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"layer_norm(): expected {name} to be a floating point tensor, but got {t.dtype.name}")
    return t.contiguous()


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``(out, mean, rstd)`` like ``torch.native_layer_norm``: the statistics the backward needs.

    ``mean`` and ``rstd`` have the input's leading dims followed by ones for the normalized
    dims, in fp32 (fp64 for fp64 inputs).
    """
    _check_tensor(input, "layer_norm")
    shape = _normalized_shape(normalized_shape)
    if len(shape) == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = []")
    k = len(shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"layer_norm(): expected a floating point input, but got {input.dtype.name}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"layer_norm(): argument 'eps' must be a number, not {type(eps).__name__}")
    weight = _check_affine(weight, "weight", shape, input)
    bias = _check_affine(bias, "bias", shape, input)
    lead = tuple(input.shape[: input.ndim - k])
    stats_dtype = FLOAT_COMPUTE[input.dtype]
    out = TensorBase._empty(input.shape, input.dtype, input.device)
    mean = TensorBase._empty(lead + (1,) * k, stats_dtype, input.device)
    rstd = TensorBase._empty(lead + (1,) * k, stats_dtype, input.device)
    if math.prod(shape) == 0 and mean.numel():
        mean.fill_(float("nan"))  # the mean of nothing
        rstd.fill_(float("nan"))
    _ln.layer_norm(out, input, k, weight, bias, float(eps), mean, rstd)
    return out, mean, rstd


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5) -> Tensor:
    """``torch.nn.functional.layer_norm``: normalize over the trailing ``normalized_shape`` dims."""
    _check_tensor(input, "layer_norm")
    return native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


def native_layer_norm_backward(grad, input, normalized_ndim: int, mean, rstd, weight, bias_dtype, output_mask):
    """``(dx, dweight, dbias)`` of ``layer_norm`` as aten's ``native_layer_norm_backward``: each
    computed where ``output_mask`` asks (None otherwise, and always None for an absent parameter),
    dx contiguous in the input's dtype, dweight in the weight's dtype, dbias in ``bias_dtype`` (the
    bias's, None without a bias: its values are not needed). ``mean`` and ``rstd`` are
    :func:`native_layer_norm`'s; ``grad`` has the input's shape, any strides."""
    need_dx, need_dw, need_db = output_mask
    dev = input.device
    norm_shape = tuple(input.shape[input.ndim - normalized_ndim:])
    dx = TensorBase._empty(input.shape, input.dtype, dev) if need_dx else None
    dw = TensorBase._empty(norm_shape, weight.dtype, dev) if need_dw and weight is not None else None
    db = TensorBase._empty(norm_shape, bias_dtype, dev) if need_db and bias_dtype is not None else None
    _ln.layer_norm_backward(dx, dw, db, grad, input, normalized_ndim,
                            weight.contiguous() if weight is not None else None, mean, rstd)
    return dx, dw, db
