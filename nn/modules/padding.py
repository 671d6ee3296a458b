"""The padding layers, in torch's file: ``ZeroPad1d/2d/3d``, ``ConstantPad1d/2d/3d``,
``ReflectionPad1d/2d/3d``, ``ReplicationPad1d/2d/3d`` and ``CircularPad1d/2d/3d``, each ``F.pad`` with
its mode and torch's reprs (the padding as a tuple of (left, right[, top, bottom[, front, back]]))."""
from __future__ import annotations

from .. import functional as F
from .module import Module
from .utils import _ntuple


class _PadNd(Module):
    _mode = "constant"
    _n = 2  # entries of the padding tuple: 2 per padded dim

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(self._n)(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value`` by ``padding`` = (left, right) (an int pads both), as torch.nn.ConstantPad1d."""

    pass


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value`` by (left, right, top, bottom) (an int pads all four), as
    torch.nn.ConstantPad2d."""

    _n = 4


class ZeroPad1d(ConstantPad1d):
    """ConstantPad1d with 0, as torch.nn.ZeroPad1d."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """ConstantPad2d with 0, as torch.nn.ZeroPad2d."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dim with its reflection (the edge not repeated), as torch.nn.ReflectionPad1d; each pad must be
    smaller than the dim."""

    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dims with their reflection (the edge not repeated), as torch.nn.ReflectionPad2d."""

    _mode, _n = "reflect", 4


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating its edge value, as torch.nn.ReplicationPad1d."""

    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dims by repeating their edge values, as torch.nn.ReplicationPad2d."""

    _mode, _n = "replicate", 4


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value`` by (left, right, top, bottom, front, back), as torch.nn.ConstantPad3d."""

    _n = 6


class ZeroPad3d(ConstantPad3d):
    """ConstantPad3d with 0, as torch.nn.ZeroPad3d."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad3d(_PadNd):
    """Pad the last three dims with their reflection (the edge not repeated), as torch.nn.ReflectionPad3d."""

    _mode, _n = "reflect", 6


class ReplicationPad3d(_PadNd):
    """Pad the last three dims by repeating their edge values, as torch.nn.ReplicationPad3d."""

    _mode, _n = "replicate", 6


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        d = self._n // 2
        if input.ndim not in (d + 1, d + 2):
            raise ValueError(f"expected {d + 1}D or {d + 2}D input (got {input.ndim}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim with the values from its other end (wrapping around), as torch.nn.CircularPad1d."""


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims circularly, as torch.nn.CircularPad2d."""

    _n = 4


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims circularly, as torch.nn.CircularPad3d."""

    _n = 6
