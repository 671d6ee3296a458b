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
    def forward(ctx, input, target, reduction="mean", ignore_index=-100, weight=None, label_smoothing=0.0):
        x2, t1 = _loss._as_rows(input, target)
        w, wsum = _loss.class_weights(weight, x2)
        rows, lse, t1, wt = _loss.cross_entropy_rows(x2, t1, ignore_index, w, wsum, label_smoothing)
        ctx.in_shape, ctx.reduction, ctx.ignore_index = input.shape, reduction, ignore_index
        ctx.label_smoothing, ctx.denom = label_smoothing, None
        if reduction == "none":
            out = rows.reshape(target.shape)
            ctx.count = 1
        else:
            out = rows.sum()
            ctx.count = 1
            if reduction == "mean" and w is not None:
                # torch: divide by the summed weights of the non-ignored targets (a device tensor)
                ctx.denom = wt.sum()
                out = out / ctx.denom
            elif reduction == "mean":
                ctx.count = _loss.count_valid(t1, ignore_index)
                out = out / ctx.count if ctx.count else out * float("nan")
        ctx.save_for_backward(x2, t1, lse, w, wsum)
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, g):
        _first_order_only("cross_entropy")
        x2, t1, lse, w, wsum = ctx.saved_tensors
        dx = Tensor._empty(x2.shape, x2.dtype, x2.device)
        g = g.reshape(-1) if g.ndim else g
        if ctx.denom is not None:
            g = g.to(ctx.denom.dtype) / ctx.denom
        scale = 1.0 / ctx.count if ctx.count else float("nan")
        _k.cross_entropy_backward(dx, x2, t1, lse, g, scale, ctx.ignore_index, w, wsum, ctx.label_smoothing)
        shape = ctx.in_shape
        if len(shape) == 1:
            dx = dx.reshape(shape)
        elif len(shape) > 2:  # rows were (N, spatial..., C): move classes back to dim 1
            dx = dx.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
            dx = dx.permute(0, len(shape) - 1, *range(1, len(shape) - 1))
        return dx, None, None, None, None, None


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy with class-index targets: ``weight`` per class,
    ``ignore_index``, ``reduction`` and ``label_smoothing`` as torch defines them (see
    ``triton_kernels/loss.py``), all in the fused kernels. No gradient flows to ``weight``."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average/reduce are deprecated; use reduction=")
    _loss.check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight)
    return CrossEntropy.apply(input, target, reduction, int(ignore_index), weight, float(label_smoothing))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-weight[t] * input[i, t] from log-probabilities, as a masked sum (recorded ops); the
    weighted mean divides by the summed weights of the non-ignored targets, as torch."""
    from ...core.factories import arange

    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average/reduce are deprecated; use reduction=")
    _loss.check_cross_entropy(input, target, reduction, ignore_index, 0.0, weight, name="nll_loss")
    x2, t1 = _loss._as_rows(input, target)
    t1 = t1.to(dt.int64)
    C = x2.shape[1]
    pick = arange(C, device=x2.device).reshape(1, C) == t1.reshape(-1, 1)
    rows = -(x2 * pick).sum(1)
    valid = t1 != ignore_index
    if weight is not None:
        wt = (weight.detach().reshape(1, C) * pick).sum(1) * valid
        rows = rows * wt.to(rows.dtype)
    else:
        rows = rows * valid
    if reduction == "none":
        return rows.reshape(target.shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / (wt.sum().to(rows.dtype) if weight is not None else valid.sum())


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
