"""PyTorch's free functions (``tritensor.exp(x)``, ``tritensor.add(a, b)``, ...).

Each is the same op as the Tensor method; the list below is the public surface, built from
the kernel families' op tables so a new op shows up in both places at once.
"""
from __future__ import annotations

from ..triton_kernels import elementwise as _k
from .ops import elementwise as _ew
from .tensor import Tensor


def _unary_fn(op):
    def fn(input, *, out=None):
        return _ew.unary(op, input, out=out)

    fn.__name__ = op
    fn.__doc__ = f"Elementwise ``{op}``."
    return fn


def _binary_fn(op):
    def fn(input, other, *, out=None):
        return _ew.binary(op, input, other, out=out)

    fn.__name__ = op
    fn.__doc__ = f"Elementwise ``{op}`` with broadcasting and type promotion."
    return fn


__all__ = ["where", "clamp", "clip", "true_divide", "multiply", "subtract", "is_tensor"]
for _op in _k.UNARY:
    globals()[_op] = _unary_fn(_op)
    __all__.append(_op)
for _op in _k.BINARY:
    globals()[_op] = _binary_fn(_op)
    __all__.append(_op)
true_divide, multiply, subtract = globals()["div"], globals()["mul"], globals()["sub"]


def where(condition, input, other, *, out=None):
    return _ew.where(condition, input, other, out=out)


def clamp(input, min=None, max=None):
    return input.clamp(min, max)


clip = clamp


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


# Matmul family (core/ops/matmul.py).
from .ops.matmul import bmm, linear, matmul, mm  # noqa: E402

__all__ += ["matmul", "mm", "bmm", "linear"]

# Reduction and normalization families (core/ops/reduce.py, core/ops/norm.py). Like torch, these
# names (sum, max, min, all, any) shadow Python's builtins in this module from here on.
from .ops.norm import layer_norm, log_softmax, native_layer_norm, softmax  # noqa: E402
from .ops.reduce import (all, amax, amin, any, argmax, argmin, max, mean, min, prod, std, sum,  # noqa: E402
                         var)

__all__ += ["sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "all", "any",
            "softmax", "log_softmax", "layer_norm", "native_layer_norm"]

# Convolution (core/ops/conv.py).
from .ops.conv import conv2d  # noqa: E402

__all__ += ["conv2d"]

# Pooling (core/ops/pool.py).
from .ops.pool import avg_pool2d, max_pool2d, max_pool2d_with_indices  # noqa: E402

__all__ += ["max_pool2d", "max_pool2d_with_indices", "avg_pool2d"]

# Indexing (core/ops/index.py).
from .ops.index import gather, index_add, index_select, scatter_add  # noqa: E402

__all__ += ["index_select", "gather", "scatter_add", "index_add"]
