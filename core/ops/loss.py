"""Loss ops on Tensors: ``cross_entropy`` (PyTorch's argument checks, then the fused log-softmax +
NLL kernels of ``triton_kernels/loss.py``), and ``nll_loss``/``mse_loss``, written with other ops
(so autograd records their pieces). Differentiation of cross_entropy: ``autograd/functions/loss.py``,
whose backward runs :func:`cross_entropy_backward` here (no layer above core launches a kernel)."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from ...triton_kernels import loss as _k
from ...triton_kernels import random as _rand
from ...runtime import dtype as dt
from ..tensor_base import TensorBase

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
    if target.dtype.is_floating_point:
        raise NotImplementedError("cross_entropy(): class-probability targets are not implemented; "
                                  "pass class indices (int64)")
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
    t = target._to_host_array()
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds (expected a class index in "
                         f"[0, {C - 1}] or ignore_index={ignore_index}).")


def compute_dtype(x: Tensor):
    return dt.float64 if x.dtype is dt.float64 else dt.float32


def class_weights(weight, x2: Tensor):
    """``weight`` as a contiguous compute-dtype (C,) tensor and its 0-d sum (no host sync); or Nones."""
    if weight is None:
        return None, None
    w = weight.detach().to(compute_dtype(x2)).contiguous()
    return w, w.sum()


def cross_entropy_rows(x2: Tensor, t1: Tensor, ignore_index: int, weight=None, wsum=None, label_smoothing=0.0):
    """Per-row losses and log-sum-exps (fp32; fp64 for fp64 logits) of (N, C) logits; with a
    ``weight`` (from ``class_weights``) also each row's w[target] (0 where ignored), else None."""
    N = x2.shape[0]
    compute = compute_dtype(x2)
    loss = TensorBase._empty((N,), compute, x2.device)
    lse = TensorBase._empty((N,), compute, x2.device)
    wt = TensorBase._empty((N,), compute, x2.device) if weight is not None else None
    t1 = t1 if t1.dtype is dt.int64 else t1.to(dt.int64)
    _k.cross_entropy_forward(loss, lse, x2, t1.contiguous(), int(ignore_index), weight, wsum, wt,
                             float(label_smoothing))
    return loss, lse, t1, wt


def count_valid(target: Tensor, ignore_index: int) -> int:
    return int(np.count_nonzero(target._to_host_array() != ignore_index))


def cross_entropy_forward(input, target, reduction, ignore_index, weight, label_smoothing):
    """The loss, and what its backward needs: (out, (x2, t1, lse, w, wsum), count, denom)."""
    x2, t1 = _as_rows(input, target)
    w, wsum = class_weights(weight, x2)
    rows, lse, t1, wt = cross_entropy_rows(x2, t1, ignore_index, w, wsum, label_smoothing)
    count, denom = 1, None
    if reduction == "none":
        out = rows.reshape(target.shape)
    else:
        out = rows.sum()
        if reduction == "mean" and w is not None:
            denom = wt.sum()  # torch: divide by the summed weights of the non-ignored targets (a device tensor)
            out = out / denom
        elif reduction == "mean":
            count = count_valid(t1, ignore_index)
            out = out / count if count else out * float("nan")
    return out.to(input.dtype), (x2, t1, lse, w, wsum), count, denom


def cross_entropy_backward(g, in_shape, x2, t1, lse, w, wsum, count, denom, ignore_index, label_smoothing):
    """d loss / d input from what :func:`cross_entropy_forward` saved, in the input's layout:
    ``g`` times softmax - one_hot (smoothed, weighted) per row, scaled as the reduction was."""
    dx = TensorBase._empty(x2.shape, x2.dtype, x2.device)
    g = g.reshape(-1) if g.ndim else g
    if denom is not None:
        g = g.to(denom.dtype) / denom
    scale = 1.0 / count if count else float("nan")
    _k.cross_entropy_backward(dx, x2, t1, lse, g, scale, ignore_index, w, wsum, label_smoothing)
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
    return cross_entropy_forward(input, target, reduction, int(ignore_index), weight, float(label_smoothing))[0]


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-weight[t] * input[i, t] from log-probabilities, as a masked sum (ops autograd records); the
    weighted mean divides by the summed weights of the non-ignored targets, as torch."""
    _no_legacy(size_average, reduce)
    check_cross_entropy(input, target, reduction, ignore_index, 0.0, weight, name="nll_loss")
    x2, t1 = _as_rows(input, target)
    t1 = t1.to(dt.int64)
    C = x2.shape[1]
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
