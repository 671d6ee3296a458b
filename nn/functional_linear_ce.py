"""``linear_cross_entropy`` and ``LinearCrossEntropyOptions``: cross entropy of a linear layer's
output without the whole (N, num_classes) logits in memory at once.

An LLM head's logits are the largest tensor of a step (tokens times vocabulary). With
``options=None`` this is torch's reference, ``cross_entropy(linear(input, W, b), target)``; with
options it walks the rows in chunks of ``batch_chunk_size``: each chunk's logits are made by the
matmul kernel, reduced to per-row losses and log-sum-exps by the fused cross-entropy kernel, and
freed. Backward recomputes each chunk's logits and turns them into the gradient of the logits with
the fused cross-entropy backward kernel, from which the chunk's input gradient and its share of
the weight and bias gradients follow; so forward and backward each hold one chunk's logits, and
only the (N,) log-sum-exps are kept between them. As in torch, the chunked path supports first
derivatives only.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Literal

from ..autograd.function import Function
from ..autograd.grad_mode import is_grad_enabled
from ..core.ops import loss as _loss
from ..core.ops.table import OPS as _OPS
from ..core.functional import function as _function
from ..core.factories import empty, zeros
from ..core.tensor import Tensor
from ..runtime import dtype as dt
from ..runtime.dtype_policy import FLOAT_COMPUTE

__all__ = ["linear_cross_entropy"]  # the options class is nn's (torch.nn.LinearCrossEntropyOptions)

_linear = _function(_OPS["linear"], "linear", numpy_names=False)
_cross_entropy = _function(_OPS["cross_entropy"], "cross_entropy", numpy_names=False)

_ACC_DTYPES = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
# torch's per-(device type, dtype) picks; other pairs take the fallback
_AUTO_DEFAULTS = {("cuda", dt.bfloat16): ("compact", "aspect_ratio:2"),
                  ("cuda", dt.float16): ("compact", "aspect_ratio:2"),
                  ("cpu", dt.bfloat16): ("accurate", "aspect_ratio"), ("cpu", dt.float16): ("accurate", "aspect_ratio")}
_AUTO_FALLBACK = ("compact", "aspect_ratio:2")


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """``torch.nn.LinearCrossEntropyOptions``: how :func:`linear_cross_entropy` chunks the rows.

    ``batch_chunk_size`` rows per chunk (None: one chunk unless ``chunking_method`` picks);
    ``chunking_method`` ``"auto"``, ``"aspect_ratio"`` (a chunk's logits as large as the input:
    ``next_pow2(ceil(N / ceil(C / in_features)))`` rows) or ``"aspect_ratio:K"`` (K times fewer)
    or None; ``acc_policy`` and ``acc_dtype`` as torch validates them (the fused kernels always
    reduce in fp32, fp64 for fp64, whatever they say); ``allow_retain_graph`` is accepted (backward
    recomputes from saved inputs here, so a second backward always works)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: Literal["accurate", "balanced", "compact", "auto"] = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in {"auto", "accurate", "balanced", "compact"}:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = str(self.chunking_method).partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int)
                                                  and not isinstance(self.batch_chunk_size, bool)
                                                  and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in _ACC_DTYPES:
            raise ValueError(f"acc_dtype must be one of {{None, tritensor.float16, tritensor.bfloat16, "
                             f"tritensor.float32, tritensor.float64}}, got {self.acc_dtype!r}. Pass "
                             "acc_dtype=None to let the op pick automatically.")

    @staticmethod
    def _ceil_div(a: int, b: int) -> int:
        return -(-a // b)

    def _compute_batch_chunk_size(self, num_batches: int, in_features: int, num_classes: int,
                                  method: str | None = None) -> int:
        method = str(method if method is not None else self.chunking_method)
        factor = int(method.split(":", 1)[1]) if ":" in method else 1
        target = self._ceil_div(num_batches, self._ceil_div(num_classes, max(in_features, 1)))
        chunk = 1 << (target - 1).bit_length() if target > 0 else 0
        return min(chunk // factor, num_batches)

    def _adjust(self, num_batches, in_features, num_classes, dtype, device=None):
        """The options with "auto" and None resolved for one call (torch's rules)."""
        acc_policy, method = self.acc_policy, self.chunking_method
        if method == "auto" and self.batch_chunk_size is not None:
            method = None
        if acc_policy == "auto" or method == "auto":
            ap, cm = (_AUTO_DEFAULTS.get((device.type, dtype), _AUTO_FALLBACK) if device is not None
                      else _AUTO_FALLBACK)
            acc_policy = ap if acc_policy == "auto" else acc_policy
            method = cm if method == "auto" else method
        size = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size, num_batches)
        if method is not None:
            size = self._compute_batch_chunk_size(num_batches, in_features, num_classes, method)
            if self.batch_chunk_size is not None and self.batch_chunk_size != size:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method ('{method}') give "
                                 f"different chunk sizes ({self.batch_chunk_size} vs {size}); pass only one.")
        acc_dtype = self.acc_dtype
        if acc_dtype is None:
            acc_dtype = (dt.float32 if self.acc_policy == "auto" and dtype in (dt.float16, dt.bfloat16)
                         and device is not None else dtype)
        return dataclasses.replace(self, acc_policy=acc_policy, chunking_method=method,
                                   batch_chunk_size=max(1, size), acc_dtype=acc_dtype)


def _chunks(n: int, size: int):
    return [(s, min(s + size, n)) for s in range(0, n, size)]


class _ChunkedLinearCrossEntropy(Function):
    """(N, D) input, (C, D) weight, (C,) bias, (N,) int64 target -> per-row losses, their sum or
    their weighted mean, one chunk of logits at a time; backward recomputes each chunk."""

    @staticmethod
    def forward(ctx, x, weight, bias, target, class_weight, reduction, ignore_index, label_smoothing, chunk):
        N = x.shape[0]
        compute = FLOAT_COMPUTE[x.dtype]
        w, wsum = _loss.class_weights(class_weight, x)
        rows = empty((N,), dtype=compute, device=x.device)
        lse = empty((N,), dtype=compute, device=x.device)
        wt = empty((N,), dtype=compute, device=x.device) if reduction == "mean" else None
        for s, e in _chunks(N, chunk):
            logits = _linear(x[s:e], weight, bias)
            loss_c, lse_c, _, wt_c = _loss.cross_entropy_rows(logits, target[s:e], ignore_index, w, wsum,
                                                              label_smoothing, row_weights=reduction == "mean")
            rows[s:e] = loss_c
            lse[s:e] = lse_c
            if wt is not None:
                wt[s:e] = wt_c
            del logits
        denom = None
        if reduction == "none":
            out = rows
        else:
            out = rows.sum()
            if reduction == "mean":
                # torch divides by the summed weights of the non-ignored targets; all ignored: nan
                denom = wt.sum()
                out = out / denom
        ctx.save_for_backward(x, weight, bias, target, lse)
        ctx.rest = (w, wsum, denom, reduction, ignore_index, label_smoothing, chunk)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        if is_grad_enabled():  # the chunk loop below is not recorded: refuse rather than lose history
            raise NotImplementedError("double backward (create_graph=True) through linear_cross_entropy with "
                                      "options is not implemented; pass options=None")
        x, weight, bias, target, lse = ctx.saved_tensors
        w, wsum, denom, reduction, ignore_index, label_smoothing, chunk = ctx.rest
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        N, D = x.shape
        C = weight.shape[0]
        compute = FLOAT_COMPUTE[x.dtype]
        gx = empty((N, D), dtype=x.dtype, device=x.device) if need_x else None
        # the weight and bias gradients sum over every chunk: kept in the compute dtype meanwhile
        gw = zeros((C, D), dtype=compute, device=x.device) if need_w else None
        gb = zeros((C,), dtype=compute, device=x.device) if need_b and bias is not None else None
        g = g.to(compute)
        for s, e in _chunks(N, chunk):
            logits = _linear(x[s:e], weight, bias)
            g_c = g[s:e] if reduction == "none" else g
            dlogits = _loss.cross_entropy_backward(g_c, logits.shape, logits, target[s:e], lse[s:e], w, wsum, 1,
                                                   denom, ignore_index, label_smoothing)
            del logits
            if gx is not None:
                gx[s:e] = dlogits.matmul(weight)
            if gw is not None:
                gw.add_(dlogits.t().matmul(x[s:e]).to(compute))
            if gb is not None:
                gb.add_(dlogits.to(compute).sum(0))
        return (gx, None if gw is None else gw.to(weight.dtype), None if gb is None else gb.to(bias.dtype),
                None, None, None, None, None, None)


def _check_tensor(v, name: str) -> None:
    if not isinstance(v, Tensor):
        raise TypeError(f"linear_cross_entropy(): argument '{name}' must be Tensor, not {type(v).__name__}")


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0,
                         options: LinearCrossEntropyOptions | None = None) -> Tensor:
    """``torch.nn.functional.linear_cross_entropy``: ``cross_entropy(linear(input, linear_weight,
    linear_bias), target, ...)``; with ``options`` (a :class:`LinearCrossEntropyOptions`) the rows are
    processed in chunks so the full logits never exist (see the module's docstring)."""
    _check_tensor(input, "input")
    _check_tensor(linear_weight, "linear_weight")
    _check_tensor(target, "target")
    if linear_bias is not None:
        _check_tensor(linear_bias, "linear_bias")
    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"linear_cross_entropy(): argument 'options' must be LinearCrossEntropyOptions or None, "
                        f"not {type(options).__name__}")
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), "
                           f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
                           f" batched input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    # cross_entropy tells probabilities from indices by the target's shape: so does this
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = ignore_index if ignore_index is not None else -100

    chunked = (options is not None and not out_features and reduction in {"mean", "sum", "none"}
               and target.dtype == dt.int64 and not probabilities)
    if options is not None and not chunked:
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                      "{'mean','sum','none'}, target.dtype == int64 class indices, out_features == (). Got "
                      f"reduction={reduction!r}, target.dtype={target.dtype}, out_features={out_features}.",
                      stacklevel=2)
    if chunked:
        # the same checks (torch's messages) cross_entropy makes, on a free (N, C) view standing in
        # for the logits: nothing is allocated for them
        stand_in = input.new_empty((1,)).expand(*num_batches, num_classes)
        _loss.check_cross_entropy(stand_in, target, reduction, ignore_index, label_smoothing, weight)
        x2 = input if num_batches else input.unsqueeze(0)
        t1 = target if num_batches else target.unsqueeze(0)
        opts = options._adjust(num_batches=x2.shape[0], in_features=in_features, num_classes=num_classes,
                               dtype=input.dtype, device=input.device)
        out = _ChunkedLinearCrossEntropy.apply(x2, linear_weight, linear_bias, t1, weight, reduction,
                                               int(ignore_index), float(label_smoothing), opts.batch_chunk_size)
        return out.squeeze(0) if not num_batches and reduction == "none" else out

    if out_features:
        linear_weight = linear_weight.reshape((math.prod(out_features, start=num_classes), in_features))
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(math.prod(out_features, start=num_classes))
    logits = _linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return _cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                          label_smoothing=label_smoothing)

