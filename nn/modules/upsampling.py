"""``nn.Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d`` (align_corners=True, as
torch's), in torch's file, over ``F.interpolate``."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Upsample(Module):
    """Resize the spatial dims to ``size`` or by ``scale_factor`` (F.interpolate: 'nearest', 'linear', 'bilinear';
    other modes are NotImplementedError), as torch.nn.Upsample."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else (
            tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return info + f", mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode 'nearest' over 4-D input, as torch.nn.UpsamplingNearest2d."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode 'bilinear' and align_corners=True, as torch.nn.UpsamplingBilinear2d."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
