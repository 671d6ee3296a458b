"""The batch-norm statistics ops that run kernels (``batch_norm_stats``, ``batch_norm_elemt``,
``batch_norm_backward_reduce``: core/ops/batch_norm_stats.py) have no derivative in torch: their
results join the graph, and asking for a gradient through them raises torch's error at backward
instead of leaving their inputs' gradients silently short. The family's other ops are made of
recorded ops and need nothing here.
"""
from __future__ import annotations

from ...core.ops import batch_norm_stats as _bns
from ..function import BuiltinFunction


class NotImplementedBackward(BuiltinFunction):
    """Runs a core entry; its backward raises torch's 'not implemented' error for the op."""

    @staticmethod
    def forward(ctx, name, impl, *args):
        ctx.name = name
        outs = impl(*args)
        # backward_reduce leaves out what was not asked for (None): the graph holds the tensors, the recorder
        # puts the Nones back
        return tuple(t for t in outs if t is not None) if isinstance(outs, tuple) else outs

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{ctx.name} is not implemented")


def _recorder(name: str):
    impl = getattr(_bns, name)

    def record(*args):
        out = NotImplementedBackward.apply(name, impl, *args)
        if name != "batch_norm_backward_reduce":
            return out
        present = iter(out if isinstance(out, tuple) else (out,))
        input_g, weight_g, bias_g = args[5:8]
        return tuple(next(present) if want else None for want in (input_g, input_g, weight_g, bias_g))

    record.__name__ = record.__qualname__ = name
    return record


RECORD = {name: _recorder(name) for name in ("batch_norm_stats", "batch_norm_elemt", "batch_norm_backward_reduce")}
