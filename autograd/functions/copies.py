"""Derivatives of the copying ops: ``clone`` (and so ``contiguous``), ``to`` (dtype and device
casts), ``copy_`` and ``fill_``/``zero_`` (kernels: ``triton_kernels/cast.py``)."""
from __future__ import annotations

from ...core.tensor import Tensor
from ..function import check_inplace
from ..grad_mode import no_grad
from .elementwise import Op

RAW = {}  # filled by install: the class body's clone / to / copy_ / fill_


class Clone(Op):
    @staticmethod
    def forward(ctx, x):
        return RAW["clone"](x)

    @staticmethod
    def backward(ctx, g):
        return g


class ToCopy(Op):
    """``x.to(dtype/device)`` that made a new tensor: the gradient goes back to x's dtype and
    device (the engine casts it)."""

    @staticmethod
    def forward(ctx, x, converted):
        return converted

    @staticmethod
    def backward(ctx, g):
        return g, None


class CopyInto(Op):
    """``self.copy_(src)``: self's old value is overwritten (no gradient); src's gradient is
    the incoming one, summed back over broadcasting and cast to src's dtype by the engine."""

    @staticmethod
    def forward(ctx, self, src):
        RAW["copy_"](self, src)
        ctx.mark_dirty(self)
        return self

    @staticmethod
    def backward(ctx, g):
        return None, g


class Fill(Op):
    @staticmethod
    def forward(ctx, self, value):
        RAW["fill_"](self, value)
        ctx.mark_dirty(self)
        return self

    @staticmethod
    def backward(ctx, g):
        return None, None


def _clone(self, *, memory_format=None):
    return Clone.apply(self) if self._requires_grad else RAW["clone"](self)


def _to(self, *args, **kwargs):
    with no_grad():
        out = RAW["to"](self, *args, **kwargs)
    if out is self or not self._requires_grad or not out.dtype.is_floating_point:
        return out
    return ToCopy.apply(self, out)


def _copy_(self, src, non_blocking=False):
    if isinstance(src, Tensor) and (src._requires_grad or self._requires_grad):
        check_inplace(self)
        return CopyInto.apply(self, src)
    return RAW["copy_"](self, src)


def _fill_(self, value):
    if self._requires_grad or (isinstance(value, Tensor) and value._requires_grad):
        check_inplace(self)
        return Fill.apply(self, value)
    return RAW["fill_"](self, value)


def install(Tensor) -> None:
    for name in ("clone", "to", "copy_", "fill_"):
        RAW[name] = Tensor.__dict__[name]
    Tensor.clone, Tensor.to, Tensor.copy_, Tensor.fill_ = _clone, _to, _copy_, _fill_
