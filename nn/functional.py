"""``nn.functional``: the stateless forms of the layers.

The entries the op table marks ``functional`` (linear, conv2d, pooling, softmax, layer_norm, the
losses) are generated from it (``core/ops/table.py``), so they take the one dispatch path like
every op. The rest are compositions of ops with the extra arguments torch gives them here
(``inplace=``, ``approximate=``, ``training=``).
"""
from __future__ import annotations

from ..core.factories import rand as _rand
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "flatten"]
for _op in _table.OPS.values():
    if _op.functional:
        globals()[_op.name] = _function(_op, _op.name)
        __all__.append(_op.name)


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
    keep = _rand(input.shape, device=input.device) >= p  # a bool mask: not differentiated
    scale = 1.0 / (1.0 - p)
    if inplace:
        return input.mul_(keep).mul_(scale)
    return input * keep * scale
