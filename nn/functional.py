"""``nn.functional``: the stateless forms of the layers.

The entries the op table marks ``functional`` (linear, conv2d, pooling, softmax, layer_norm, the
losses) are generated from it (``core/ops/table.py``), so they take the one dispatch path like
every op. The rest are compositions of ops with the extra arguments torch gives them here
(``inplace=``, ``approximate=``, ``training=``).
"""
from __future__ import annotations

import math as _math
import numbers as _numbers
import warnings as _warnings

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


# ----- issue 15 (nn15): activations written with recorded ops --------------------------------------
# Each is a composition of ops autograd records, so each is differentiable to any order; the
# ``inplace=True`` forms compute out of place and copy the result back (``copy_`` is recorded).
__all__ += ["leaky_relu", "elu", "softplus", "mish", "hardswish"]
_where = _function(_table.OPS["where"], "where")


def _check_input(input, fn: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating point input, got {input.dtype.name}")


def _check_number(v, fn: str, name: str):
    if isinstance(v, bool) or not isinstance(v, _numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be a number, not {type(v).__name__}")
    return float(v)


def _maybe_inplace(input, out, inplace: bool):
    return input.copy_(out) if inplace else out


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """x if x > 0 else negative_slope * x."""
    _check_input(input, "leaky_relu")
    slope = _check_number(negative_slope, "leaky_relu", "negative_slope")
    return _maybe_inplace(input, _where(input > 0, input, input * slope), inplace)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x if x > 0 else alpha * (exp(x) - 1) (expm1: accurate near 0)."""
    _check_input(input, "elu")
    a = _check_number(alpha, "elu", "alpha")
    neg = input.clamp_max(0.0).expm1() * a  # clamped: exp of a large x never overflows into where's gradient
    return _maybe_inplace(input, _where(input > 0, input, neg), inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's rule)."""
    _check_input(input, "softplus")
    b = _check_number(beta, "softplus", "beta")
    th = _check_number(threshold, "softplus", "threshold")
    bx = input * b
    soft = bx.clamp_max(th).exp().log1p() / b  # clamped: no inf whose gradient would be 0 * inf
    return _where(bx > th, input, soft)


def mish(input, inplace: bool = False):
    """x * tanh(softplus(x))."""
    _check_input(input, "mish")
    return _maybe_inplace(input, input * softplus(input).tanh(), inplace)


def hardswish(input, inplace: bool = False):
    """x * relu6(x + 3) / 6."""
    _check_input(input, "hardswish")
    return _maybe_inplace(input, input * (input + 3.0).clamp(0.0, 6.0) / 6.0, inplace)
