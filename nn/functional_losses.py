"""``nn.functional`` losses written with recorded ops: ``huber_loss margin_ranking_loss
triplet_margin_loss cosine_embedding_loss poisson_nll_loss gaussian_nll_loss soft_margin_loss
multilabel_soft_margin_loss hinge_embedding_loss multi_margin_loss multilabel_margin_loss
triplet_margin_with_distance_loss``.

Each is a short chain of elementwise ops and a reduction that autograd records, so each is
differentiable with no derivative of its own (the fused loss kernels of ``core/ops/loss.py`` are
for the losses of every training loop: cross entropy, MSE, BCE). The legacy ``size_average`` /
``reduce`` arguments map to ``reduction`` with torch's deprecation warning. Kept beside
``functional.py``, which re-exports them; arguments are checked with torch's wording before any op
runs.
"""
from __future__ import annotations

import math
import warnings

from ..core.factories import arange
from ..core.functional import function as _function
from ..core.ops import table as _table
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from .functional_activations import logsigmoid
from .functional_distance import pairwise_distance

__all__ = ["huber_loss", "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "hinge_embedding_loss",
           "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss"]

_where = _function(_table.OPS["where"], "where")
_EPSILON = 1e-12  # cosine_embedding_loss's guard against a zero norm, as torch's


def _legacy(size_average, reduce, reduction: str) -> str:
    """torch's ``_Reduction.legacy_get_string``: the old pair of flags as a reduction, with its warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else ("sum" if reduce else "none")
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                  UserWarning, stacklevel=3)
    return ret


def _reduce(loss, reduction: str, message: str = "{} is not a valid value for reduction"):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(message.format(reduction))


def _check_reduction(reduction: str, message: str = "{} is not a valid value for reduction") -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(message.format(reduction))


def _tensors(fn: str, **named) -> None:
    for i, (name, t) in enumerate(named.items(), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' (position {i}) must be Tensor, not {type(t).__name__}")


def _broadcast_warning(input, target) -> None:
    if input.shape != target.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), d = input - target; times ``weight``."""
    _tensors("huber_loss", input=input, target=target)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is not None and weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    _broadcast_warning(input, target)
    d = (input - target).abs()
    loss = _where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss if weight is None else loss * weight, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """max(0, -target (input1 - input2) + margin)."""
    _tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    _check_reduction(reduction)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0.0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
    """max(d(a, p) - d(a, n) + margin, 0), d the pairwise p-norm distance (``swap``: the smaller of
    d(a, n) and d(p, n))."""
    _tensors("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    reduction = _legacy(size_average, reduce, reduction)
    a, q, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == q == n:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {q}D, and negative {n}D inputs")
    if a not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have 1D or 2D shapes, but "
                           f"got: anchor {a}D inputs")
    _check_reduction(reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp_min(0.0), reduction)


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                          reduction: str = "mean"):
    """1 - cos(x1, x2) where target == 1, max(0, cos(x1, x2) - margin) where target == -1."""
    _tensors("cosine_embedding_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    t = target.ndim
    if t not in (0, 1):
        raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported")
    if t == 1 and not (input1.ndim == input2.ndim == 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if t == 0 and not (input1.ndim == input2.ndim == 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    _check_reduction(reduction)
    dim = input1.ndim - 1
    prod = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + _EPSILON) * ((input2 * input2).sum(dim) + _EPSILON)
    cos = prod / mag.sqrt()
    zeros = cos * 0.0
    pos = _where(target == 1, 1.0 - cos, zeros)
    neg = _where(target == -1, (cos - margin).clamp_min(0.0), zeros)
    return _reduce(pos + neg, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    """exp(input) - target input (``log_input``), else input - target log(input + eps); ``full`` adds
    Stirling's term target log(target) - target + 0.5 log(2 pi target) where target > 1."""
    _tensors("poisson_nll_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        safe = target.clamp_min(1.0)  # no log of 0 where the term is masked out
        stirling = safe * safe.log() - safe + 0.5 * (safe * (2 * math.pi)).log()
        loss = loss + _where(target > 1, stirling, stirling * 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with ``full``).
    As torch, the clamp of ``var`` is not differentiated: the gradient flows to ``var`` as if unclamped."""
    _tensors("gaussian_nll_loss", input=input, target=target)
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.detach() * 0.0 + var
    elif not isinstance(var, Tensor):
        raise TypeError(f"gaussian_nll_loss(): argument 'var' (position 3) must be Tensor or float, not "
                        f"{type(var).__name__}")
    elif bool((var < 0).any().item()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    _check_reduction(reduction, "{} is not valid")
    var = var + (var.clamp_min(eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """log(1 + exp(-target input)), written as -logsigmoid(target input) (no overflow)."""
    _tensors("soft_margin_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _reduce(-logsigmoid(target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """-(y logsigmoid(x) + (1 - y) logsigmoid(-x)), times ``weight``, averaged over the classes (last dim)."""
    _tensors("multilabel_soft_margin_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, "{} is not valid")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction, "{} is not valid")


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"):
    """x where target == 1, max(0, margin - x) where target == -1 (torch sums both terms, so a target
    of neither value contributes both)."""
    _tensors("hinge_embedding_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    zero = input * 0.0
    margin_term = _where(target != 1, (margin - input).clamp_min(0.0), zero)
    self_term = _where(target != -1, input, zero)
    return _reduce(margin_term + self_term, reduction)


def _margin_target(input, target, fn: str):
    """(N, C) input and (N,) target as 2-D, or the unbatched (C,) and () forms, with torch's checks."""
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim == 1 and input.shape[0] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise RuntimeError(f"{fn}(): expected target of an integer dtype, got {target.dtype.name}")
    batched = input.ndim == 2
    n = input.shape[0] if batched else 1
    return batched, n


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None,
                      reduction: str = "mean"):
    """sum over j != y of w[y] max(0, margin - x[y] + x[j])^p / C per sample, y its target class."""
    _tensors("multi_margin_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"multi_margin_loss(): argument 'weight' must be Tensor, not {type(weight).__name__}")
        if weight.ndim != 1:
            raise ValueError("weight must be one-dimensional")
    _check_reduction(reduction)
    batched, n = _margin_target(input, target, "multi_margin_loss")
    C = input.shape[-1]
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != C:
        raise RuntimeError(f"inconsistent weight size, expected {C} but got {list(weight.shape)}")
    x = input if batched else input.unsqueeze(0)
    y = target.reshape(n, 1)
    x_y = x.gather(1, y)  # an out-of-range class is the gather's IndexError
    term = (x - x_y + margin).clamp_min(0.0)
    if p == 2:
        term = term * term
    if weight is not None:
        term = term * weight.gather(0, y.reshape(-1)).reshape(n, 1)
    own = y == _arange_like(C, x)  # the target's own column is left out of the sum
    loss = _where(own, term * 0.0, term).sum(1) / C
    return _reduce(loss if batched else loss.squeeze(0), reduction)


def _arange_like(n: int, x):
    return arange(n, device=x.device).reshape(1, n)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C per sample;
    a sample's target classes are its target row up to the first -1."""
    _tensors("multilabel_margin_loss", input=input, target=target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    batched, n = _margin_target(input, target, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    C = input.shape[-1]
    x = input if batched else input.unsqueeze(0)
    t = target.reshape(n, C)
    # a row's classes end at its first -1: a running product of "not -1" marks the ones before it
    valid = (t >= 0).to(dt.int64).cumprod(1) > 0
    is_target = ((t.unsqueeze(2) == _arange_like(C, x).unsqueeze(0)) & valid.unsqueeze(2)).any(1)  # (n, C)
    x_y = x.gather(1, _where(valid, t, t * 0))  # out-of-range classes are the gather's IndexError
    pair = (1.0 - x_y.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0.0)  # (n, j, i)
    keep = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    loss = _where(keep, pair, pair * 0.0).sum((1, 2)) / C
    return _reduce(loss if batched else loss.squeeze(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with any distance ``d`` (default: pairwise_distance);
    ``swap`` takes the smaller of d(a, n) and d(p, n)."""
    _tensors("triplet_margin_with_distance_loss", anchor=anchor, positive=positive, negative=negative)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_reduction(reduction)
    a, q, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == q == n:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {q}D, and negative {n}D inputs")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0.0), reduction)
