"""Derivatives of ``conv2d``, ``max_pool2d`` and ``avg_pool2d``: each backward is its own
Triton kernel (``triton_kernels/conv.py``, ``pool.py``; wrappers in ``core/ops/conv.py``,
``core/ops/pool.py``). Those kernels are not themselves recorded, so these ops support first
derivatives only; asking for a second (``create_graph=True``) raises instead of silently
returning a gradient without history.
"""
from __future__ import annotations

from ...core.ops import conv as _conv
from ...core.ops import pool as _pool
from ..grad_mode import is_grad_enabled
from .elementwise import Op


def _first_order_only(name):
    if is_grad_enabled():
        raise NotImplementedError(f"double backward (create_graph=True) through {name} is not implemented")


class Conv2d(Op):
    """dx = conv2d_backward_input(dy, W), dW = conv2d_backward_weight(dy, x), db = sum of dy
    over batch and space."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        out = _conv.conv2d(x, weight, bias, stride, padding, dilation, groups)
        ctx.geom = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, g):
        _first_order_only("conv2d")
        x, w = ctx.saved_tensors
        needs = ctx.needs_input_grad
        unbatched = x.ndim == 3
        x4 = x.unsqueeze(0) if unbatched else x
        g4 = g.unsqueeze(0) if unbatched else g
        gx = gw = gb = None
        if needs[0]:
            gx = _conv.conv2d_backward_input(g4, w, x4.shape, *ctx.geom)
            gx = gx.squeeze(0) if unbatched else gx
        if needs[1]:
            gw = _conv.conv2d_backward_weight(g4, x4, w.shape, *ctx.geom)
        if len(needs) > 2 and needs[2]:
            gb = g4.sum((0, 2, 3))
        return gx, gw, gb, None, None, None, None


class MaxPool2d(Op):
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


class AvgPool2d(Op):
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


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return Conv2d.apply(input, weight, bias, stride, padding, dilation, groups)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return MaxPool2d.apply(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    return MaxPool2d.apply(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return AvgPool2d.apply(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


RECORD = {"conv2d": conv2d, "max_pool2d": max_pool2d, "max_pool2d_with_indices": max_pool2d_with_indices,
          "avg_pool2d": avg_pool2d}
