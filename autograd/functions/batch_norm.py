"""Derivative of ``batch_norm`` (core entry ``core/ops/batch_norm.py``): one fused backward kernel
per call gives dx, dweight and dbias (``triton_kernels/batch_norm.py``). The kernel is not itself
recorded, so batch_norm has first derivatives only (as cross_entropy). No gradient flows to the
running statistics (buffers)."""
from __future__ import annotations

from ...core.ops import batch_norm as _bn
from ..function import BuiltinFunction
from .conv import _first_order_only


class BatchNorm(BuiltinFunction):
    """batch_norm's derivative: forward keeps the input, weight and the batch statistics (or the running ones
    in eval); backward runs the batch-norm backward kernel for input, weight and bias. First order only."""
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, training, momentum, eps):
        out, mean, rstd = _bn.native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                                                eps)
        ctx.training = bool(training)
        ctx.save_for_backward(input, weight, mean, rstd)
        return out

    @staticmethod
    def backward(ctx, g):
        _first_order_only("batch_norm")
        x, w, mean, rstd = ctx.saved_tensors
        dx, dw, db = _bn.batch_norm_backward(g, x, w, mean, rstd, ctx.training)
        need = ctx.needs_input_grad
        dw = dw.to(w.dtype) if w is not None and need[1] else None
        db = db.to(w.dtype if w is not None else x.dtype) if need[2] else None
        return (dx if need[0] else None), dw, db, None, None, None, None, None


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """The recorder of ``batch_norm``: torch's checks first, then the Function."""
    _bn.check_batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return BatchNorm.apply(input, weight, bias, running_mean, running_var, training, momentum, eps)


RECORD = {"batch_norm": batch_norm}
