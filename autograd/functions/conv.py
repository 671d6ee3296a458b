"""Derivatives of ``conv2d`` and ``conv_transpose2d``: each backward is its own Triton kernel (``triton_kernels/conv.py``;
wrappers in ``core/ops/conv.py``). Those kernels are not themselves recorded, so conv2d supports
first derivatives only; asking for a second (``create_graph=True``) raises instead of silently
returning a gradient without history (:func:`_first_order_only`, shared by the other
kernel-backed derivatives: pooling, layer_norm, cross_entropy).
"""
from __future__ import annotations

from ...core.ops import conv as _conv
from ...core.shape import channels_last
from ..function import BuiltinFunction
from ..grad_mode import is_grad_enabled


def _first_order_only(name):
    if is_grad_enabled():
        raise NotImplementedError(f"double backward (create_graph=True) through {name} is not implemented")


def _grads(ctx, g, grad_input, grad_weight, weight_shape=None, groups=1):
    """(dx, dW, db) of a 2-D convolution that saved (x, W): an unbatched (C, H, W) x as a batch of
    one; ``grad_input(g4, w, x4)`` and ``grad_weight(g4, x4, w)`` run only for what needs a
    gradient; db is the sum of dy over batch and space. Given conv2d's ``weight_shape``, the
    gradient is repacked NHWC once here for both backward kernels (where they run NHWC)."""
    x, w = ctx.saved_tensors
    needs = ctx.needs_input_grad
    unbatched = x.ndim == 3
    x4 = x.unsqueeze(0) if unbatched else x
    g4 = g.unsqueeze(0) if unbatched else g
    gx = gw = gb = None
    if len(needs) > 2 and needs[2]:
        gb = g4.sum((0, 2, 3))
    if weight_shape is not None and needs[0] and needs[1]:
        g4 = _conv.nhwc_grad_output(g4, weight_shape, groups)
    if needs[0]:
        gx = grad_input(g4, w, x4)
        gx = gx.squeeze(0) if unbatched else gx
    if needs[1]:
        gw = grad_weight(g4, x4, w)
    return gx, gw, gb


def _suggests_channels_last(*tensors) -> bool:
    """PyTorch's rule for a convolution's results: channels-last when the input or the weight is."""
    return any(t.ndim == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=channels_last)
               for t in tensors)


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
        cl = _suggests_channels_last(x.unsqueeze(0) if x.ndim == 3 else x, w)
        gx, gw, gb = _grads(ctx, g, lambda g4, w, x4: _conv.conv2d_backward_input(g4, w, x4.shape, *ctx.geom,
                                                                                  channels_last_result=cl),
                            lambda g4, x4, w: _conv.conv2d_backward_weight(g4, x4, w.shape, *ctx.geom),
                            w.shape, ctx.geom[3])
        return gx, gw, gb, None, None, None, None


class ConvTranspose2d(BuiltinFunction):
    """conv_transpose2d is conv2d's grad-input map, so its adjoints are conv2d's other two maps:
    dx = conv2d(dy, W) (cropped to x where an output padding reached a whole stride), dW =
    conv2d_backward_weight with dy as conv2d's input and x as its output gradient, db = sum of dy."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        out = _conv.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)
        stride, pad, dilation, _, ctx.conv_hw = _conv.conv_transpose_geometry(
            "conv_transpose2d", (1, *x.shape[-3:]), weight.shape, stride, padding, output_padding, groups, dilation)
        ctx.geom = (stride, pad, dilation, groups)  # as conv2d's
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, g):
        _first_order_only("conv_transpose2d")
        gx, gw, gb = _grads(
            ctx, g, lambda g4, w, x4: _conv.conv2d(g4, w, None, *ctx.geom)[:, :, :x4.shape[2], :x4.shape[3]],
            lambda g4, x4, w: _conv.conv2d_backward_weight(_conv.zero_extend(x4, ctx.conv_hw), g4, w.shape, *ctx.geom))
        return gx, gw, gb, None, None, None, None, None


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The recorder of conv2d: runs it as Conv2d, so autograd records it (torch's conv2d)."""
    return Conv2d.apply(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The recorder of conv_transpose2d: runs it as ConvTranspose2d, so autograd records it (torch's
    conv_transpose2d)."""
    return ConvTranspose2d.apply(input, weight, bias, stride, padding, output_padding, groups, dilation)


RECORD = {"conv2d": conv2d, "conv_transpose2d": conv_transpose2d}  # op name -> recorder
