"""Derivatives of the copying ops: ``clone`` (and so ``contiguous``), ``to`` (dtype and device
casts), ``copy_`` and ``fill_``/``zero_`` (core entries: ``core/ops/copies.py``; kernels:
``triton_kernels/copies.py``). The autograd layer calls the recorders in :data:`RECORD` only when
grad mode is on and an argument requires grad."""
from __future__ import annotations

from ...core.ops import copies as _copies
from ...core.tensor import Tensor
from ..function import BuiltinFunction, check_inplace
from ..grad_mode import no_grad


class Clone(BuiltinFunction):
    """clone's derivative: the gradient passes through unchanged."""
    @staticmethod
    def forward(ctx, x):
        return _copies.clone(x)

    @staticmethod
    def backward(ctx, g):
        return g


class ToCopy(BuiltinFunction):
    """``x.to(dtype/device)`` that made a new tensor: the gradient goes back to x's dtype and
    device (the engine casts it)."""

    @staticmethod
    def forward(ctx, x, converted):
        return converted

    @staticmethod
    def backward(ctx, g):
        return g, None


class CopyInto(BuiltinFunction):
    """``self.copy_(src)``: self's old value is overwritten (no gradient); src's gradient is
    the incoming one, summed back over broadcasting and cast to src's dtype by the engine."""

    @staticmethod
    def forward(ctx, self, src):
        _copies.copy_(self, src)
        ctx.mark_dirty(self)
        return self

    @staticmethod
    def backward(ctx, g):
        return None, g


class Fill(BuiltinFunction):
    """fill_'s derivative: the written tensor's old values get no gradient, nor does the value."""
    @staticmethod
    def forward(ctx, self, value):
        _copies.fill_(self, value)
        ctx.mark_dirty(self)
        return self

    @staticmethod
    def backward(ctx, g):
        return None, None


def _clone(self, *, memory_format=None):
    return Clone.apply(self)


def _to(self, *args, **kwargs):
    with no_grad():
        out = _copies.to(self, *args, **kwargs)
    if out is self or not self._requires_grad or not out.dtype.is_floating_point:
        return out
    return ToCopy.apply(self, out)


def _copy_(self, src, non_blocking=False):
    if isinstance(src, Tensor):
        check_inplace(self)
        return CopyInto.apply(self, src)
    return _copies.copy_(self, src)


def _fill_(self, value):
    check_inplace(self)
    return Fill.apply(self, value)


RECORD = {"clone": _clone, "to": _to, "copy_": _copy_, "fill_": _fill_}  # op name -> recorder
