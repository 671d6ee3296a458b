"""The two activations torch also has as Tensor methods, ``Tensor.hardshrink`` and ``Tensor.prelu``
(nn.functional's other activations are functions only).

A Tensor method must be defined in core (the class is built from the op table when it is created,
and core cannot import nn), so their one implementation lives here and ``nn.functional`` imports it.
Both are a comparison and a ``where`` that autograd records, as the rest of nn.functional's
activations: differentiable to any order with no derivative of their own.
"""
from __future__ import annotations

import numbers

from ..tensor_base import TensorBase

__all__ = ["hardshrink", "prelu"]


def _check(input, fn: str) -> None:
    if not isinstance(input, TensorBase):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating point input, got {input.dtype.name}")


def hardshrink(input, lambd: float = 0.5):
    """x where |x| > lambd, else 0."""
    _check(input, "hardshrink")
    if isinstance(lambd, bool) or not isinstance(lambd, numbers.Real):
        raise TypeError(f"hardshrink(): argument 'lambd' (position 2) must be Number, not {type(lambd).__name__}")
    return input.where(input.abs() > float(lambd), 0.0)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), ``weight`` one value or one per channel (dim 1)."""
    _check(input, "prelu")
    if not isinstance(weight, TensorBase):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and (input.ndim == 0 or n != channels):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                           f"and channel size = {channels}.")
    w = weight.reshape((1, n) + (1,) * (input.ndim - 2)) if n != 1 and input.ndim >= 2 else weight.reshape(())
    return input.where(input > 0, input * w)
