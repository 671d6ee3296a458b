"""Derivative of ``cross_entropy``: one fused kernel each way (``triton_kernels/loss.py``, launched by
the core entries ``core/ops/loss.py: cross_entropy_forward / cross_entropy_backward``): forward
log-softmax + NLL, backward softmax - one_hot. The backward kernel is not recorded, so
cross_entropy supports first derivatives only; ``mse_loss`` and ``nll_loss`` are compositions of
recorded ops in ``core/ops/loss.py`` (any order).
"""
from __future__ import annotations

from ...core.ops import loss as _loss
from ..function import BuiltinFunction
from .conv import _first_order_only


class CrossEntropy(BuiltinFunction):
    """cross_entropy's derivative: softmax minus the (smoothed) target, weighted and scaled as the reduction
    was, from the saved log-sum-exp. First order only."""
    @staticmethod
    def forward(ctx, input, target, reduction="mean", ignore_index=-100, weight=None, label_smoothing=0.0):
        out, saved, ctx.count, ctx.denom = _loss.cross_entropy_forward(input, target, reduction, ignore_index,
                                                                      weight, label_smoothing)
        ctx.in_shape, ctx.reduction, ctx.ignore_index = input.shape, reduction, ignore_index
        ctx.label_smoothing = label_smoothing
        ctx.save_for_backward(*saved)
        return out

    @staticmethod
    def backward(ctx, g):
        _first_order_only("cross_entropy")
        x2, t1, lse, w, wsum = ctx.saved_tensors
        dx = _loss.cross_entropy_backward(g, ctx.in_shape, x2, t1, lse, w, wsum, ctx.count, ctx.denom,
                                          ctx.ignore_index, ctx.label_smoothing)
        return dx, None, None, None, None, None


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """The recorder of ``cross_entropy`` (core entry: ``core/ops/loss.py``). No gradient flows to
    ``weight``."""
    _loss._no_legacy(size_average, reduce)
    _loss.check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight)
    if target.dtype.is_floating_point:  # class probabilities: made of recorded ops
        return _loss.cross_entropy_probs(input, target, weight, reduction, float(label_smoothing))
    return CrossEntropy.apply(input, target, reduction, int(ignore_index), weight, float(label_smoothing))


# ----- binary_cross_entropy_with_logits: a fused kernel each way ---------------------------------------
class BCEWithLogits(BuiltinFunction):
    """One fused kernel each way (triton_kernels/loss.py); first derivatives only. The target's
    gradient, (pos_weight - 1) * softplus(-x) - x times the weight, is made of ops; none flows to
    weight or pos_weight."""

    @staticmethod
    def forward(ctx, input, target, weight, pos_weight, reduction):
        ctx.reduction = reduction
        ctx.save_for_backward(input, target, weight, pos_weight)
        return _loss.bce_with_logits_forward(input, target, weight, pos_weight, reduction)

    @staticmethod
    def backward(ctx, g):
        _first_order_only("binary_cross_entropy_with_logits")
        x, y, w, pw = ctx.saved_tensors
        dx = dy = None
        if ctx.needs_input_grad[0]:
            dx = _loss.bce_with_logits_backward(g, x, y, w, pw, ctx.reduction)
        if ctx.needs_input_grad[1]:
            sp = (-x).clamp_min(0.0) + (-x.abs()).exp().log1p()
            dy = -x if pw is None else (pw - 1) * sp - x
            dy = dy * w if w is not None else dy
            dy = dy * g / x.numel() if ctx.reduction == "mean" else dy * g
        return dx, dy, None, None, None


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """The recorder of binary_cross_entropy_with_logits: runs it as BCEWithLogits, so autograd records it
    (torch's binary_cross_entropy_with_logits; the checks first)."""
    _loss._no_legacy(size_average, reduce)
    _loss.check_bce_with_logits(input, target, weight, pos_weight, reduction)
    return BCEWithLogits.apply(input, target, weight, pos_weight, reduction)


# nll_loss, mse_loss, l1_loss, smooth_l1_loss, binary_cross_entropy and kl_div are made of recorded
# ops (core/ops/loss.py)
RECORD = {"cross_entropy": cross_entropy, "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits}
