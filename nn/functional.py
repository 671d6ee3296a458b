"""``nn.functional``: the stateless forms of the layers. Every function records into the
autograd graph (the ops live in ``autograd/functions``)."""
from __future__ import annotations

from ..autograd.functions.conv import avg_pool2d, conv2d, max_pool2d, max_pool2d_with_indices
from ..autograd.functions.loss import cross_entropy, mse_loss, nll_loss
from ..autograd.functions.matmul import linear
from ..autograd.functions.reduce import layer_norm, log_softmax, softmax
from ..core.tensor import Tensor

__all__ = ["linear", "conv2d", "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "relu", "gelu", "silu",
           "sigmoid", "tanh", "softmax", "log_softmax", "layer_norm", "dropout", "cross_entropy", "nll_loss",
           "mse_loss", "flatten"]


def relu(input, inplace: bool = False):
    return input.relu_() if inplace else input.relu()


def gelu(input, approximate: str = "none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return input.gelu() if approximate == "none" else input.gelu_tanh()


def silu(input, inplace: bool = False):
    return input.silu_() if inplace else input.silu()


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    return input.flatten(start_dim, end_dim)


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
    from ..core.factories import rand

    keep = rand(input.shape, device=input.device) >= p  # a bool mask: not differentiated
    scale = 1.0 / (1.0 - p)
    if inplace:
        return input.mul_(keep).mul_(scale)
    return input * keep * scale
