"""Derivatives of ``max_pool2d`` (and ``max_pool2d_with_indices``) and ``avg_pool2d``: each
backward is its own Triton kernel (``triton_kernels/pool.py``; wrappers in ``core/ops/pool.py``).
Those kernels are not themselves recorded, so these ops support first derivatives only.
"""
from __future__ import annotations

from ...core.ops import pool as _pool
from ..function import BuiltinFunction
from .conv import _first_order_only


class MaxPool2d(BuiltinFunction):
    """max_pool2d's derivative: each output's gradient goes to the input position its index names (the
    max-pool backward kernel). First order only."""
    @staticmethod
    def forward(ctx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        y, idx = _pool.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)
        ctx.args = (kernel_size, stride, padding, dilation, ceil_mode)
        ctx.in_shape = x.shape
        ctx.save_for_backward(idx)
        if return_indices:
            ctx.mark_non_differentiable(idx)
            return y, idx
        return y

    @staticmethod
    def backward(ctx, g, *_):
        _first_order_only("max_pool2d")
        (idx,) = ctx.saved_tensors
        return (_pool.max_pool2d_backward(g, ctx.in_shape, idx, *ctx.args),) + (None,) * 6


class AvgPool2d(BuiltinFunction):
    """avg_pool2d's derivative: each output's gradient spread evenly over its window (the avg-pool backward
    kernel). First order only."""
    @staticmethod
    def forward(ctx, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
        ctx.args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        ctx.in_shape = x.shape
        return _pool.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    @staticmethod
    def backward(ctx, g):
        _first_order_only("avg_pool2d")
        return (_pool.avg_pool2d_backward(g, ctx.in_shape, *ctx.args),) + (None,) * 6


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The recorder of max_pool2d: runs it as MaxPool2d, so autograd records it (torch's max_pool2d)."""
    return MaxPool2d.apply(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """The recorder of max_pool2d_with_indices: runs it as MaxPool2d, so autograd records it (torch's
    max_pool2d_with_indices, returning the indices too)."""
    return MaxPool2d.apply(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The recorder of avg_pool2d: runs it as AvgPool2d, so autograd records it (torch's avg_pool2d)."""
    return AvgPool2d.apply(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


RECORD = {"max_pool2d": max_pool2d, "max_pool2d_with_indices": max_pool2d_with_indices,
          "avg_pool2d": avg_pool2d}  # op name -> recorder
