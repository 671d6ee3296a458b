"""``ctc_loss``: the connectionist temporal classification loss (Graves et al. 2006), as
``torch.nn.functional.ctc_loss``.

torch's argument checks come first, with its messages: log_probs (T, N, C) or unbatched (T, C)
in fp32/fp64 (torch has no half kernel: the same NotImplementedError), targets padded (N, S) or
concatenated (sum of the target lengths), the lengths as tensors or tuples of ints, read to the
host (torch's kernels take them as host arrays too: they size the recursion). Then the kernel of
``triton_kernels/ctc.py`` gives each sample's negative log-likelihood and the log-alpha table its
backward needs; ``zero_infinity`` zeroes infinite losses; the reduction is torch's ("mean" divides
each loss by its target length, at least 1, then averages over the batch), a few dispatched ops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numbers

import numpy as np

from ...runtime import dtype as dt
from ...runtime.dtype_policy import FLOAT_COMPUTE
from ...triton_kernels import ctc as _k
from ..tensor_base import TensorBase
from . import host_tensor

if TYPE_CHECKING:
    from ..tensor import Tensor

_TYPE = {dt.float16: "Half", dt.bfloat16: "BFloat16"}


def _lengths(v, name: str, n: int) -> list:
    if isinstance(v, TensorBase):
        if v.dtype.is_floating_point or v.dtype == dt.bool_:
            raise RuntimeError(f"{name} must be integral")
        if v.ndim > 1:
            raise RuntimeError(f"{name} must be 1-D")
        out = [int(x) for x in np.atleast_1d(v.cpu().numpy())]
    elif isinstance(v, (list, tuple)) and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in v):
        out = [int(x) for x in v]
    else:
        raise TypeError(f"ctc_loss(): argument '{name}' must be a Tensor or a tuple of ints, not {type(v).__name__}")
    if len(out) != n:
        raise RuntimeError(f"{name} must be of size batch_size")
    return out


def check(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """torch's checks, in its order; returns (log_probs as (T, N, C), targets, input lengths, target
    lengths, each sample's offset into targets, the target element stride, whether unbatched)."""
    for x, name in ((log_probs, "log_probs"), (targets, "targets")):
        if not isinstance(x, TensorBase):
            raise TypeError(f"ctc_loss(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.dtype in _TYPE:
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for \'{_TYPE[log_probs.dtype]}\'')
    if not log_probs.dtype.is_floating_point:
        raise RuntimeError(f"ctc_loss(): expected log_probs of a floating point dtype, got {log_probs.dtype.name}")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss(): expected log_probs of 2 (T, C) or 3 (T, N, C) dimensions, got "
                           f"{log_probs.ndim}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    in_lens = _lengths(input_lengths, "input_lengths", N)
    tgt_lens = _lengths(target_lengths, "target_lengths", N)
    tg = targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets
    for name, lens, limit in (("input_lengths", in_lens, T), ("target_lengths", tgt_lens, None)):
        for v in lens:
            if v < 0:
                raise RuntimeError(f"Expected {name} to have value at least 0, but got value {v} (while checking "
                                   "arguments for ctc_loss_allocate_outputs)")
            if limit is not None and v > limit:
                raise RuntimeError(f"Expected {name} to have value at most {limit}, but got value {v} (while "
                                   "checking arguments for ctc_loss_allocate_outputs)")
    if tg.ndim == 1:  # concatenated targets
        total = sum(tgt_lens)
        if tg.shape[0] < total:
            raise RuntimeError(f"Expected tensor to have size at least {total} at dimension 0, but got size "
                               f"{tg.shape[0]} for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_allocate_outputs)")
        offsets = np.concatenate([[0], np.cumsum(tgt_lens)[:-1]]).astype(np.int64) * tg.stride(0) \
            if N else np.zeros(0, np.int64)
        ts = tg.stride(0)
    elif tg.ndim == 2:
        if tg.shape[0] != N:
            raise RuntimeError(f"Expected tensor to have size {N} at dimension 0, but got size {tg.shape[0]} for "
                               "argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)")
        longest = max(tgt_lens, default=0)
        if tg.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                               f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_allocate_outputs)")
        offsets = np.arange(N, dtype=np.int64) * tg.stride(0)
        ts = tg.stride(1)
    else:
        raise RuntimeError(f"ctc_loss(): expected targets of 1 (concatenated) or 2 (N, S) dimensions, got {tg.ndim}")
    if tg.dtype.is_floating_point or tg.dtype == dt.bool_:
        tg = tg.to(dt.int64)  # torch reads float targets as class indices too
    if lp.device != tg.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{lp.device} and {tg.device}!")
    return lp, tg, in_lens, tgt_lens, offsets, ts, unbatched


class Prepared:
    """What the kernels take, made once per call: the lengths and offsets on the device, the padded
    state count S' = 2 max(L) + 1, the accumulation dtype."""

    def __init__(self, lp, tg, in_lens, tgt_lens, offsets, ts, blank):
        self.lp, self.tg, self.ts, self.blank = lp, tg, ts, int(blank)
        self.in_lens, self.tgt_lens = in_lens, tgt_lens
        dev = lp.device
        self.in_len = host_tensor(np.asarray(in_lens, dtype=np.int64), dev)
        self.tgt_len = host_tensor(np.asarray(tgt_lens, dtype=np.int64), dev)
        self.toff = host_tensor(np.asarray(offsets, dtype=np.int64), dev)
        self.max_target = max(tgt_lens, default=0)
        self.compute = FLOAT_COMPUTE[lp.dtype]
        self.SP = 2 * self.max_target + 1


def nll(prep: Prepared):
    """(nll (N,), log_alpha (N, T, S')) in the accumulation dtype."""
    T, N, _ = prep.lp.shape
    log_alpha = TensorBase._empty((N, T, prep.SP), prep.compute, prep.lp.device).fill_(float("-inf"))
    out = TensorBase._empty((N,), prep.compute, prep.lp.device)
    _k.ctc_alpha(log_alpha, out, prep.lp, prep.tg, prep.toff, prep.ts, prep.in_len, prep.tgt_len, prep.blank,
                 prep.max_target, prep.compute.name)
    return out, log_alpha


def nll_backward(prep: Prepared, grad_nll, loss, log_alpha, zero_infinity: bool):
    """d(sum_b grad_nll[b] * nll[b]) / d log_probs, (T, N, C), torch's formula (see the kernel)."""
    T, N, C = prep.lp.shape
    log_beta = TensorBase._empty((N, T, prep.SP), prep.compute, prep.lp.device).fill_(float("-inf"))
    grad = TensorBase._empty((T, N, C), prep.lp.dtype, prep.lp.device)
    if grad.numel() == 0:
        return grad
    gout = grad_nll.to(prep.compute).contiguous()
    _k.ctc_grad(grad, log_alpha, log_beta, loss, gout, prep.lp, prep.tg, prep.toff, prep.ts, prep.in_len,
                prep.tgt_len, prep.blank, prep.max_target, zero_infinity, prep.compute.name)
    return grad


def reduce(loss, tgt_lens, reduction: str, zero_infinity: bool, unbatched: bool, dtype) -> Tensor:
    """torch's ending of ctc_loss: infinite losses zeroed with ``zero_infinity``, then the reduction."""
    loss = loss.to(dtype)
    if zero_infinity:
        loss = loss.masked_fill(loss == float("inf"), 0.0)
    if reduction == "mean":
        div = host_tensor(np.maximum(np.asarray(tgt_lens, dtype=np.float64), 1.0), loss.device).to(loss.dtype)
        return (loss / div).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """torch.nn.functional.ctc_loss (see the module docstring)."""
    lp, tg, in_lens, tgt_lens, offsets, ts, unbatched = check(log_probs, targets, input_lengths, target_lengths,
                                                              blank, reduction, zero_infinity)
    prep = Prepared(lp, tg, in_lens, tgt_lens, offsets, ts, blank)
    loss, _ = nll(prep)
    return reduce(loss, tgt_lens, reduction, zero_infinity, unbatched, log_probs.dtype)
