"""Derivative of ``conv2d``: each backward is its own Triton kernel (``triton_kernels/conv.py``;
wrappers in ``core/ops/conv.py``). Those kernels are not themselves recorded, so conv2d supports
first derivatives only; asking for a second (``create_graph=True``) raises instead of silently
returning a gradient without history (:func:`_first_order_only`, shared by the other
kernel-backed derivatives: pooling, layer_norm, cross_entropy).
"""
from __future__ import annotations

from ...core.ops import conv as _conv
from ..function import BuiltinFunction
from ..grad_mode import is_grad_enabled


def _first_order_only(name):
    if is_grad_enabled():
        raise NotImplementedError(f"double backward (create_graph=True) through {name} is not implemented")


class Conv2d(BuiltinFunction):
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


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return Conv2d.apply(input, weight, bias, stride, padding, dilation, groups)


RECORD = {"conv2d": conv2d}  # op name -> recorder
