"""Derivatives of the losses. ``cross_entropy`` is one fused kernel each way
(``triton_kernels/loss.py``): forward log-softmax + NLL, backward softmax - one_hot. The
backward kernel is not recorded, so cross_entropy supports first derivatives only;
``mse_loss`` and ``nll_loss`` are compositions of recorded ops (any order).
"""
from __future__ import annotations

from ...core import dtype as dt
from ...core.ops import loss as _loss
from ...core.tensor import Tensor
from ...triton_kernels import loss as _k
from .conv import _first_order_only
from .elementwise import Op


class CrossEntropy(Op):
    @staticmethod
    def forward(ctx, input, target, reduction="mean", ignore_index=-100):
        x2, t1 = _loss._as_rows(input, target)
        rows, lse, t1 = _loss.cross_entropy_rows(x2, t1, ignore_index)
        ctx.in_shape, ctx.reduction, ctx.ignore_index = input.shape, reduction, ignore_index
        if reduction == "none":
            out = rows.reshape(target.shape)
            ctx.count = 1
        else:
            out = rows.sum()
            if reduction == "mean":
                ctx.count = _loss.count_valid(t1, ignore_index)
                out = out / ctx.count if ctx.count else out * float("nan")
            else:
                ctx.count = 1
        ctx.save_for_backward(x2, t1, lse)
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, g):
        _first_order_only("cross_entropy")
        x2, t1, lse = ctx.saved_tensors
        dx = Tensor._empty(x2.shape, x2.dtype, x2.device)
        g = g.reshape(-1) if g.ndim else g
        scale = 1.0 / ctx.count if ctx.count else float("nan")
        _k.cross_entropy_backward(dx, x2, t1, lse, g, scale, ctx.ignore_index)
        shape = ctx.in_shape
        if len(shape) == 1:
            dx = dx.reshape(shape)
        elif len(shape) > 2:  # rows were (N, spatial..., C): move classes back to dim 1
            dx = dx.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
            dx = dx.permute(0, len(shape) - 1, *range(1, len(shape) - 1))
        return dx, None, None, None


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average/reduce are deprecated; use reduction=")
    _loss.check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight)
    return CrossEntropy.apply(input, target, reduction, ignore_index)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """-input[i, target[i]] from log-probabilities, as a masked sum (recorded ops)."""
    from ...core.factories import arange

    _loss.check_cross_entropy(input, target, reduction, ignore_index, 0.0, weight)
    x2, t1 = _loss._as_rows(input, target)
    t1 = t1.to(dt.int64)
    C = x2.shape[1]
    pick = arange(C, device=x2.device).reshape(1, C) == t1.reshape(-1, 1)
    rows = -(x2 * pick).sum(1)
    valid = t1 != ignore_index
    rows = rows * valid
    if reduction == "none":
        return rows.reshape(target.shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / valid.sum()


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError("mse_loss(): input and target must be Tensors")
    if reduction not in _loss.REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.shape != target.shape:
        import warnings

        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=2)
    d = (input - target) ** 2
    return d if reduction == "none" else (d.mean() if reduction == "mean" else d.sum())
