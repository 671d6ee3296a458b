"""Derivative of ``layer_norm`` and ``native_layer_norm`` (kernel: ``triton_kernels/layer_norm.py``;
checks: ``core/ops/layer_norm.py``). The backward is written with tensor ops but treats the saved
mean/rstd as constants, so it supports first derivatives only.
"""
from __future__ import annotations

from ...core.ops import layer_norm as _ln
from ..function import BuiltinFunction
from .conv import _first_order_only


class LayerNorm(BuiltinFunction):
    """y = (x - mean) * rstd * w + b over the trailing ``normalized_shape`` dims.

    dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w and xhat the
    normalized input; dw = sum(g * xhat), db = sum(g) over the leading dims. The saved mean
    and rstd enter as constants, so a second derivative would be wrong: it raises instead.
    ``native=True`` also returns (non-differentiable) mean and rstd, as ``native_layer_norm``.
    """

    @staticmethod
    def forward(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5, native=False):
        out, mean, rstd = _ln.native_layer_norm(x, normalized_shape, weight, bias, eps)
        ctx.k = len(_ln._normalized_shape(normalized_shape))
        ctx.save_for_backward(x, weight, mean, rstd)
        if native:
            ctx.mark_non_differentiable(mean, rstd)
            return out, mean, rstd
        return out

    @staticmethod
    def backward(ctx, g, *_stats):
        _first_order_only("layer_norm")
        x, w, mean, rstd = ctx.saved_tensors
        nd = x.ndim
        norm_dims = tuple(range(nd - ctx.k, nd))
        lead_dims = tuple(range(nd - ctx.k))
        stats = mean.dtype
        gf, xf = g.to(stats), x.to(stats)
        xhat = (xf - mean) * rstd
        gh = gf * w.to(stats) if w is not None else gf
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = rstd * (gh - gh.mean(norm_dims, keepdim=True) - xhat * (gh * xhat).mean(norm_dims, keepdim=True))
        if w is not None and ctx.needs_input_grad[2]:
            gw = (gf * xhat).sum(lead_dims) if lead_dims else gf * xhat
        if len(ctx.needs_input_grad) > 3 and ctx.needs_input_grad[3]:
            gb = gf.sum(lead_dims) if lead_dims else gf
        return gx, None, gw, gb, None, None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The recorder of layer_norm: runs it as LayerNorm, so autograd records it (torch's layer_norm)."""
    return LayerNorm.apply(input, normalized_shape, weight, bias, eps)


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The recorder of native_layer_norm: runs it as LayerNorm, so autograd records it (torch's
    native_layer_norm, which also returns the mean and rstd)."""
    return LayerNorm.apply(input, normalized_shape, weight, bias, eps, True)


RECORD = {"layer_norm": layer_norm, "native_layer_norm": native_layer_norm}  # op name -> recorder
