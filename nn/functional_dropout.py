"""``nn.functional``'s dropout family: ``dropout`` (per element), ``dropout1d``/``dropout2d`` (whole
channels: ``dropout3d`` too) and ``alpha_dropout`` (SELU's, keeping mean and variance; per channel:
``feature_alpha_dropout``).

Each draws a uniform mask with the ``rand`` kernel and multiplies by it, so autograd records the
product and the gradient is masked the same way; the mask is a bool (or constant) tensor and is not
differentiated. ``training=False`` (or ``p=0``) returns the input itself, as torch.
"""
from __future__ import annotations

import math
import warnings

from ..core.factories import rand
from ..core.tensor import Tensor
from .functional_checks import _tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"dropout(): argument 'input' must be Tensor, not {type(input).__name__}")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace else input * 0
    keep = rand(input.shape, device=input.device) >= p  # a bool mask: not differentiated
    scale = 1.0 / (1.0 - p)
    if inplace:
        return input.mul_(keep).mul_(scale)
    return input * keep * scale


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _channel_dropout(input, p, training, inplace, fn: str, batched_ndim: int):
    _tensor(input, fn)
    _check_p(p)
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        names = {3: "(N, C, L) or (C, L)", 4: "(N, C, H, W) or (C, H, W)"}[batched_ndim]
        raise RuntimeError(f"{fn}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
                           f"{input.ndim}D input. {fn} expects input of shape {names}.")
    if not training or p == 0.0:
        return input
    lead = 2 if input.ndim == batched_ndim else 1
    mask_shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    keep = rand(mask_shape, device=input.device) >= p  # one draw per channel: whole channels are zeroed
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = input * keep * scale
    return input.copy_(out) if inplace else out


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, L) or (C, L) with probability p, scale the rest by 1/(1-p)."""
    return _channel_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p, scale the rest by 1/(1-p)."""
    return _channel_dropout(input, p, training, inplace, "dropout2d", 4)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p, scale the rest by
    1/(1-p). Another rank warns, as torch's, and is read as unbatched (its first dim the channels)."""
    _tensor(input, "dropout3d")
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", UserWarning, stacklevel=2)
    if not training or p == 0.0:
        return input
    lead = 2 if input.ndim == 5 else 1
    mask_shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    keep = rand(mask_shape, device=input.device) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = input * keep * scale
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """SELU's dropout: dropped elements take SELU's negative saturation, then an affine map keeps
    mean 0 and variance 1 (torch's a, b)."""
    _tensor(input, "alpha_dropout")
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape))


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """``alpha_dropout`` of whole channels: one draw per (N, C), as torch's feature noise."""
    _tensor(input, "feature_alpha_dropout")
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape[:2]) + (1,) * (input.ndim - 2))


def _alpha_dropout(input, p, training: bool, inplace: bool, mask_shape: tuple):
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
        return input.copy_(out) if inplace else out
    alpha = 1.7580993408473766  # SELU's scale * alpha: -alpha is the negative saturation value
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    keep = (rand(mask_shape, device=input.device) >= p).to(input.dtype)
    b = (keep - 1.0) * (alpha * a) + alpha * a * p
    out = input * (keep * a) + b
    return input.copy_(out) if inplace else out
