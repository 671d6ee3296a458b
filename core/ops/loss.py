"""Loss ops on Tensors: ``cross_entropy`` (PyTorch's argument checks, then the fused log-softmax +
NLL kernels of ``triton_kernels/loss.py``), and ``nll_loss``/``mse_loss``, written with other ops
(so autograd records their pieces). Differentiation of cross_entropy: ``autograd/functions/loss.py``,
whose backward runs :func:`cross_entropy_backward` here (no layer above core launches a kernel).

Class targets, as torch checks them: targets in host memory are checked here, on the host, before
any kernel (an IndexError from the call). Targets in device memory are checked by the kernels on the
device (``runtime/device_asserts.py``): a host copy of them would make every classification step
wait for the device and could not be captured into a CUDA graph; so, as torch's device-side assert,
"Target N is out of bounds." is raised at the next synchronisation. The mean's denominator (the
count, or the summed weights, of the non-ignored targets) is likewise a device value, never a host int."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers
import warnings

from ...triton_kernels import loss as _k
from ...triton_kernels import random as _rand
from ...runtime import device_asserts
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from . import index as _ix
from ..shape import broadcast_shapes
from ..tensor_base import TensorBase

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor

REDUCTIONS = ("none", "mean", "sum")


def _as_rows(input: Tensor, target: Tensor):
    """(N, C, d1, ...) logits -> (N * d1 * ..., C) rows, targets flattened to match."""
    if input.ndim == 1:
        return input.unsqueeze(0), target.reshape(1)
    if input.ndim == 2:
        return input, target
    moved = input.permute(0, *range(2, input.ndim), 1)  # classes last
    return moved.reshape(-1, input.shape[1]), target.reshape(-1)


def check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight, name="cross_entropy") -> None:
    """cross_entropy's (and nll_loss's) argument checks, with torch's messages, before any kernel runs: tensor
    types, a floating input, the target's shape and dtype (class indices or probabilities), reduction,
    weight and label_smoothing."""
    if not isinstance(input, TensorBase):
        raise TypeError(f"cross_entropy(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(target, TensorBase):
        raise TypeError(f"cross_entropy(): argument 'target' must be Tensor, not {type(target).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"cross_entropy(): expected a floating point input, got {input.dtype.name}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"{name}(): argument 'label_smoothing' must be float, not {type(label_smoothing).__name__}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"{name}(): argument 'ignore_index' must be int, not {type(ignore_index).__name__}")
    if weight is not None:
        if not isinstance(weight, TensorBase):
            raise TypeError(f"{name}(): argument 'weight' must be Tensor, not {type(weight).__name__}")
        if not weight.dtype.is_floating_point:
            raise RuntimeError(f"{name}(): expected a floating point 'weight', got {weight.dtype.name}")
    if target.dtype.is_floating_point:  # class probabilities: checked by cross_entropy_probs
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if input.ndim == 0:
            raise RuntimeError("cross_entropy(): input must have at least 1 dimension (the classes), got 0")
        C = input.shape[0] if input.ndim == 1 else input.shape[1]
        if weight is not None and (weight.ndim != 1 or weight.shape[0] != C):
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                               f"weight tensor of shape: {list(weight.shape)}")
        return
    if target.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name}")
    if input.ndim == 0:
        raise RuntimeError("cross_entropy(): input must have at least 1 dimension (the classes), got 0")
    expected = () if input.ndim == 1 else (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target.shape[0]}).")
        raise RuntimeError(f"cross_entropy(): expected target of shape {list(expected)}, got {list(target.shape)}")
    if target.device != input.device:
        raise RuntimeError(f"cross_entropy(): input is on {input.device} but target is on {target.device}")
    C = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        if weight.ndim != 1 or weight.shape[0] != C:
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                               f"weight tensor of shape: {list(weight.shape)}")
        if weight.device != input.device:
            raise RuntimeError(f"{name}(): input is on {input.device} but weight is on {weight.device}")
    if target.device.type != "cpu":
        return  # checked on the device by the kernels (target_check): no host copy, no sync
    t = target._to_host_array()
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds (expected a class index in "
                         f"[0, {C - 1}] or ignore_index={ignore_index}).")


def target_check(target: Tensor, C: int):
    """How the loss kernels check class targets against C classes: None for host targets (already
    checked by :func:`check_cross_entropy`), else ``(flag, header)`` for the kernels to record a bad
    target in the device's error flag with torch's "Target N is out of bounds."."""
    if target.device.type == "cpu" or target.numel() == 0:
        return None
    flag, _, header = _ix.device_check(target, C, 0, False, site=device_asserts.TARGET)
    return flag, header


def class_weights(weight, x2: Tensor):
    """``weight`` as a contiguous compute-dtype (C,) tensor and its 0-d sum (no host sync); or Nones."""
    if weight is None:
        return None, None
    w = weight.detach().to(FLOAT_COMPUTE[x2.dtype]).contiguous()
    return w, w.sum()


def cross_entropy_rows(x2: Tensor, t1: Tensor, ignore_index: int, weight=None, wsum=None, label_smoothing=0.0,
                       row_weights=False):
    """Per-row losses and log-sum-exps (fp32; fp64 for fp64 logits) of (N, C) logits; with a
    ``weight`` (from ``class_weights``) or ``row_weights`` also each row's w[target] (1 without a
    weight; 0 where ignored), whose sum is the mean's denominator, else None."""
    N = x2.shape[0]
    compute = FLOAT_COMPUTE[x2.dtype]
    loss = TensorBase._empty((N,), compute, x2.device)
    lse = TensorBase._empty((N,), compute, x2.device)
    wt = TensorBase._empty((N,), compute, x2.device) if weight is not None or row_weights else None
    t1 = t1 if t1.dtype is dt.int64 else t1.to(dt.int64)
    _k.cross_entropy_forward(loss, lse, x2, t1.contiguous(), int(ignore_index), weight, wsum, wt,
                             float(label_smoothing), check=target_check(t1, x2.shape[1]))
    return loss, lse, t1, wt


def cross_entropy_forward(input, target, reduction, ignore_index, weight, label_smoothing):
    """The loss, and what its backward needs: (out, (x2, t1, lse, w, wsum), count, denom): count is
    1 (a host divisor; none is needed), denom the mean's device denominator (None without a mean)."""
    x2, t1 = _as_rows(input, target)
    w, wsum = class_weights(weight, x2)
    rows, lse, t1, wt = cross_entropy_rows(x2, t1, ignore_index, w, wsum, label_smoothing,
                                           row_weights=reduction == "mean")
    count, denom = 1, None
    if reduction == "none":
        out = rows.reshape(target.shape)
    else:
        out = rows.sum()
        if reduction == "mean":
            # torch divides by the summed weights of the non-ignored targets (their count without a
            # weight), kept on the device: a host count would wait for it. All ignored: 0 / 0 = nan, as torch.
            denom = wt.sum()
            out = out / denom
    return out.to(input.dtype), (x2, t1, lse, w, wsum), count, denom


def cross_entropy_backward(g, in_shape, x2, t1, lse, w, wsum, count, denom, ignore_index, label_smoothing):
    """d loss / d input from what :func:`cross_entropy_forward` saved, in the input's layout:
    ``g`` times softmax - one_hot (smoothed, weighted) per row, scaled as the reduction was."""
    dx = TensorBase._empty(x2.shape, x2.dtype, x2.device)
    g = g.reshape(-1) if g.ndim else g
    scale = 1.0 / count if count else float("nan")
    _k.cross_entropy_backward(dx, x2, t1, lse, g, scale, ignore_index, w, wsum, label_smoothing, denom=denom)
    if len(in_shape) == 1:
        return dx.reshape(in_shape)
    if len(in_shape) > 2:  # rows were (N, spatial..., C): move classes back to dim 1
        dx = dx.reshape((in_shape[0],) + tuple(in_shape[2:]) + (in_shape[1],))
        dx = dx.permute(0, len(in_shape) - 1, *range(1, len(in_shape) - 1))
    return dx


def _no_legacy(size_average, reduce):
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average/reduce are deprecated; use reduction=")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy with class-index targets: ``weight`` per class,
    ``ignore_index``, ``reduction`` and ``label_smoothing`` as torch defines them (see
    ``triton_kernels/loss.py``), all in the fused kernels. No gradient flows to ``weight``."""
    _no_legacy(size_average, reduce)
    check_cross_entropy(input, target, reduction, ignore_index, label_smoothing, weight)
    if target.dtype.is_floating_point:
        return cross_entropy_probs(input, target, weight, reduction, float(label_smoothing))
    return cross_entropy_forward(input, target, reduction, int(ignore_index), weight, float(label_smoothing))[0]


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-weight[t] * input[i, t] from log-probabilities, as a masked sum (ops autograd records); the
    weighted mean divides by the summed weights of the non-ignored targets, as torch."""
    _no_legacy(size_average, reduce)
    check_cross_entropy(input, target, reduction, ignore_index, 0.0, weight, name="nll_loss")
    x2, t1 = _as_rows(input, target)
    t1 = t1.to(dt.int64)
    C = x2.shape[1]
    check = target_check(t1, C)
    if check is not None:  # the ops below never read out of bounds, but torch's error must be raised
        _k.check_targets(t1.contiguous(), C, int(ignore_index), check)
    classes = TensorBase._empty((C,), dt.int64, x2.device)
    _rand.arange(classes, 0, 1)
    pick = classes.reshape(1, C) == t1.reshape(-1, 1)
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
    """Mean (or sum, or none) of the squared differences."""
    if not isinstance(input, TensorBase) or not isinstance(target, TensorBase):
        raise TypeError("mse_loss(): input and target must be Tensors")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.shape != target.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)
    d = (input - target) ** 2
    return d if reduction == "none" else (d.mean() if reduction == "mean" else d.sum())


# ----- more losses ---------------------------------------------------------------------------------
# l1_loss, smooth_l1_loss, binary_cross_entropy, kl_div and cross_entropy with probability targets
# are compositions of recorded ops (autograd records their pieces); binary_cross_entropy_with_logits
# is one fused kernel each way (triton_kernels/loss.py; derivative in autograd/functions/loss.py).
def _check_pair(input, target, name: str):
    if not isinstance(input, TensorBase):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(target, TensorBase):
        raise TypeError(f"{name}(): argument 'target' (position 2) must be Tensor, not {type(target).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating point input, got {input.dtype.name}")


def _check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_shape(input, target):
    if input.shape != target.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=4)


def _reduce(d, reduction):
    return d if reduction == "none" else (d.mean() if reduction == "mean" else d.sum())


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or none) of |input - target|."""
    _no_legacy(size_average, reduce)
    _check_pair(input, target, "l1_loss")
    _check_reduction(reduction)
    _warn_shape(input, target)
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta == 0: plain L1), as torch."""
    _no_legacy(size_average, reduce)
    _check_pair(input, target, "smooth_l1_loss")
    _check_reduction(reduction)
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"smooth_l1_loss(): argument 'beta' must be a number, not {type(beta).__name__}")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_shape(input, target)
    a = (input - target).abs()
    if beta == 0:
        return _reduce(a, reduction)
    quad = (a * a) * (0.5 / beta)
    return _reduce(quad.where(a < beta, a - 0.5 * beta), reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log p + (1 - y) log(1 - p)) from probabilities; each log clamped to >= -100, as torch."""
    _no_legacy(size_average, reduce)
    _check_pair(input, target, "binary_cross_entropy")
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if input.numel():
        lo, hi = float(input.detach().amin().item()), float(input.detach().amax().item())
        if lo < 0 or hi > 1:
            raise RuntimeError("all elements of input should be between 0 and 1")
    logp = input.log().clamp_min(-100.0)
    log1mp = (1 - input).log().clamp_min(-100.0)
    d = -(target * logp + (1 - target) * log1mp)
    if weight is not None:
        d = d * weight
    return _reduce(d, reduction)


def check_bce_with_logits(input, target, weight, pos_weight, reduction):
    """binary_cross_entropy_with_logits's argument checks, with torch's messages: matching shapes and floating
    dtypes, the reduction, weight and pos_weight broadcastable."""
    _check_pair(input, target, "binary_cross_entropy_with_logits")
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"binary_cross_entropy_with_logits(): expected a floating point target, got "
                           f"{target.dtype.name}")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is None:
            continue
        if not isinstance(t, TensorBase):
            raise TypeError(f"binary_cross_entropy_with_logits(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
        try:
            shape = broadcast_shapes(t.shape, input.shape)
        except RuntimeError:
            shape = None
        if shape is None or tuple(shape) != tuple(input.shape):
            raise RuntimeError(f"binary_cross_entropy_with_logits(): {name} of shape {list(t.shape)} does not "
                               f"broadcast to the input's shape {list(input.shape)}")
        if t.device != input.device:
            raise RuntimeError(f"binary_cross_entropy_with_logits(): input is on {input.device} but {name} is on "
                               f"{t.device}")


def bce_with_logits_forward(input, target, weight, pos_weight, reduction):
    """The loss (input's dtype) from one fused kernel plus, for mean/sum, one reduction."""
    shape = tuple(input.shape)
    rows = TensorBase._empty(shape, FLOAT_COMPUTE[input.dtype], input.device)
    w = weight.detach().expand(shape) if weight is not None else None
    pw = pos_weight.detach().expand(shape) if pos_weight is not None else None
    _k.bce_with_logits(rows, input, target, w, pw)
    if reduction == "none":
        return rows.to(input.dtype)
    return (rows.mean() if reduction == "mean" else rows.sum()).to(input.dtype)


def bce_with_logits_backward(g, input, target, weight, pos_weight, reduction):
    """d loss / d input for the incoming gradient ``g`` (0-d for mean/sum): one fused kernel."""
    shape = tuple(input.shape)
    dx = TensorBase._empty(shape, input.dtype, input.device)
    w = weight.detach().expand(shape) if weight is not None else None
    pw = pos_weight.detach().expand(shape) if pos_weight is not None else None
    n = input.numel()
    scale = 1.0 / n if reduction == "mean" and n else 1.0
    _k.bce_with_logits(dx, input, target, w, pw, g=g.expand(shape), scale=scale)
    return dx


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """torch's BCE with logits, fused and stable for any logit (see ``triton_kernels/loss.py``)."""
    _no_legacy(size_average, reduce)
    check_bce_with_logits(input, target, weight, pos_weight, reduction)
    return bce_with_logits_forward(input, target, weight, pos_weight, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input) (input: log-probabilities), 0 where target == 0, as torch;
    ``reduction='batchmean'`` divides the sum by the batch size."""
    _no_legacy(size_average, reduce)
    _check_pair(input, target, "kl_div")
    if reduction not in REDUCTIONS + ("batchmean",):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=3)
    if log_target:
        d = target.exp() * (target - input)
    else:
        safe = target.where(target > 0, 1.0)  # log(1) = 0 where target is 0: no 0 * -inf
        d = (target * (safe.log() - input)).where(target > 0, 0.0 * input)
    if reduction == "batchmean":
        return d.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(d, reduction)


def cross_entropy_probs(input, target, weight=None, reduction="mean", label_smoothing=0.0):
    """cross_entropy with class-probability targets (same shape as input): -sum_c w[c] t[c] log p[c]
    per sample; label smoothing mixes t with the uniform 1/C; 'mean' divides by the number of
    samples (N * d1 * ...), as torch. Written with recorded ops."""
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"cross_entropy(): expected target of shape {list(input.shape)} (class probabilities "
                           f"have the input's shape), got {list(target.shape)}")
    if target.device != input.device:
        raise RuntimeError(f"cross_entropy(): input is on {input.device} but target is on {target.device}")
    cdim = 0 if input.ndim == 1 else 1
    C = input.shape[cdim]
    logp = input.log_softmax(cdim)
    t = target.to(logp.dtype)
    if label_smoothing > 0:
        t = t * (1.0 - label_smoothing) + label_smoothing / C
    prod = logp * t
    if weight is not None:
        shape = [1] * input.ndim
        shape[cdim] = C
        prod = prod * weight.detach().reshape(shape).to(prod.dtype)
    rows = -prod.sum(cdim)
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / max(1, input.numel() // max(C, 1)) if input.numel() else rows.sum() * float("nan")
