"""Derivative of ``layer_norm`` and ``native_layer_norm`` (kernels: ``triton_kernels/layer_norm.py``;
checks: ``core/ops/layer_norm.py``). The backward is two fused kernels (dx and the column sums,
then their total), so it is not itself recorded and supports first derivatives only.
"""
from __future__ import annotations

from ...core.ops import layer_norm as _ln
from ..function import BuiltinFunction
from .conv import _first_order_only


class LayerNorm(BuiltinFunction):
    """y = (x - mean) * rstd * w + b over the trailing ``normalized_shape`` dims.

    dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w and xhat the
    normalized input; dw = sum(g * xhat), db = sum(g) over the leading dims, all in the fused
    kernels. They are not recorded, so a second derivative raises instead.
    ``native=True`` also returns (non-differentiable) mean and rstd, as ``native_layer_norm``.
    """

    @staticmethod
    def forward(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5, native=False):
        out, mean, rstd = _ln.native_layer_norm(x, normalized_shape, weight, bias, eps)
        ctx.k = len(_ln._normalized_shape(normalized_shape))
        ctx.bias_dtype = bias.dtype if bias is not None else None  # db's dtype: the values are not needed
        ctx.save_for_backward(x, weight, mean, rstd)
        if native:
            ctx.mark_non_differentiable(mean, rstd)
            return out, mean, rstd
        return out

    @staticmethod
    def backward(ctx, g, *_stats):
        _first_order_only("layer_norm")
        x, w, mean, rstd = ctx.saved_tensors
        needs = ctx.needs_input_grad
        gx, gw, gb = _ln.native_layer_norm_backward(g, x, ctx.k, mean, rstd, w, ctx.bias_dtype,
                                                    (needs[0], needs[2], len(needs) > 3 and needs[3]))
        return gx, None, gw, gb, None, None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The recorder of layer_norm: runs it as LayerNorm, so autograd records it (torch's layer_norm)."""
    return LayerNorm.apply(input, normalized_shape, weight, bias, eps)


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The recorder of native_layer_norm: runs it as LayerNorm, so autograd records it (torch's
    native_layer_norm, which also returns the mean and rstd)."""
    return LayerNorm.apply(input, normalized_shape, weight, bias, eps, True)


RECORD = {"layer_norm": layer_norm, "native_layer_norm": native_layer_norm}  # op name -> recorder
