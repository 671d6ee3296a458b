"""torch's batch-norm statistics ops, the pieces a batch norm over several processes is made of
(``nn.SyncBatchNorm`` runs them around its all-gather and all-reduce): ``batch_norm_stats
batch_norm_elemt batch_norm_gather_stats batch_norm_gather_stats_with_counts
batch_norm_backward_reduce batch_norm_backward_elemt batch_norm_update_stats``.

The three that pass over the input run the batch-norm family's kernels (``core/ops/batch_norm.py``,
``triton_kernels/batch_norm.py``): ``batch_norm_stats`` is the training forward's Welford pass (its
normalized output unused), ``batch_norm_elemt`` the eval forward with ``invstd`` given as the
variance ``invstd^-2`` and eps 0 (one pass), ``batch_norm_backward_reduce`` the backward's per-channel
sums (``sum(dy * xhat) / invstd`` is ``sum(dy * (x - mean))``). As torch's, these three have no
derivative (autograd/functions/batch_norm_stats.py raises torch's error at backward).

Why the others have no kernel: the gathers and the update of the running statistics work on
(world_size, C) and (C,) vectors, and ``batch_norm_update_stats`` / ``batch_norm_backward_elemt``
are a reduction and an elementwise chain with per-channel vectors broadcast; each piece is
dispatched, so autograd records them. The statistics are in the input's accumulation dtype (fp32
for fp16/bf16/fp32, fp64 for fp64), as torch's CUDA kernels' ``acc_type``. Per-process
statistics combine as torch's ``batch_norm_reduce_statistics_kernel``: a count-weighted mean and
the parallel-variance formula (each process's biased variance recovered from its ``invstd``).
The running statistics are updated in place with the unbiased variance, as ``batch_norm``.
"""
from __future__ import annotations

import numbers

from ...runtime.dtype_policy import FLOAT_COMPUTE
from ..tensor_base import TensorBase
from . import batch_norm as _bn


def _tensor(t, op: str, name: str, *, optional: bool = False):
    if t is None and optional:
        return None
    if not isinstance(t, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    return t


def _number(v, op: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' must be float, not {type(v).__name__}")
    return float(v)


def _input(input, op: str, name: str = "input"):
    _tensor(input, op, name)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}(): expected a floating point {name}, got {input.dtype.name}")
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.ndim, 1)}, "
                         f"{max(input.ndim, 1) - 1}], but got 1)")
    return input


def _channel(t, op: str, name: str, C: int, input, *, optional: bool = False):
    """A per-channel vector of C elements on the input's device."""
    if _tensor(t, op, name, optional=optional) is None:
        return None
    if t.numel() != C:
        raise RuntimeError(f"{op}(): {name} should contain {C} elements not {t.numel()}")
    if t.device != input.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{input.device} and {t.device}! ({op}, argument '{name}')")
    return t


def _dims(input) -> tuple:
    return (0,) + tuple(range(2, input.ndim))


def _bcast(v, input):
    """A (C,) vector viewed (1, C, 1, ...) against the input."""
    return v.reshape((1, -1) + (1,) * (input.ndim - 2))


def _acc(input):
    return FLOAT_COMPUTE[input.dtype]


def batch_norm_stats(input, eps):
    """``(mean, invstd)`` per channel: the batch mean and ``1 / sqrt(var + eps)`` of the biased variance."""
    op = "batch_norm_stats"
    _input(input, op)
    eps = _number(eps, op, "eps")
    _, mean, invstd = _bn.native_batch_norm(input, None, None, None, None, True, 0.0, eps)
    return mean, invstd  # no samples: NaN, as 0 / 0


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    """``(input - mean) * invstd * weight + bias`` per channel, in the input's dtype (``eps`` is unused, as
    torch's: ``invstd`` holds it)."""
    op = "batch_norm_elemt"
    _input(input, op)
    C = input.shape[1]
    weight = _channel(weight, op, "weight", C, input, optional=True)
    bias = _channel(bias, op, "bias", C, input, optional=True)
    mean, invstd = _channel(mean, op, "mean", C, input), _channel(invstd, op, "invstd", C, input)
    _number(eps, op, "eps")
    acc = _acc(input)
    # the eval forward normalizes by 1 / sqrt(var + eps): invstd as the variance invstd^-2 with eps 0
    variance = invstd.reshape(-1).to(acc).pow(-2)
    return _bn.native_batch_norm(input, weight, bias, mean.reshape(-1).to(acc).contiguous(), variance, False, 0.0,
                                 0.0)[0]


def _update_running(running_mean, running_var, momentum, mean, unbiased_var):
    """``running = (1 - momentum) * running + momentum * batch``, in place, off the autograd graph."""
    if running_mean is not None:
        running_mean.copy_((running_mean.to(mean.dtype) * (1.0 - momentum) + mean.detach() * momentum))
    if running_var is not None:
        running_var.copy_((running_var.to(mean.dtype) * (1.0 - momentum) + unbiased_var.detach() * momentum))


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    """The statistics of the union of W batches from each one's (C,) ``mean``/``invstd`` (rows of (W, C)) and
    its element count per channel (``counts``, (W,)): ``(mean, invstd)`` of the whole, and the running
    statistics updated with its unbiased variance. A batch with count 0 adds nothing."""
    op = "batch_norm_gather_stats_with_counts"
    _tensor(input, op, "input")
    mean, invstd, counts = (_tensor(mean, op, "mean"), _tensor(invstd, op, "invstd"), _tensor(counts, op, "counts"))
    if mean.ndim != 2 or invstd.shape != mean.shape:
        raise RuntimeError(f"{op}(): mean and invstd must be (world_size, C) alike, got {list(mean.shape)} and "
                           f"{list(invstd.shape)}")
    W, C = mean.shape
    if counts.numel() != W:
        raise RuntimeError(f"{op}(): counts should contain {W} elements (one per row of mean) not {counts.numel()}")
    running_mean = _channel(running_mean, op, "running_mean", C, mean, optional=True)
    running_var = _channel(running_var, op, "running_var", C, mean, optional=True)
    momentum, eps = _number(momentum, op, "momentum"), _number(eps, op, "eps")
    acc = mean.dtype if mean.dtype.is_floating_point else _acc(input)
    n = counts.to(acc).reshape(W, 1)
    total = n.sum(0)
    m = mean.to(acc)
    whole_mean = (m * n).sum(0) / total
    var_i = invstd.to(acc).pow(-2) - eps  # each batch's biased variance
    m2 = (n * (var_i + (m - whole_mean).pow(2))).sum(0)  # the whole's sum of squared deviations
    var = m2 / total
    _update_running(running_mean, running_var, momentum, whole_mean, m2 / (total - 1))
    return whole_mean, (var + eps).rsqrt()


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    """:func:`batch_norm_gather_stats_with_counts` with every batch of ``count`` elements per channel."""
    op = "batch_norm_gather_stats"
    mean = _tensor(mean, op, "mean")
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise TypeError(f"{op}(): argument 'count' must be int, not {type(count).__name__}")
    counts = TensorBase._empty((mean.shape[0] if mean.ndim else 1,), mean.dtype, mean.device).fill_(int(count))
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts)


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    """``(sum_dy, sum_dy_xmu, grad_weight, grad_bias)`` per channel: the sums the input's gradient needs
    (``input_g``), ``sum(dy * (x - mean)) * invstd`` (``weight_g``) and ``sum(dy)`` (``bias_g``); an output
    not asked for is None."""
    op = "batch_norm_backward_reduce"
    _input(input, op)
    _tensor(grad_out, op, "grad_out")
    if tuple(grad_out.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}(): grad_out should have the input's shape {list(input.shape)}, got "
                           f"{list(grad_out.shape)}")
    C = input.shape[1]
    mean, invstd = _channel(mean, op, "mean", C, input), _channel(invstd, op, "invstd", C, input)
    weight = _channel(weight, op, "weight", C, input, optional=True)
    acc = _acc(input)
    istd = invstd.reshape(-1).to(acc).contiguous()
    # the training backward's per-channel sums: sum(dy * xhat) (its weight gradient) and sum(dy)
    _, dy_xhat, sum_dy = _bn.batch_norm_backward(grad_out, input, None, mean.reshape(-1).to(acc).contiguous(), istd,
                                                 True)
    sum_dy_xmu = dy_xhat / istd
    wdtype = weight.dtype if weight is not None else input.dtype
    return (sum_dy if input_g else None, sum_dy_xmu if input_g else None,
            dy_xhat.to(wdtype) if weight_g else None, sum_dy.to(wdtype) if bias_g else None)


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    """The input's gradient from the reduced sums over every process (``count``: each one's element count
    per channel): ``(dy - sum_dy / n - (x - mean) * invstd^2 * sum_dy_xmu / n) * invstd * weight``."""
    op = "batch_norm_backward_elemt"
    _input(input, op)
    _tensor(grad_out, op, "grad_out")
    C = input.shape[1]
    mean, invstd = _channel(mean, op, "mean", C, input), _channel(invstd, op, "invstd", C, input)
    weight = _channel(weight, op, "weight", C, input, optional=True)
    sum_dy, sum_dy_xmu = _channel(sum_dy, op, "sum_dy", C, input), _channel(sum_dy_xmu, op, "sum_dy_xmu", C, input)
    _tensor(count, op, "count")
    if count.dtype.is_floating_point:  # torch's check: the counts are whole numbers
        raise RuntimeError(f"{op}(): expected count to be an integer tensor, got {count.dtype.name}")
    acc = _acc(input)
    inv_n = count.to(acc).sum().reciprocal()
    istd = invstd.to(acc)
    scale = istd if weight is None else istd * weight.to(acc)
    grad_mean = _bcast(sum_dy.to(acc) * inv_n, input)
    proj = _bcast(sum_dy_xmu.to(acc) * inv_n * istd * istd, input)
    xmu = input.to(acc) - _bcast(mean.to(acc), input)
    return ((grad_out.to(acc) - grad_mean - xmu * proj) * _bcast(scale, input)).to(input.dtype)


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    """``(mean, var)`` per channel (the biased variance), and the running statistics updated in place with
    the unbiased one."""
    op = "batch_norm_update_stats"
    _input(input, op)
    C = input.shape[1]
    running_mean = _channel(running_mean, op, "running_mean", C, input, optional=True)
    running_var = _channel(running_var, op, "running_var", C, input, optional=True)
    momentum = _number(momentum, op, "momentum")
    x, dims = input.to(_acc(input)), _dims(input)
    mean, var = x.mean(dims), x.var(dims, correction=0)
    n = input.numel() // max(C, 1)
    _update_running(running_mean, running_var, momentum, mean, var * (n / max(n - 1, 1)) if n > 1 else
                    var * float("nan"))
    return mean, var
