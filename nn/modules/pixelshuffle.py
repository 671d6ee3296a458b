"""``nn.PixelShuffle`` and ``nn.PixelUnshuffle``, in torch's file, over ``F.pixel_shuffle`` / ``F.pixel_unshuffle``."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r), as torch.nn.PixelShuffle (a reshape and permute)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W), the inverse of PixelShuffle, as torch.nn.PixelUnshuffle."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
