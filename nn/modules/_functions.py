"""The autograd Function behind ``nn.SyncBatchNorm`` (``batchnorm.py``), torch's
``torch/nn/modules/_functions.py``: batch norm whose statistics are those of the whole batch across
the ranks of a process group. Each rank's per-channel
``batch_norm_stats`` and count are all-gathered, combined by ``batch_norm_gather_stats_with_counts``
(which also updates the running statistics) and applied by ``batch_norm_elemt``; the backward
all-reduces the per-channel sums of ``batch_norm_backward_reduce`` and finishes with
``batch_norm_backward_elemt``. Outside a process group, with one rank, or in eval mode the module
runs ``F.batch_norm`` instead.

Why the seam: nn sits below comm (tests/test_layering.py), so this module cannot import it. As
torch's module looks ``torch.distributed`` up at call time, this module holds the package that
registered itself with :func:`register_distributed`; ``tritensor.comm`` does so on import (which
``import tritensor`` does). Until then no process group can exist, and SyncBatchNorm is BatchNorm.
"""
from __future__ import annotations

from ...autograd.function import Function
from ...core import functional as _tf
from ...core.factories import empty_like, full, zeros
from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE

__all__ = ["SyncBatchNorm", "register_distributed", "distributed"]

_DIST = []  # the registered torch.distributed-like package (tritensor.comm), at most one


def register_distributed(package) -> None:
    """Called by ``tritensor.comm`` on import: the package whose ``is_initialized``, ``group.WORLD``,
    ``get_world_size``, ``all_gather``, ``all_reduce`` and ``ReduceOp`` SyncBatchNorm synchronizes with."""
    _DIST[:] = [package]


def distributed():
    """The registered package, or None before ``tritensor.comm`` is imported."""
    return _DIST[0] if _DIST else None


class SyncBatchNorm(Function):
    """torch's ``sync_batch_norm`` Function: the forward gathers the ranks' statistics, the backward
    all-reduces the sums the input's gradient needs."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        dist = _DIST[0]
        input = input.contiguous()
        weight = weight.contiguous() if weight is not None else None
        C = input.shape[1]
        if input.numel() > 0:
            mean, invstd = _tf.batch_norm_stats(input, eps)
            count = full((1,), input.numel() // C, dtype=mean.dtype, device=mean.device)
            combined = _tf.cat([mean, invstd, count], 0)
        else:  # this rank has no samples: it sends zeros, and a count of 0 leaves it out
            combined = zeros(2 * C + 1, dtype=FLOAT_COMPUTE[input.dtype],
                                 device=input.device)
        gathered = [empty_like(combined) for _ in range(world_size)]
        dist.all_gather(gathered, combined, process_group)
        combined = _tf.stack(gathered, 0)
        mean_all, invstd_all, count_all = combined.split(C, 1)
        keep = count_all.reshape(-1) >= 1
        mean_all, invstd_all, count_all = mean_all[keep], invstd_all[keep], count_all[keep]
        counts = count_all.reshape(-1)
        if running_mean is not None and counts.dtype != running_mean.dtype:
            counts = counts.to(running_mean.dtype)
        mean, invstd = _tf.batch_norm_gather_stats_with_counts(input, mean_all, invstd_all, running_mean, running_var,
                                                               momentum, eps, counts)
        ctx.save_for_backward(input, weight, mean, invstd, count_all.to(dt.int32))
        ctx.process_group = process_group
        if input.numel() > 0:
            return _tf.batch_norm_elemt(input, weight, bias, mean, invstd, eps)
        return empty_like(input)

    @staticmethod
    def backward(ctx, grad_output):
        dist = _DIST[0]
        grad_output = grad_output.contiguous()
        saved_input, weight, mean, invstd, count = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        if saved_input.numel() > 0:
            sum_dy, sum_dy_xmu, grad_weight, grad_bias = _tf.batch_norm_backward_reduce(
                grad_output, saved_input, mean, invstd, weight, need_input, need_weight, need_bias)
            if need_input:
                C = sum_dy.shape[0]
                combined = _tf.cat([sum_dy, sum_dy_xmu], 0)
                dist.all_reduce(combined, dist.ReduceOp.SUM, ctx.process_group)
                sum_dy, sum_dy_xmu = combined.split(C)
                if weight is not None and weight.dtype != mean.dtype:
                    weight = weight.to(mean.dtype)
                grad_input = _tf.batch_norm_backward_elemt(grad_output, saved_input, mean, invstd, weight, sum_dy,
                                                           sum_dy_xmu, count)
            if weight is None or not need_weight:
                grad_weight = None
            if weight is None or not need_bias:
                grad_bias = None
        elif need_input:  # the other ranks' all-reduce needs this rank's (zero) part
            C = saved_input.shape[1]
            dist.all_reduce(zeros(2 * C, dtype=mean.dtype, device=saved_input.device), dist.ReduceOp.SUM,
                            ctx.process_group)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
