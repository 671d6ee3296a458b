"""``nn.init``: the in-place initialisers PyTorch's layers use by default.

``Linear`` and ``Conv2d`` use ``kaiming_uniform_(w, a=sqrt(5))`` (= U(-1/sqrt(fan_in),
1/sqrt(fan_in))) and the same bound for the bias, exactly as PyTorch's ``reset_parameters``.
All run under ``no_grad``; random numbers come from tritensor's Philox generator.
"""
from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..core.tensor import Tensor
from ..core.factories import rand, randn


def _fans(t: Tensor):
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


@no_grad()
def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    return t.copy_(rand(t.shape, dtype=t.dtype, device=t.device) * (b - a) + a)


@no_grad()
def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    return t.copy_(randn(t.shape, dtype=t.dtype, device=t.device) * std + mean)


@no_grad()
def constant_(t: Tensor, val: float) -> Tensor:
    return t.fill_(val)


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return uniform_(t, -bound, bound)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)
