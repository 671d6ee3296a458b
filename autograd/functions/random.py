"""Derivatives of the in-place random fills ``normal_``, ``uniform_``, ``random_``, ``bernoulli_``
(core entries: ``core/ops/random.py``).

A fill overwrites every element, so nothing flows back to what the tensor held before: the
gradient is zero (PyTorch's). Recording the fill matters anyway: it gives the overwritten tensor
a new ``grad_fn`` (the old one would send gradients to inputs the values no longer depend on),
and a leaf that requires grad is refused, as in PyTorch.
"""
from __future__ import annotations

from ...core.ops import random as _r
from ..function import BuiltinFunction, check_inplace


class Fill(BuiltinFunction):
    """The random in-place fills' derivative (normal_, uniform_, random_, bernoulli_): the overwritten values
    get zero gradient."""
    @staticmethod
    def forward(ctx, x, fill, args, kwargs):
        fill(x, *args, **kwargs)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 0, None, None, None


def _recorder(fill):
    def record(input, *args, **kwargs):
        check_inplace(input)
        return Fill.apply(input, fill, args, kwargs)

    record.__name__ = fill.__name__
    return record


RECORD = {f.__name__: _recorder(f) for f in (_r.normal_, _r.uniform_, _r.random_, _r.bernoulli_)}
